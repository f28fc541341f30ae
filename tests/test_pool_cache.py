"""Cache housekeeping: stale and surplus entries go, what is in use stays readable."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from soma_lsp.pool import LivePool
from soma_lsp.pool.cache import CacheLimits, clear, entries, tidy
from soma_lsp.retrieval import LiveIndex
from pool_files import rec, write

DAY = 86400


def entry(directory: Path, name: str, *, days: float, size: int = 10) -> Path:
    path = directory / name
    path.write_bytes(b"x" * size)
    past = time.time() - days * DAY
    os.utime(path, (past, past))
    return path


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_unused_entries_and_old_temporaries_go_others_stay(tmp_path):
    entry(tmp_path, "pool-old.snapshot", days=31)
    entry(tmp_path, "commits-old.json", days=40)
    entry(tmp_path, "pool-recent.snapshot", days=29)
    entry(tmp_path, ".snapshot-leftover", days=2)
    entry(tmp_path, ".snapshot-writing", days=0)
    entry(tmp_path, "notes.txt", days=400)  # not ours: never touched
    removed = tidy(tmp_path)
    assert sorted(e.path.name for e in removed) == [".snapshot-leftover", "commits-old.json", "pool-old.snapshot"]
    assert names(tmp_path) == [".snapshot-writing", "notes.txt", "pool-recent.snapshot"]


def test_over_the_size_limit_the_least_recently_used_go_first(tmp_path):
    for days, name in enumerate(("pool-a.snapshot", "pool-b.snapshot", "commits-c.json", "pool-d.snapshot")):
        entry(tmp_path, name, days=days, size=100)  # a is the most recently used, d the least
    kept = entry(tmp_path, "pool-e.snapshot", days=10, size=100)
    removed = tidy(tmp_path, CacheLimits(unused_days=30, max_bytes=250), keep=[kept])
    assert [e.path.name for e in removed] == ["pool-d.snapshot", "commits-c.json", "pool-b.snapshot"]
    assert names(tmp_path) == ["pool-a.snapshot", "pool-e.snapshot"]


def test_a_reader_keeps_reading_an_entry_tidied_under_it(tmp_path):
    path = entry(tmp_path, "pool-x.snapshot", days=90, size=4096)
    with open(path, "rb") as reader:
        assert [e.path for e in tidy(tmp_path)] == [path]
        assert reader.read() == b"x" * 4096
    assert tidy(tmp_path) == []  # nothing left, nothing fails


def test_clear_leaves_writes_in_progress(tmp_path):
    entry(tmp_path, "pool-a.snapshot", days=0)
    entry(tmp_path, ".snapshot-writing", days=0)
    assert [e.path.name for e in clear(tmp_path)] == ["pool-a.snapshot"]
    assert [e.path.name for e in entries(tmp_path)] == [".snapshot-writing"]


def test_a_snapshot_write_tidies_the_directory_to_its_limit(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    for i in range(5):
        entry(cache, f"pool-other{i}.snapshot", days=i + 1, size=1 << 20)
    write(tmp_path / "pool" / "r.json", rec(1))
    pool = LivePool([tmp_path / "pool"], LiveIndex(), cache_dir=cache,
                    cache_limits=CacheLimits(unused_days=30, max_bytes=(2 << 20) + (1 << 19)))
    pool.load()
    assert pool.save_snapshot()
    assert names(cache) == sorted(["pool-other0.snapshot", "pool-other1.snapshot", pool.snapshot_path.name])


def test_the_cache_command_shows_tidies_and_clears(tmp_path):
    env = {**os.environ, "SOMA_CACHE_DIR": str(tmp_path)}

    def cache(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "soma_lsp", "cache", *args], env=env, capture_output=True,
                              text=True, check=True)
        return done.stdout

    entry(tmp_path, "pool-old.snapshot", days=45, size=2048)
    entry(tmp_path, "pool-new.snapshot", days=1, size=1024)
    shown = cache()
    assert f"{tmp_path}: 2 entries, 3.0 KiB" in shown and "pool-new.snapshot" in shown.splitlines()[1]
    assert "removed 1 entries (2.0 KiB)" in cache("--tidy")
    assert names(tmp_path) == ["pool-new.snapshot"]
    assert "removed 1 entries" in cache("--clear") and names(tmp_path) == []
