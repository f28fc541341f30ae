"""Building this checkout's wheel for the tests that install it (tests/test_wheel.py, the VS Code
extension's install offer in tests/e2e/test_vscode.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCE = (".git", ".venv", ".cache", "node_modules", "build", "*.egg-info", "__pycache__", "*.vsix",
              "test-artifacts")


def build_wheel(into: Path) -> Path:
    """The wheel of a copy of this checkout (the build writes build/ and egg-info next to the sources:
    not into the checkout), built into `into`."""
    source = into / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(into), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (wheel,) = into.glob("soma_lsp-*.whl")
    return wheel
