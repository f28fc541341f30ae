"""Writing record files for the pool tests."""

import json
from pathlib import Path

from soma_lsp.pool import LivePool
from soma_lsp.retrieval import LiveIndex


def rec(i, **extra) -> dict:
    return {"id": f"exp-{i}", "name": f"run-{i}", **extra}


def write(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def make_pool(root: Path) -> tuple[LivePool, LiveIndex]:
    """A live pool over one root, loaded, with its index."""
    index = LiveIndex()
    pool = LivePool([root], index)
    pool.load()
    return pool, index
