"""Hostile pools (issue 23): what sits in a pool directory never blocks, faults or floods a reader.
See docs/reliability.md for the limits these tests hold at their edge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from soma_lsp.pool import LivePool, loader
from soma_lsp.pool.loader import load_file
from soma_lsp.pool.problems import MAX_PER_FILE
from soma_lsp.retrieval import LiveIndex
from pool_files import make_pool, rec, write

REPO = Path(__file__).resolve().parent.parent
HANG = 120  # seconds: a bound on a process that would otherwise block forever, not a performance limit


def test_a_fifo_in_the_pool_is_refused_without_opening_it_for_a_writer(tmp_path):
    root = tmp_path / "pool"
    write(root / "a.json", rec(1))
    os.mkfifo(root / "trap.json")
    load = load_file(root / "trap.json")  # would block forever in open() without O_NONBLOCK
    assert [(p.kind, p.message) for p in load.problems] == [
        ("unreadable", "is a FIFO, not a regular file; not loaded")]
    pool, index = make_pool(root)
    assert "exp-1" in index and pool.problems_for(str(root / "trap.json"))
    os.mkfifo(root / "later.jsonl")  # added later: the update goes through, and so do the next ones
    write(root / "b.json", rec(2))
    pool.apply([root / "later.jsonl", root / "b.json"])
    write(root / "c.json", rec(3))
    pool.apply([root / "c.json"])
    assert all(f"exp-{i}" in index for i in (1, 2, 3))
    assert pool.problems_for(str(root / "later.jsonl"))[0].message.startswith("is a FIFO")


def test_check_returns_on_a_pool_with_a_fifo(tmp_path):
    write(tmp_path / "p" / "a.json", rec(1))
    os.mkfifo(tmp_path / "p" / "fifo.yaml")
    result = subprocess.run([sys.executable, "-m", "soma_lsp", "check", "--pool", str(tmp_path / "p")],
                            capture_output=True, text=True, cwd=REPO, timeout=HANG,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 1
    assert "fifo.yaml:1: is a FIFO, not a regular file; not loaded" in result.stdout
    assert "1 record loaded" in result.stdout


def test_problems_per_file_are_capped_with_a_count_of_the_rest(tmp_path):
    """A `.json` of `[1,1,…]`: 100 problems kept, then one saying how many more (docs/reliability.md)."""
    root = tmp_path / "pool"
    count = 200_000
    write(root / "ones.json", "[" + ",".join(["1"] * count) + "]")
    write(root / "edge.json", json.dumps([1] * MAX_PER_FILE + [rec(1)]))
    load = load_file(root / "ones.json")
    assert len(load.problems) == MAX_PER_FILE + 1
    assert all(p.kind == "not-records" for p in load.problems[:MAX_PER_FILE])
    assert load.problems[-1].kind == "more" and load.problems[-1].severity == "error"
    assert load.problems[-1].message == (f"and {count - MAX_PER_FILE} more problems in this file, not listed "
                                         f"(at most {MAX_PER_FILE} are kept per file)")
    edge = load_file(root / "edge.json")  # exactly at the cap: nothing to count, the record still loads
    assert len(edge.problems) == MAX_PER_FILE and len(edge.records) == 1


def test_duplicate_ids_per_file_are_capped_too(tmp_path):
    root = tmp_path / "pool"
    write(root / "same.jsonl", "\n".join(json.dumps(rec(1)) for _ in range(MAX_PER_FILE + 51)))
    pool, _ = make_pool(root)
    problems = pool.problems_for(str(root / "same.jsonl"))
    assert len(problems) == MAX_PER_FILE + 1
    assert problems[-1].kind == "more" and problems[-1].message.startswith("and 50 more problems")


TRUNCATE_UNDER_A_READER = r"""
import json, os, sys
from pathlib import Path
from soma_lsp.pool import LivePool
from soma_lsp.retrieval import LiveIndex, RetrievalQuery

root, cache = Path(sys.argv[1]), Path(sys.argv[2])
reader = LivePool([root], LiveIndex(), cache_dir=cache)
reader.load()  # restored from the snapshot: records not built yet
assert reader.restored, "expected a restart from the snapshot"
with open(reader.snapshot_path, "r+b") as f:  # truncated in place while the reader has it
    f.truncate(os.path.getsize(reader.snapshot_path) // 2)
results = reader.index.rank(RetrievalQuery(text="warmup spike", limit=None, now=None))
print(json.dumps([len(reader.records()), len(results), sorted(r.name for r in reader.records())[:3]]))
"""


def test_a_snapshot_truncated_in_place_under_a_reader_does_not_fault_it(tmp_path):
    """Issue 23 #5: a server mapping the snapshot died with SIGBUS (exit 135) on its next hover."""
    root, cache = tmp_path / "pool", tmp_path / "cache"
    write(root / "runs.jsonl", "\n".join(json.dumps(rec(i, notes=f"warmup {i} spike " * 50)) for i in range(3000)))
    past = os.path.getmtime(root / "runs.jsonl") - 3600
    os.utime(root / "runs.jsonl", (past, past))
    os.utime(root, (past, past))
    time.sleep(loader.RACY_NS / 1e9)  # the inode's ctime moved just now: wait until its stamp is trusted
    writer = LivePool([root], LiveIndex(), cache_dir=cache)
    writer.load()
    assert writer.save_snapshot()
    result = subprocess.run([sys.executable, "-c", TRUNCATE_UNDER_A_READER, str(root), str(cache)],
                            capture_output=True, text=True, cwd=REPO, timeout=HANG,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == [3000, 3000, ["run-0", "run-1", "run-10"]]


def test_a_directory_where_the_snapshot_goes_is_replaced_by_the_snapshot(tmp_path):
    """Issue 23 #10: a snapshot path that was a directory was never repaired (a full read every start)."""
    root, cache = tmp_path / "pool", tmp_path / "cache"
    write(root / "a.json", rec(1))
    pool = LivePool([root], LiveIndex(), cache_dir=cache)
    (pool.snapshot_path / "inside").mkdir(parents=True)
    pool.load()
    assert pool.save_snapshot()
    assert pool.snapshot_path.is_file()
