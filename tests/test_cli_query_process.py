"""`soma-lsp query` as the process a user starts: what it imports, and the snapshot it leaves behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT / "fixtures" / "workspace"
QUERY = ("query", "rope theta", "--limit", "3", "--now", "none")


def soma(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    env.update(PYTHONPATH=str(ROOT), SOMA_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "soma_lsp", *args], cwd=WORKSPACE, env=env, capture_output=True,
                          text=True, timeout=120)


def test_query_imports_nothing_of_the_server(tmp_path):
    """pygls, lsprotocol, tree-sitter and watchfiles take a fresh process ~0.3 s to import; a query
    uses none of them, nor the tracker clients' HTTP and SQLite modules for a folder of record files."""
    code = ("import sys; from soma_lsp.cli import main; main([*sys.argv[1:]]); "
            "print('LOADED', *sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pygls', 'lsprotocol', 'tree_sitter', 'watchfiles', 'sqlite3', 'http')))")
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    env.update(PYTHONPATH=str(ROOT), SOMA_CACHE_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code, *QUERY], cwd=WORKSPACE, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "exp-0058" in result.stdout  # it did load the pool and rank it
    assert result.stdout.splitlines()[-1] == "LOADED"


def test_the_snapshot_is_written_after_the_answer_and_serves_the_next_query(tmp_path):
    cache = tmp_path / "cache"
    first = soma(*QUERY, cache=cache)
    assert first.returncode == 0, first.stderr
    deadline = time.monotonic() + 60  # (a hang guard: the write happens in a detached process)
    while not list(cache.glob("pool-*.snapshot")):
        assert time.monotonic() < deadline, "no snapshot written"
        time.sleep(0.05)
    snapshot = next(cache.glob("pool-*.snapshot"))
    assert not list(cache.glob(".snapshot-*"))  # renamed into place whole
    assert snapshot.stat().st_mode & 0o777 == 0o600
    second = soma(*QUERY, cache=cache)
    assert second.returncode == 0 and second.stdout == first.stdout
    assert list(cache.glob("pool-*.snapshot")) == [snapshot]
