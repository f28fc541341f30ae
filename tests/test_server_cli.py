"""`soma-lsp explain` and `soma-lsp arch` on the bundled fixtures (the server's feature code, as text)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT / "fixtures" / "workspace"


def soma(*args: str, cwd: Path = WORKSPACE) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "soma_lsp", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def line_of(rel: str, needle: str) -> int:
    return next(i for i, l in enumerate((WORKSPACE / rel).read_text().splitlines(), 1) if needle in l)


def test_explain_a_position_prints_the_hover_and_the_warning():
    line = line_of("model/transformer.py", "class RotaryEmbedding")
    result = soma("explain", f"model/transformer.py:{line}:7", "--now", "2026-12-01T00:00:00Z")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"model/transformer.py:{line}:7\nhover:\n  rope-theta-500k (exp-0042) — failed, dead end, ⚓ tied")
    assert "9 months ago" in out and "theta 500k diverges at 2k steps" in out
    assert "lexical" in out and "importance" in out and "more related" in out
    assert f"model/transformer.py:{line}:7: warning: Dead end: rope-theta-500k (exp-0042, status failed)" in out


def test_explain_a_file_prints_lenses_and_every_warning():
    result = soma("explain", str(WORKSPACE / "train.py"))
    assert result.returncode == 0, result.stderr
    assert "lenses:\n" in result.stdout
    assert "train.py:1:1: warning: Dead end: bf16-grad-accum-overflow (exp-0131, status crashed)" in result.stdout
    assert "1:1 \"\"\"Language-model training entry point.: 1 experiment tied to this file · 1 dead end" in result.stdout
    assert f"{line_of('train.py', 'def cosine_with_warmup')}:5 cosine_with_warmup: " in result.stdout


def test_explain_from_elsewhere_finds_the_workspace(tmp_path):
    line = line_of("model/transformer.py", "class RotaryEmbedding")
    result = soma("explain", f"{WORKSPACE / 'model' / 'transformer.py'}:{line}", cwd=tmp_path)
    assert result.returncode == 0 and "rope-theta-500k (exp-0042)" in result.stdout


def test_explain_errors():
    assert soma("explain", "no/such/file.py").returncode == 2
    assert soma("explain", "train.py:9999").returncode == 2


def test_arch_prints_the_bag():
    result = soma("arch", "model/transformer.py")
    assert result.returncode == 0
    rows = dict(line.rsplit(" ", 1) for line in result.stdout.splitlines())
    assert {"RMSNorm", "RotaryEmbedding", "Attention", "Linear"} <= set(rows)
    bag = json.loads(soma("arch", "configs/moe.yaml", "--json").stdout)
    assert bag["MoELayer"] == 6 and bag["Expert"] == 48


def test_query_that_finds_nothing_names_where_it_looked(tmp_path):
    result = soma("query", "anything", "--no-snapshot", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"No experiments in a pool of 0 (read from {tmp_path.resolve() / '.soma' / 'pool'})."


def test_explain_with_an_empty_pool_names_where_it_looked(tmp_path):
    (tmp_path / "m.py").write_text("def f(x):\n    return x\n")
    result = soma("explain", "m.py:1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith(
        f"(no experiments in the pool: read from {tmp_path.resolve() / '.soma' / 'pool'})")
