"""Writing record files for the pool tests."""

import json
from pathlib import Path


def rec(i, **extra) -> dict:
    return {"id": f"exp-{i}", "name": f"run-{i}", **extra}


def write(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path
