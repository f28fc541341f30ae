"""`soma-lsp check` on real pools, and the bundled fixture pool (fixtures/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from soma_lsp.cli import main
from soma_lsp.pool import LivePool

REPO = Path(__file__).resolve().parent.parent
FIXTURE_POOL = REPO / "fixtures" / "workspace" / ".soma" / "pool"


def write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def test_check_prints_problems_and_summary_and_fails_on_errors(tmp_path, capsys, monkeypatch):
    pool = tmp_path / ".soma" / "pool"
    write(pool / "a.jsonl", '{"id": "a", "name": "x"}\n{"id": "b"}\n{"id": "c", "name": "y", "status": "weird"}\n')
    write(pool / "b.json", "{oops")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SOMA_POOL", raising=False)
    assert main(["check"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        ".soma/pool/a.jsonl:2: name: is required",
        ".soma/pool/a.jsonl:3: status: unknown status 'weird', loaded as 'unknown' (warning)",
        ".soma/pool/b.json:1: invalid JSON: Expecting property name enclosed in double quotes (column 2)"]
    assert out[3] == "2 records loaded from 2 files in 1 pool; 2 errors, 1 warning"
    assert out[4:] == ["  errors by kind: json 1, validation 1", "  warnings by kind: status 1"]


def test_check_warnings_alone_exit_zero_and_pool_flags(tmp_path, capsys, monkeypatch):
    write(tmp_path / "one" / "a.json", '{"id": "a", "name": "x", "status": "exploded"}')
    write(tmp_path / "two" / "b.json", '{"id": "b", "name": "y"}')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--pool", "one", "--pool", str(tmp_path / "two")]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "2 records loaded from 2 files in 2 pools; 0 errors, 1 warning", "  warnings by kind: status 1"]
    monkeypatch.setenv("SOMA_POOL", str(tmp_path / "two"))
    assert main(["check"]) == 0
    assert capsys.readouterr().out.splitlines() == ["1 record loaded from 1 file in 1 pool; 0 errors, 0 warnings"]


def test_check_from_a_process(tmp_path):
    write(tmp_path / "p" / "a.json", json.dumps([{"id": "a", "name": "x"}, {"id": "a", "name": "y"}]))
    result = subprocess.run([sys.executable, "-m", "soma_lsp", "check", "--pool", str(tmp_path / "p")],
                            capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 1
    assert "a.json:1: id: duplicate id 'a', already defined at a.json:1; this record is ignored" in result.stdout
    assert "errors by kind: duplicate 1" in result.stdout


def test_fixture_pool_loads_as_documented():
    """fixtures/README.md: 19 record files, 74 valid records, 6 errors (4 invalid records, 1 unreadable
    file, 1 duplicate id) and 1 warning."""
    pool = LivePool([FIXTURE_POOL])
    pool.load()
    summary = pool.summary()
    assert (summary["files"], summary["records"], summary["errors"], summary["warnings"]) == (19, 74, 6, 1)
    assert summary["errors_by_kind"] == {"duplicate": 1, "validation": 4, "yaml": 1}
    got = sorted(f"{os.path.relpath(p.path, FIXTURE_POOL)}:{p.line + 1}: {p.field}" for ps in pool.problems.values() for p in ps)
    assert got == ["broken/duplicate-id.json:1: id", "broken/mixed.jsonl:2: name", "broken/mixed.jsonl:4: metrics[0].value",
                   "broken/mixed.jsonl:5: code[0]", "broken/mixed.jsonl:6: importance", "broken/not-yaml.yaml:5: ",
                   "broken/unknown-status.json:1: status"]
    assert pool.get("exp-0015").source.path.endswith("2025/exp-0015.json")
    assert pool.get("exp-0099") is None and pool.get("exp-0177") is not None


def test_check_of_a_pool_that_does_not_exist_fails(tmp_path, capsys):
    typo = tmp_path / "a" / "typo"
    assert main(["check", "--pool", str(typo)]) == 2
    out = capsys.readouterr().out
    assert f"error: pool directory {typo} does not exist" in out


def test_check_json_lists_every_problem_for_tools(tmp_path, capsys):
    pool = tmp_path / "pool"
    write(pool / "a.jsonl", '{"id": "a", "name": "x"}\n{"id": "b"}\n')
    assert main(["check", "--json", "--pool", str(pool), "--pool", str(tmp_path / "gone")]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["pools"] == [str(pool), str(tmp_path / "gone")] and report["missing"] == [str(tmp_path / "gone")]
    assert (report["records"], report["files"], report["errors"], report["warnings"]) == (1, 1, 1, 0)
    assert report["problems"] == [{"path": str(pool / "a.jsonl"), "line": 2, "field": "name",
                                   "message": "is required", "severity": "error", "kind": "validation"}]


def test_check_shows_every_problem_of_a_record_at_its_field(tmp_path, capsys, monkeypatch):
    """A linter, not one problem at a time: each bad field of a record, at the line and column of its key."""
    pool = tmp_path / "pool"
    write(pool / "r.json", '{\n  "id": "a",\n  "status": 7,\n  "metrics": [{"name": "loss"}],\n  "importance": 9\n}\n')
    write(pool / "r.jsonl", '{"id": "b", "name": "b", "commit": "xyz", "tags": "one"}\n')
    write(pool / "r.yaml", "id: c\nname: c\nfinished_at: yesterday\ncode: [3]\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--pool", "pool"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:9] == [
        "pool/r.json:1: name: is required",  # no key to point at: the record's line
        "pool/r.json:3:3: status: expected a string, got a number",
        "pool/r.json:4:3: metrics[0].value: is required",
        "pool/r.json:5:3: importance: must be in [0, 1], got 9",
        "pool/r.jsonl:1:26: commit: expected a hex commit of 7 to 40 characters, got 'xyz'",
        "pool/r.jsonl:1:43: tags: expected a list of strings, got a string",
        "pool/r.yaml:3:1: finished_at: expected an RFC 3339 timestamp, got 'yesterday'",
        "pool/r.yaml:4:1: code[0]: expected \"path\", \"path::Symbol\" or {path, symbol}, got a number",
        "0 records loaded from 3 files in 1 pool; 8 errors, 0 warnings"]
