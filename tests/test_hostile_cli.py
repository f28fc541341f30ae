"""The terminal is protected (issue 23 #9): record text and pool paths printed by `query`, `explain`
and `check` carry no escape sequence, control or bidi character; `query --json` survives a lone
surrogate. Real subprocesses on a real pool; docs/reliability.md states the rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x1b[31mred\x9b1m \u202eevil\u2066 \x00nul\x7f\ud800 lone"
FORBIDDEN = ["\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\x00", "\x7f", "\ud800"]


def soma(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "SOMA_CACHE_DIR": str(workspace / "cache"),
           "PYTHONIOENCODING": "utf-8"}
    env.pop("SOMA_POOL", None)
    return subprocess.run([sys.executable, "-m", "soma_lsp", *args], cwd=workspace, env=env, capture_output=True)


def hostile_workspace(tmp_path: Path) -> Path:
    pool = tmp_path / ".soma" / "pool"
    pool.mkdir(parents=True)
    record = {"id": "exp-\x1b[5mx", "name": "rotary " + HOSTILE, "status": "failed", "conclusion": "rotary " + HOSTILE,
              "notes": HOSTILE, "architecture": ["RotaryEmbedding"], "code": ["model.py::RotaryEmbedding"]}
    (pool / "a.json").write_text(json.dumps(record))  # json.dumps writes the lone surrogate as \ud800
    (pool / "bad\x1b]0;title\x07.json").write_text("{oops")
    (tmp_path / "model.py").write_text("class RotaryEmbedding:\n    pass\n")
    return tmp_path


def assert_inert(output: bytes) -> str:
    text = output.decode("utf-8")  # (strict: a lone surrogate could not have been encoded)
    assert not [c for c in FORBIDDEN if c in text], text
    return text


def test_query_table_is_inert(tmp_path):
    workspace = hostile_workspace(tmp_path)
    result = soma(workspace, "query", "rotary evil", "--no-snapshot")
    assert result.returncode == 0, result.stderr
    text = assert_inert(result.stdout)
    assert "rotary red evil nul\ufffd lone" in text  # the sequences gone whole, not just their ESC


def test_query_json_survives_a_lone_surrogate_and_escapes_controls(tmp_path):
    workspace = hostile_workspace(tmp_path)
    result = soma(workspace, "query", "rotary", "--json", "--no-snapshot")
    assert result.returncode == 0, result.stderr  # was a UnicodeEncodeError
    text = assert_inert(result.stdout)
    [found] = json.loads(text)
    assert found["name"] == "rotary " + HOSTILE.replace("\ud800", "\ufffd")  # the data, intact but for it


def test_explain_and_check_are_inert(tmp_path):
    workspace = hostile_workspace(tmp_path)
    explained = soma(workspace, "explain", "model.py:1")
    assert explained.returncode == 0, explained.stderr
    assert "evil" in assert_inert(explained.stdout)
    checked = soma(workspace, "check")
    assert checked.returncode == 1
    assert ".soma/pool/bad.json:1: invalid JSON" in assert_inert(checked.stdout)
