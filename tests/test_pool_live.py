"""The live pool over the live index: roots, incremental updates, duplicates, coalescing, snapshots."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from soma_lsp.pool import LivePool, pool_roots
from soma_lsp.retrieval import RetrievalQuery
from soma_lsp.retrieval.index import LiveIndex
from pool_files import make_pool, rec, write


# -- roots -----------------------------------------------------------------------------------

def test_pool_roots_default_setting_and_environment(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert pool_roots([a, b], None, {}) == [a / ".soma" / "pool", b / ".soma" / "pool"]
    assert pool_roots([a.as_uri()], None, {}) == [a / ".soma" / "pool"]
    assert pool_roots([a, b], "runs", {}) == [a / "runs", b / "runs"]
    assert pool_roots([a], ["runs", str(tmp_path / "shared"), "runs"], {}) == [a / "runs", tmp_path / "shared"]
    env = {"SOMA_POOL": os.pathsep.join([str(tmp_path / "x"), "rel"])}
    assert pool_roots([a], None, env) == [tmp_path / "x", a / "rel"]
    assert pool_roots([a], "s", env) == [a / "s"]  # the setting wins over the environment
    assert pool_roots([a], [], env) == [tmp_path / "x", a / "rel"]  # an empty setting is no setting
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert pool_roots([a], [str(tmp_path / "link"), str(tmp_path / "real")], {}) == [tmp_path / "real"]


def test_several_pools_merge(tmp_path):
    write(tmp_path / "one" / "a.json", rec(1))
    write(tmp_path / "two" / "b.jsonl", json.dumps(rec(2)) + "\n" + json.dumps(rec(1, name="dup")) + "\n")
    index = LiveIndex()
    pool = LivePool([tmp_path / "one", tmp_path / "two", tmp_path / "missing"], index)
    pool.load()
    assert sorted(index.get(i).name for i in ("exp-1", "exp-2")) == ["run-1", "run-2"]
    assert [p.kind for ps in pool.problems.values() for p in ps] == ["duplicate"]
    assert len(pool.files) == 2 and pool.summary()["records"] == 2


# -- incremental updates ---------------------------------------------------------------------

def test_create_change_delete_update_only_that_file(tmp_path):
    root = tmp_path / "pool"
    for i in range(20):
        write(root / f"r{i:02d}.json", rec(i))
    pool, index = make_pool(root)
    before = {r.id: r for r in index.records()}
    changes = []
    pool.subscribe(changes.append)
    version = index.version

    write(root / "new.json", rec(100))  # create
    pool.apply([root / "new.json"])
    assert index.get("exp-100") is not None and index.version == version + 1
    assert changes[-1].files == (str(root / "new.json"),) and changes[-1].added == ("exp-100",)

    write(root / "r03.json", rec(3, name="changed"))  # change
    pool.apply([root / "r03.json"])
    assert index.get("exp-3").name == "changed"
    assert changes[-1].added == ("exp-3",) and changes[-1].removed == ()

    (root / "r04.json").unlink()  # delete
    pool.apply([root / "r04.json"])
    assert "exp-4" not in index and changes[-1].removed == ("exp-4",)
    # Every other record is the very object loaded at first: nothing else was re-read or re-indexed.
    untouched = [i for i in before if i not in ("exp-3", "exp-4")]
    assert all(index.get(i) is before[i] for i in untouched)
    assert len(index) == 20 and index.version == version + 3


def test_rename_file_and_directory(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", rec(1))
    write(root / "dir" / "b.json", rec(2))
    write(root / "dir" / "deep" / "c.jsonl", json.dumps(rec(3)) + "\n")
    pool, index = make_pool(root)
    os.rename(root / "a.json", root / "renamed.json")
    pool.apply([root / "a.json", root / "renamed.json"])
    assert index.get("exp-1").source.path == str(root / "renamed.json")
    os.rename(root / "dir", root / "moved")
    pool.apply([root / "dir", root / "moved"])  # what a watcher reports for a directory rename
    assert index.get("exp-2").source.path == str(root / "moved" / "b.json")
    assert index.get("exp-3").source.path == str(root / "moved" / "deep" / "c.jsonl")
    assert pool.files == sorted(str(p) for p in (root / "renamed.json", root / "moved" / "b.json",
                                                 root / "moved" / "deep" / "c.jsonl"))
    assert pool._dirs == {str(root): 1, str(root / "moved"): 1, str(root / "moved" / "deep"): 1}
    import shutil
    shutil.rmtree(root / "moved")
    pool.apply([root / "moved"])  # a deleted directory takes its files' records along
    assert sorted(r.id for r in index.records()) == ["exp-1"] and pool._dirs == {str(root): 1}


def test_save_by_rename_and_ignored_paths(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", rec(1))
    pool, index = make_pool(root)
    write(root / "a.json.tmp~", rec(1, name="new"))  # the editor writes a temporary, then renames it
    write(root / ".hidden" / "x.json", rec(9))
    pool.apply([root / "a.json.tmp~", root / ".hidden" / "x.json", tmp_path / "elsewhere.json"])
    assert index.get("exp-1").name == "run-1" and "exp-9" not in index
    os.replace(root / "a.json.tmp~", root / "a.json")
    pool.apply([root / "a.json.tmp~", root / "a.json"])
    assert index.get("exp-1").name == "new" and pool.files == [str(root / "a.json")]


def test_duplicate_winner_deleted_or_changed_next_becomes_visible(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", rec(1, name="from-a"))
    write(root / "b.json", rec(1, name="from-b"))
    write(root / "c.json", [rec(2), rec(1, name="from-c")])
    pool, index = make_pool(root)
    assert index.get("exp-1").name == "from-a"
    assert [Path(p).name for p in pool.problems] == ["b.json", "c.json"]
    changes = []
    pool.subscribe(changes.append)

    (root / "a.json").unlink()
    pool.apply([root / "a.json"])
    assert index.get("exp-1").name == "from-b"
    assert [Path(p).name for p in pool.problems] == ["c.json"]
    assert "b.json:1" in pool.problems[str(root / "c.json")][0].message
    assert str(root / "b.json") in changes[-1].files  # its diagnostics changed (the duplicate is gone)

    write(root / "b.json", rec(3))  # the winner changes its id: the next one wins
    pool.apply([root / "b.json"])
    assert index.get("exp-1").name == "from-c" and index.get("exp-3") is not None
    assert pool.problems == {}

    write(root / "a.json", rec(1, name="back"))  # an earlier file takes over again
    pool.apply([root / "a.json"])
    assert index.get("exp-1").name == "back"
    assert [p.kind for p in pool.problems[str(root / "c.json")]] == ["duplicate"]
    assert str(root / "c.json") in changes[-1].files

    (root / "c.json").unlink()
    (root / "a.json").unlink()
    pool.apply([root / "c.json", root / "a.json"])
    assert sorted(r.id for r in index.records()) == ["exp-3"] and pool.problems == {}


def test_burst_of_5000_files_is_one_coalesced_apply(tmp_path):
    root = tmp_path / "pool"
    for i in range(5000):
        write(root / f"d{i % 50:02d}" / f"r{i:05d}.json", rec(i))
    index = LiveIndex()
    pool = LivePool([root], index, batch_files=1000)
    pool.load()
    version, changes = index.version, []
    pool.subscribe(changes.append)
    for i in range(5000):  # a `git pull` rewriting every file
        write(root / f"d{i % 50:02d}" / f"r{i:05d}.json", rec(i, notes="pulled"))
    paths = [root / f"d{i % 50:02d}" / f"r{i:05d}.json" for i in range(5000)]
    pool.apply(paths + paths[:100])  # duplicated events are read once
    assert all(index.get(f"exp-{i}").notes == "pulled" for i in range(5000))
    assert index.version == version + 5 and len(changes) == 5  # batches of whole files


def test_concurrent_apply_calls_coalesce_and_all_land(tmp_path):
    root = tmp_path / "pool"
    write(root / "seed.json", rec(0))
    pool, index = make_pool(root)
    for i in range(1, 200):
        write(root / f"r{i:03d}.json", rec(i))
    threads = [threading.Thread(target=pool.apply, args=([root / f"r{i:03d}.json"],)) for i in range(1, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(index) == 200  # every call returned only once its own path was applied


def test_queries_see_whole_files_only(tmp_path):
    """A reader ranking while a writer rewrites a 50-record file never sees a mix of two versions."""
    root = tmp_path / "pool"
    path = root / "batch.jsonl"

    def version(v):
        write(path, "".join(json.dumps(rec(i, name=f"v{v}-run", notes="shared words")) + "\n" for i in range(50)))

    version(0)
    pool, index = make_pool(root)
    stop, seen, mixed = threading.Event(), set(), []

    def reader():
        query = RetrievalQuery(text="shared words", limit=None)
        while not stop.is_set():
            names = {r.record.name for r in index.rank(query)}
            seen.update(names)
            if len(names) != 1 or len(index.rank(query)) != 50:
                mixed.append(names)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for v in range(1, 30):
            version(v)
            pool.apply([path])
    finally:
        stop.set()
        thread.join()
    assert mixed == [] and len(seen) > 1


def test_progress_reports_bytes_to_the_end(tmp_path):
    root = tmp_path / "pool"
    for i in range(30):
        write(root / f"r{i:02d}.json", rec(i))
    write(root / "big.jsonl", "".join(json.dumps(rec(100 + i, notes="n" * 200)) + "\n" for i in range(3000)))
    calls = []
    index = LiveIndex()
    LivePool([root], index).load(progress=lambda done, total: calls.append((done, total)))
    total = sum(p.stat().st_size for p in root.iterdir())
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:])) and len(calls) <= 110
    assert len(index) == 3030


def test_reload_drops_files_that_are_gone(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", rec(1))
    write(root / "b.json", rec(2))
    pool, index = make_pool(root)
    (root / "a.json").unlink()
    write(root / "c.json", rec(3))
    pool.load()  # soma.reloadPool
    assert sorted(r.id for r in index.records()) == ["exp-2", "exp-3"]
    assert pool.files == [str(root / "b.json"), str(root / "c.json")]


def test_pool_without_index_for_check(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", [rec(1), {"id": "x"}])
    pool = LivePool([root])
    pool.load()
    assert [r.id for r in pool.records()] == ["exp-1"] and pool.get("exp-1").name == "run-1"
    assert pool.summary() == {"records": 1, "files": 1, "errors": 1, "warnings": 0,
                              "errors_by_kind": {"validation": 1}, "warnings_by_kind": {}}


def test_directory_event_reads_only_new_or_gone_files(tmp_path):
    root = tmp_path / "pool"
    for i in range(10):
        write(root / "dir" / f"r{i}.json", rec(i))
    pool, index = make_pool(root)
    before = {r.id: r for r in index.records()}
    write(root / "dir" / "new.json", rec(10))  # arrived without an event of its own
    (root / "dir" / "r0.json").unlink()
    version = index.version
    pool.apply([root / "dir"])
    assert index.version == version + 1
    assert "exp-10" in index and "exp-0" not in index
    assert all(index.get(f"exp-{i}") is before[f"exp-{i}"] for i in range(1, 10))  # not re-read
    pool.apply([root / "dir"])
    assert index.version == version + 1  # nothing new: nothing to do


def test_appending_to_a_big_jsonl_touches_only_the_new_lines(tmp_path):
    root = tmp_path / "pool"
    path = root / "runs.jsonl"
    write(path, "".join(json.dumps(rec(i)) + "\n" for i in range(1000)))
    pool, index = make_pool(root)
    before = {r.id: r for r in index.records()}
    changes = []
    pool.subscribe(changes.append)
    with path.open("a") as f:  # a run finishes: one more line
        f.write(json.dumps(rec(1000, notes="new")) + "\n")
    pool.apply([path])
    assert changes[-1].added == ("exp-1000",) and changes[-1].removed == ()
    assert all(index.get(i) is r for i, r in before.items())  # same objects: not re-validated or re-indexed
    lines = path.read_text().splitlines()
    lines[500] = json.dumps(rec(500, name="fixed"))  # a record fixed in place
    lines.insert(0, json.dumps(rec(2000)))  # and a line inserted at the top: every later line moves
    path.write_text("\n".join(lines) + "\n")
    pool.apply([path])
    assert index.get("exp-500").name == "fixed" and index.get("exp-2000").source.line == 0
    assert all(index.get(f"exp-{i}").source.line == i + 1 for i in range(1001))
    assert all(index.get(f"exp-{i}").name == f"run-{i}" for i in range(1001) if i != 500)
