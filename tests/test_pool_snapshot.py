"""Snapshots: a restart on an unchanged pool reads no file and answers exactly as a fresh load; anything
changed, new, gone or too recent to trust is read again; a snapshot we cannot trust is ignored."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool, loader, snapshot
from soma_lsp.pool.snapshot import cache_directory
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from soma_lsp.server import evidence
from pool_files import rec, write

REPO = Path(__file__).resolve().parent.parent
QUERIES = [RetrievalQuery(text="rotary attention loss spike", architecture=["Attention", "RMSNorm"], limit=5,
                          now=None),
           RetrievalQuery(text="run warmup", limit=None)]


@pytest.fixture(autouse=True)
def quick_racy_window(monkeypatch):
    """Stamps are trusted 50 ms after a file changed, not 2 s, so that tests need not wait long."""
    monkeypatch.setattr(loader, "RACY_NS", 50_000_000)


def settle(root: Path, seconds_ago: float = 60) -> None:
    """Date every file under root back and wait out the racy window (the inode's ctime moved just now),
    so that their stamps are trusted."""
    past = time.time() - seconds_ago
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (past, past))
    time.sleep(loader.RACY_NS / 1e9 + 0.01)


def varied_pool(root: Path) -> None:
    write(root / "a" / "one.json", rec(1, conclusion={"headline": "rotary attention"}, created_at="2026-01-02T03:04:05",
                                       finished_at="2026-01-03T00:00:00+05:30", status="finished",
                                       architecture={"Attention": 2, "RMSNorm": 1}, owner={"team": ["x", 1.5]},
                                       metrics={"loss": "NaN", "acc": {"value": 0.9, "baseline": 0.8, "goal": "max"}},
                                       code=["model.py::Attention.forward", "train.py"], tags=["t"]))
    write(root / "a" / "many.json", [rec(2, notes="loss spike at warmup"), rec(3, status="weird"), {"id": 5}])
    write(root / "a" / "n.json", "{no record here")  # between two files with records: it holds none
    write(root / "b" / "runs.jsonl", "\n".join(json.dumps(rec(i, notes=f"warmup {i} spike", importance=0.5))
                                              for i in range(10, 40)) + "\nnot json\n" + json.dumps(rec(2)) + "\n")
    write(root / "b" / "c.yaml", "id: exp-50\nname: yaml run\narchitecture: [Attention, SwiGLU]\n---\nid: exp-51\n")
    settle(root)


def open_pool(root: Path, cache: Path, progress=None) -> LivePool:
    pool = LivePool([root], LiveIndex(), cache_dir=cache)
    pool.load(progress)
    return pool


def answers(pool: LivePool) -> list:
    out = []
    for query in QUERIES:
        for r in pool.index.rank(query):
            out.append((r.record.id, r.score, r.components, r.dead_end))
    return out


def everything(pool: LivePool) -> str:
    """Every field of every record (as text: a NaN metric is not == to itself)."""
    return repr([(r, r.extra, r.source, r.warnings) for r in pool.records()])


def test_a_restart_reads_no_file_and_answers_exactly_as_a_fresh_load(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    varied_pool(root)
    first = open_pool(root, cache)
    assert first.unsaved and first.save_snapshot() and not first.unsaved
    read = []
    again = open_pool(root, cache, lambda done, total: read.append(total))
    assert read == [0]  # nothing to read
    assert not again.unsaved
    fresh = open_pool(root, None)
    assert answers(again) == answers(fresh) and answers(fresh)
    assert everything(again) == everything(fresh)
    assert math.isnan(again.get("exp-1").metrics[0].value)
    assert again.get("exp-1").finished_at.utcoffset().seconds == 19800
    assert again.problems == fresh.problems and again.summary() == fresh.summary()
    assert {k: v for k, v in again.summary().items() if k.endswith("kind")} == {
        "errors_by_kind": {"duplicate": 1, "json": 2, "validation": 3}, "warnings_by_kind": {"status": 1}}
    assert repr(again.index.tied_to("model.py")) == repr(fresh.index.tied_to("model.py")) != "[]"


def test_changed_new_deleted_and_renamed_files_are_read_again(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    varied_pool(root)
    open_pool(root, cache).save_snapshot()
    write(root / "a" / "one.json", rec(1, conclusion={"headline": "changed on disk"}))
    (root / "a" / "many.json").unlink()
    os.rename(root / "b" / "c.yaml", root / "b" / "d.yaml")
    write(root / "new.json", rec(99))
    lines = (root / "b" / "runs.jsonl").read_text().splitlines()
    lines[3] = json.dumps(rec(13, notes="rewritten line"))
    (root / "b" / "runs.jsonl").write_text("\n".join(lines) + "\n")
    changes = []
    pool = LivePool([root], LiveIndex(), cache_dir=cache)
    pool.subscribe(changes.append)
    pool.load()
    fresh = open_pool(root, None)
    assert pool.get("exp-1").headline == "changed on disk" and pool.get("exp-3") is None
    assert pool.get("exp-50").source.path.endswith("d.yaml") and pool.get("exp-99") is not None
    assert pool.get("exp-13").notes == "rewritten line" and pool.get("exp-2").source.path.endswith("runs.jsonl")
    assert answers(pool) == answers(fresh) and everything(pool) == everything(fresh)
    assert pool.problems == fresh.problems and pool.unsaved
    added = {i for change in changes for i in change.added}
    assert "exp-13" in added and "exp-12" not in added  # an unchanged line keeps its record


def test_a_file_changed_too_recently_to_trust_its_stamp_is_read_again(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    path = write(root / "r.json", rec(1, name="before"))  # just written: its stamp is not trusted
    stamp = os.stat(path)
    open_pool(root, cache).save_snapshot()
    path.write_text(json.dumps(rec(1, name="after!")))  # same size, and the same mtime as far as a
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # coarse clock could tell
    assert os.stat(path).st_size == stamp.st_size
    assert open_pool(root, cache).get("exp-1").name == "after!"


def test_an_extra_value_a_snapshot_cannot_hold_keeps_its_file_read_each_time(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    write(root / "r.yaml", "id: exp-1\nname: dated\nowner_since: 2025-01-02\n")  # a YAML date in `extra`
    write(root / "s.json", rec(2))
    settle(root)
    open_pool(root, cache).save_snapshot()
    read = []
    pool = open_pool(root, cache, lambda done, total: read.append(total))
    assert read[-1] == (root / "r.yaml").stat().st_size  # only that file
    assert str(pool.get("exp-1").extra["owner_since"]) == "2025-01-02" and pool.get("exp-2") is not None


@pytest.mark.parametrize("spoil", ["truncated", "garbage", "a record's byte flipped", "a header byte flipped",
                                   "empty", "writable by others", "other format"])
def test_a_snapshot_we_cannot_trust_is_ignored_and_the_pool_read(tmp_path, caplog, spoil):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    varied_pool(root)
    saved = open_pool(root, cache)
    saved.save_snapshot()
    path = saved.snapshot_path
    data = path.read_bytes()
    if spoil == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif spoil == "garbage":
        path.write_bytes(data[:100] + os.urandom(len(data) - 100))
    elif spoil == "a record's byte flipped":  # the records come first: everything else still fits
        at = snapshot.PREFIX + 5
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    elif spoil == "a header byte flipped":  # the header comes last
        path.write_bytes(data[:-40] + bytes([data[-40] ^ 1]) + data[-39:])
    elif spoil == "empty":
        path.write_bytes(b"")
    elif spoil == "writable by others":
        path.chmod(0o666)
    else:
        path.write_bytes(b"SOMASNAP" + data[8:].replace(b"format", b"formax", 1))
    caplog.set_level(logging.WARNING)
    read = []
    pool = open_pool(root, cache, lambda done, total: read.append(total))
    assert read[-1] > 0 and answers(pool) == answers(open_pool(root, None))
    assert "ignoring snapshot" in caplog.text
    if "flipped" in spoil:
        assert ("header checksum" in caplog.text) == ("header" in spoil) and "checksum" in caplog.text


def test_a_restored_index_keeps_updating_and_compacting(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    for i in range(3000):
        write(root / f"d{i % 10}" / f"r{i}.json", rec(i, notes=f"warmup spike {i % 7}"))
    settle(root)
    open_pool(root, cache).save_snapshot()
    pool = open_pool(root, cache)
    files = [root / f"d{i % 10}" / f"r{i}.json" for i in range(0, 3000, 6)]
    for path in files:
        path.unlink()
    gone = [root / f"d{i}" for i in range(1, 10, 2)]  # and whole directories
    for directory in gone:
        for path in directory.iterdir():
            path.unlink()
        directory.rmdir()
    pool.apply(files + gone)
    assert len(pool) == 1000 and pool.index._columns.size == 1000  # 2000 slots died: compacted
    assert answers(pool) == answers(open_pool(root, None))
    write(root / "d0" / "r0.json", rec(0, notes="back again"))
    pool.apply([root / "d0" / "r0.json"])
    assert pool.get("exp-0").notes == "back again" and answers(pool) == answers(open_pool(root, None))


def test_the_snapshot_lives_in_the_cache_directory_never_in_a_pool(tmp_path):
    assert cache_directory({"SOMA_CACHE_DIR": "/x"}) == Path("/x")
    assert cache_directory({"XDG_CACHE_HOME": "/c"}) == Path("/c/soma-lsp")
    assert cache_directory({"HOME": "/h"}) == Path(os.path.expanduser("~")) / ".cache" / "soma-lsp"
    root, cache = tmp_path / "pool", tmp_path / "cache"
    varied_pool(root)
    before = sorted(root.rglob("*"))
    pool = open_pool(root, cache)
    pool.save_snapshot()
    assert sorted(root.rglob("*")) == before and pool.snapshot_path.parent == cache
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and oct(pool.snapshot_path.stat().st_mode & 0o777) == "0o600"
    assert LivePool([root], LiveIndex()).snapshot_path is None  # no cache directory, no snapshot
    assert LivePool([root], None, cache_dir=cache).snapshot_path is None  # `check`: always reads


def _query(root: Path, cache: Path, *flags: str) -> str:
    env = {**os.environ, "SOMA_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-m", "soma_lsp", "query", "warmup spike", "--now", "none", "--json",
                           "--limit", "0", "--pool", str(root), *flags], capture_output=True, text=True, env=env,
                          cwd=REPO, check=True)
    return done.stdout


def _written(cache: Path) -> Path:
    """The snapshot a CLI command writes after its answer, in a detached process: waited for (a hang
    guard, not a time limit); nothing else is there, and no temporary is left (renamed into place whole)."""
    deadline = time.monotonic() + 120
    while not list(cache.glob("pool-*.snapshot")):
        assert time.monotonic() < deadline, "no snapshot written"
        time.sleep(0.05)
    (snapshot,) = cache.iterdir()
    return snapshot


def test_the_cli_query_writes_the_snapshot_and_answers_the_same_from_it(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    varied_pool(root)
    time.sleep(2.05)  # the CLI's own racy window (loader.RACY_NS, unpatched there)
    assert _query(root, cache, "--no-snapshot") and not cache.exists()
    first = _query(root, cache)
    snapshot = _written(cache)  # by a process of its own, after the answer
    written = snapshot.stat().st_ino
    assert _query(root, cache) == first == _query(root, cache, "--no-snapshot")
    assert snapshot.stat().st_ino == written  # nothing read, nothing written again (a write replaces it)


@pytest.mark.parametrize("where", ["appended", "prepended"])
def test_a_restored_jsonl_that_grows_updates_only_the_lines_that_moved_or_are_new(tmp_path, where):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    path = write(root / "runs.jsonl", "".join(json.dumps(rec(i, status="odd" if i % 5 == 0 else "failed")) + "\n"
                                              for i in range(50)))
    settle(root)
    open_pool(root, cache).save_snapshot()
    changes = []
    pool = LivePool([root], LiveIndex(), cache_dir=cache)
    pool.subscribe(changes.append)
    pool.load()
    assert pool.restored == 1
    new = json.dumps(rec(99, status="odd")) + "\n"
    path.write_text(path.read_text() + new if where == "appended" else new + path.read_text())
    pool.apply([path])
    fresh = open_pool(root, None)
    moved = () if where == "appended" else tuple(f"exp-{i}" for i in range(50))  # their lines changed
    assert changes[-1].added == tuple(sorted(("exp-99", *moved))) and changes[-1].removed == ()
    assert pool.problems == fresh.problems and len(pool.problems_for(str(path))) == 11  # the unknown statuses
    assert everything(pool) == everything(fresh) and answers(pool) == answers(fresh)


def test_snapshots_unused_for_a_month_and_leftovers_of_interrupted_writes_are_pruned(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    varied_pool(root)
    cache.mkdir()
    old, recent, leftover = cache / "pool-old.snapshot", cache / "pool-recent.snapshot", cache / ".snapshot-x"
    for path, days in ((old, 31), (recent, 29), (leftover, 2)):
        path.write_bytes(b"x")
        past = time.time() - days * 86400
        os.utime(path, (past, past))
    pool = open_pool(root, cache)
    pool.save_snapshot()
    assert sorted(p.name for p in cache.iterdir()) == sorted([recent.name, pool.snapshot_path.name])
    past = time.time() - 40 * 86400
    os.utime(pool.snapshot_path, (past, past))
    open_pool(root, cache)  # a restore marks it used
    assert time.time() - pool.snapshot_path.stat().st_mtime < 60


def test_content_written_back_with_its_old_mtime_is_read_again(tmp_path):
    """`cp -p`, `rsync -t`, `touch -r`: same size, same mtime, same inode — only ctime tells."""
    root, cache = tmp_path / "pool", tmp_path / "cache"
    path = write(root / "r.json", rec(1, name="before"))
    settle(root)
    stamp = os.stat(path)
    open_pool(root, cache).save_snapshot()
    path.write_text(json.dumps(rec(1, name="after!")))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    time.sleep(loader.RACY_NS / 1e9 + 0.01)
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (stamp.st_size, stamp.st_mtime_ns, stamp.st_ino)
    assert open_pool(root, cache).get("exp-1").name == "after!"


def test_a_pool_without_a_valid_record_is_restored_too(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    write(root / "bad.json", "{not json")
    settle(root)
    open_pool(root, cache).save_snapshot()
    pool = open_pool(root, cache)
    assert pool.restored == 1 and not pool.unsaved and len(pool) == 0
    assert [p.kind for ps in pool.problems.values() for p in ps] == ["json"]


def test_a_restored_index_knows_which_records_name_a_commit_without_building_them(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    write(root / "runs.jsonl", "\n".join(json.dumps(rec(i, **({"commit": "a1b2c3d"} if i % 3 == 0 else {})))
                                         for i in range(12)) + "\n")
    settle(root)
    open_pool(root, cache).save_snapshot()
    again = open_pool(root, cache)
    assert again.restored == 1
    assert sorted(again.index.ids_naming_a_commit()) == sorted(f"exp-{i}" for i in range(0, 12, 3))
    assert again.index.changed_since(again.index.version - 1) is None  # nothing before a restore is known


def test_the_levers_table_of_a_restored_pool_leaves_its_records_stored(tmp_path):
    """A walk over every record (the evidence table) decodes each for itself: kept built, a restored
    1M pool grew by 4 GB once the table was made."""
    root, cache = tmp_path / "pool", tmp_path / "cache"
    write(root / "runs.jsonl", "\n".join(json.dumps(rec(i, notes=f"re-run of run-{i - 1} lr=3e-4"))
                                         for i in range(12)) + "\n")
    settle(root)
    fresh = open_pool(root, cache)
    fresh.save_snapshot()
    again = open_pool(root, cache)
    assert again.restored == 1
    anchors = [fresh.get("exp-5")]
    siblings = evidence.siblings_of(again.index, anchors, set())
    assert ("exp-6", "sibling of exp-5") in siblings and siblings == evidence.siblings_of(fresh.index, anchors, set())
    assert evidence.knob_tier(again.index, [("lr", "0.0003", "3e-4")])  # (the table was built on the restored pool)
    assert all(type(item) is int for item in again.index._slot_records.items)
