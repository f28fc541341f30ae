"""`soma-lsp demo`, the README's main job: a real LSP session against the bundled workspace or a
project of one's own; and every command ending quietly when the reader of its output goes away."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "workspace"


def demo(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    return subprocess.run([sys.executable, "-m", "soma_lsp", "demo", *args], capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL, cwd=cwd, env=env)


def section(out: str, title: str) -> str:
    return out.split(f"━━ {title}", 1)[1].split("\n━━ ", 1)[0]


def test_demo_shows_warnings_lenses_hover_related_and_bad_records():
    done = demo()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    # soma records and MLflow runs in one pool (fixtures/workspace/mlruns, written by fixtures/make_mlruns.py)
    assert "setting soma.pool: ['.soma/pool', 'mlruns']" in out
    assert f"pool: 79 experiments in 24 files, 6 bad records — {FIXTURE}/.soma/pool, {FIXTURE}/mlruns" in out
    warnings = section(out, "Dead-end warnings")
    assert "model/transformer.py:55: [exp-0042] Dead end: rope-theta-500k" in warnings
    assert "] Dead end: router-jitter-0.1 (" in warnings and "model/moe.py:16: [" in warnings
    assert "train.py:1: [exp-0131] Dead end: bf16-grad-accum-overflow" in warnings
    # the file with the most warnings, and in it the definition with the most (fixtures/README.md)
    assert "related experiments · " in section(out, "Code lenses in model/transformer.py")
    hover = section(out, "Hover at model/transformer.py:196 `def forward(self, tokens")
    assert "label-smoothing-0.1 · exp-0170 · regressed · dead end" in hover and "lexical" in hover
    assert "zloss-1e-4 · " in hover and f"from MLflow file store {FIXTURE}/mlruns · experiment lm-125m" in hover
    assert "tied" in section(out, "Find related experiments at model/transformer.py:196")
    assert "line 2: name: is required" in section(out, "Bad records in .soma/pool/broken/mixed.jsonl")
    assert "Bad records in mlruns" not in out  # a tracker's files are not opened as pool files
    assert "unknown status 'exploded'" in section(out, "Bad records in .soma/pool/broken/unknown-status.json")


def _project(root: Path) -> Path:
    """A small project of one's own: one module, a pool with a dead end tied to it and a bad record."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "optim.py").write_text(
        "def build_scheduler(warmup_steps: int):\n    return cosine_warmup(warmup_steps)\n\n\n"
        "def clip_gradients(model, max_norm: float = 1.0):\n    return model\n")
    (root / ".venv" / "lib").mkdir(parents=True)  # a virtualenv in the project is not its code
    (root / ".venv" / "lib" / "noise.py").write_text("def build_scheduler():\n    pass\n")
    pool = root / ".soma" / "pool"
    pool.mkdir(parents=True)
    (pool / "runs.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"id": "run-1", "name": "no-warmup", "status": "failed", "conclusion": "without warmup the loss diverges",
         "code": ["src/optim.py::build_scheduler"], "finished_at": "2026-11-01T00:00:00Z"},
        {"id": "run-2", "name": "clip-0.5", "status": "succeeded", "conclusion": "clip gradients at 0.5: stable",
         "code": ["src/optim.py::clip_gradients"], "finished_at": "2026-11-02T00:00:00Z"},
        {"id": "run-3", "status": "failed"},
    ]) + "\n")
    return root


def test_demo_on_a_project_of_ones_own(tmp_path):
    project = _project(tmp_path / "mine")
    done = demo("--workspace", str(project), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"workspace: {project}" in out and "pool: 2 experiments in 1 files, 1 bad records" in out
    assert "src/optim.py:1: [run-1] Dead end: no-warmup" in section(out, "Dead-end warnings")
    assert ".venv" not in out
    assert "no-warmup · run-1 · failed · dead end" in section(out, "Hover at src/optim.py:1")
    assert "run-1" in section(out, "Find related experiments at src/optim.py:1")
    assert "line 3: name: is required" in section(out, "Bad records in .soma/pool/runs.jsonl")


def test_demo_without_a_pool_says_where_it_looked(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    done = demo("--workspace", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"pool: 0 experiments in 0 files, 0 bad records — {tmp_path}/.soma/pool" in done.stdout
    assert "no experiments: put records in .soma/pool, or set $SOMA_POOL" in done.stdout


def test_demo_on_a_workspace_that_is_not_a_directory(tmp_path):
    done = demo("--workspace", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert f"{tmp_path / 'missing'} is not a directory" in done.stderr and not done.stdout


@pytest.mark.parametrize("command", [
    ["demo"],
    ["query", "rope theta", "--limit", "0"],
    ["check"],
    ["explain", "model/transformer.py"],
    ["arch", "model/transformer.py"],
    ["--help"],
])
def test_a_closed_pipe_ends_every_command_quietly(command):
    """`soma-lsp … | head -1`: the reader is gone before the command writes (its end of the pipe is
    closed at once), so every write fails — and nothing but the command's own answer may say so."""
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    proc = subprocess.Popen(["soma-lsp", *command], cwd=FIXTURE, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=300) in (0, 1)
    assert "Traceback" not in stderr and "Error" not in stderr, stderr


def test_the_demo_adds_a_workspaces_tracker_folders_to_its_pool_unless_soma_pool_names_one(tmp_path):
    from soma_lsp.cli.demo import pool_setting

    assert pool_setting(tmp_path, {}) is None  # no tracker folder: the server's own default
    shutil.copytree(FIXTURE / "mlruns", tmp_path / "mlruns")
    (tmp_path / "wandb").mkdir()  # an empty wandb/ is no W&B folder
    assert pool_setting(tmp_path, {}) == [".soma/pool", "mlruns"]
    assert pool_setting(tmp_path, {"SOMA_POOL": "/data/pool"}) is None


def test_demo_says_so_when_the_server_ends_before_the_session(tmp_path):
    server = tmp_path / "broken_server.py"
    server.write_text("import sys\nsys.stderr.write('cannot start: no interpreter for the pool\\n')\nsys.exit(3)\n")
    done = demo("--server", sys.executable, str(server))
    assert done.returncode == 1
    assert "the server ended (return code 3) before the session did" in done.stderr
    assert "cannot start: no interpreter for the pool" in done.stderr
    assert "Traceback" not in done.stderr
