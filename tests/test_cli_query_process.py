"""`soma-lsp query` as the process a user starts: what it imports (its snapshot: test_pool_snapshot)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT / "fixtures" / "workspace"
QUERY = ("query", "rope theta", "--limit", "3", "--now", "none")


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
