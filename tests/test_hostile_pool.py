"""Hostile pools (issue 23): what sits in a pool directory never blocks, faults or floods a reader.
See docs/reliability.md for the limits these tests hold at their edge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from soma_lsp.pool.loader import load_file
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
