"""The server's own watcher: real watchfiles events on real files, waited for with a bounded loop."""

from __future__ import annotations

import json
import os
import shutil
import time

from soma_lsp.pool import PoolWatcher
from pool_files import make_pool, rec, write
from trackers_support import wait_for


def test_watcher_sees_create_change_delete_and_renames(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", rec(1))
    pool, index = make_pool(root)
    changes = []
    pool.subscribe(changes.append)
    with PoolWatcher(pool, debounce_ms=50) as watcher:
        assert watcher.running
        write(root / "sub" / "b.jsonl", json.dumps(rec(2)) + "\n")
        wait_for(lambda: "exp-2" in index, "a created file")
        write(root / "a.json", rec(1, name="changed"))
        wait_for(lambda: index.get("exp-1").name == "changed", "a changed file")
        (root / "a.json").unlink()
        wait_for(lambda: "exp-1" not in index, "a deleted file")
        os.rename(root / "sub", root / "moved")
        wait_for(lambda: index.get("exp-2") is not None and "moved" in index.get("exp-2").source.path,
                 "a renamed directory")
        tmp = write(root / "c.json.swp", rec(3))  # save by rename
        os.replace(tmp, root / "c.json")
        wait_for(lambda: "exp-3" in index, "a file saved by rename")
        write(root / ".git" / "objects.json", rec(99))
        write(root / "bad.json", "{oops")
        wait_for(lambda: str(root / "bad.json") in pool.problems, "a bad file's problem")
        assert "exp-99" not in index
    assert not watcher.running
    assert all(c.files for c in changes)


def test_file_being_written_the_later_version_wins(tmp_path):
    root = tmp_path / "pool"
    root.mkdir()
    pool, index = make_pool(root)
    path = root / "run.json"
    full = json.dumps([rec(1), rec(2, notes="complete")], indent=2)
    with PoolWatcher(pool, debounce_ms=30, step_ms=10):
        with path.open("w") as f:
            f.write(full[: len(full) // 2])
            f.flush()
            wait_for(lambda: str(path) in pool.problems, "the partial file's problem")
            f.seek(0)
            f.write(full)
            f.truncate()
        wait_for(lambda: index.get("exp-2") is not None, "the complete file")
        assert index.get("exp-2").notes == "complete" and pool.problems == {}


def test_watcher_picks_up_a_root_created_later(tmp_path):
    root = tmp_path / "later" / "pool"
    pool, index = make_pool(root)
    watcher = PoolWatcher(pool, rescan_ms=100).start()
    try:
        write(root / "a.json", rec(1))
        wait_for(lambda: "exp-1" in index, "the new root's records")
        write(root / "b.json", rec(2))
        wait_for(lambda: "exp-2" in index, "a file in the new root, watched")
    finally:
        watcher.stop()
    assert not watcher.running


def test_burst_is_coalesced_and_stop_is_clean(tmp_path):
    root = tmp_path / "pool"
    root.mkdir()
    pool, index = make_pool(root)
    applied = []
    pool.subscribe(applied.append)
    watcher = PoolWatcher(pool, debounce_ms=200, step_ms=50).start()
    try:
        staging = tmp_path / "staging"
        for i in range(500):
            write(staging / f"r{i:03d}.json", rec(i))
        os.rename(staging, root / "pulled")  # a checkout landing at once
        wait_for(lambda: len(index) == 500, "500 records")
        assert len(applied) < 50  # far fewer batches than files
    finally:
        watcher.stop()
        watcher.stop()  # idempotent
    shutil.rmtree(root / "pulled")
    time.sleep(0.3)
    assert len(index) == 500  # stopped: no more updates


def test_a_directory_symlink_back_into_the_pool_is_not_followed_twice(tmp_path):
    """`ln -s . pool/alias` while watching: files keep their real names, as a fresh load gives them."""
    root = tmp_path / "pool"
    write(root / "a.json", rec(1))
    write(root / "sub" / "b.json", rec(2))
    pool, index = make_pool(root)
    with PoolWatcher(pool, debounce_ms=30):
        os.symlink(".", root / "alias")
        pool.apply([root / "alias"])  # what the watcher's event for the new symlink leads to
        write(root / "alias" / "c.json", rec(3))  # written through the alias
        wait_for(lambda: "exp-3" in index, "a file written through the alias")
        time.sleep(0.3)  # let any late event of the alias be applied too (asserting, not bounding)
    fresh, _ = make_pool(root)
    assert sorted(pool.files) == sorted(fresh.files) == sorted(str(root / n) for n in ("a.json", "c.json", "sub/b.json"))
    assert not any(p.kind == "duplicate" for ps in pool.problems.values() for p in ps)
