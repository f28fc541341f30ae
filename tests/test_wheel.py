"""The package stands alone: the wheel built from a copy of this checkout, installed into a fresh
virtual environment, runs `soma-lsp demo` from a directory with no repository around it.

The new environment gets its dependencies without a download: pip resolves the wheel's declared
requirements against links to exactly those distributions (and theirs) of the running environment —
so a dependency missing from pyproject.toml fails here as it would on a fresh machine, and the test
needs no network beyond what building a wheel needs (setuptools, which `make install` fetched too).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from wheels import ROOT, build_wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


def _closure(requirements: list[str]) -> set[str]:
    """The installed distributions that `requirements` (unconditional ones) need, transitively."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name not in seen:
            seen.add(name)
            todo.extend(Requirement(r) for r in importlib.metadata.distribution(name).requires or [])
    return seen


def _link_dependencies(requirements: list[str], into: Path) -> None:
    """Symlinks to the top-level files and folders of each needed distribution (its modules, its
    .dist-info, its bundled libraries), so pip and Python see those and nothing else."""
    into.mkdir()
    for name in _closure(requirements):
        dist = importlib.metadata.distribution(name)
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] != ".."}:
            if not (into / top).exists():
                (into / top).symlink_to(Path(dist.locate_file(top)).resolve())


def test_the_wheel_carries_license_classifiers_and_a_self_contained_description(wheel):
    metadata = _metadata(wheel)
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    assert "Classifier: Programming Language :: Python :: 3.11" in metadata
    description = metadata.split("\n\n", 1)[1]
    assert "pip install soma-lsp" in description and "soma-lsp demo" in description
    links = re.findall(r"\]\(([^)]*)\)", description)
    assert all(link.startswith("https://") for link in links), links  # nothing relative to a checkout
    assert not re.search(r"^make |`make ", description, re.M), "make steps need the repository"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {n.removeprefix("soma_lsp/demo_workspace/") for n in names if n.startswith("soma_lsp/demo_workspace/")}
    fixture = {p.relative_to(ROOT / "fixtures" / "workspace").as_posix()
               for p in (ROOT / "fixtures" / "workspace").rglob("*") if p.is_file()}
    assert shipped == fixture


def test_installed_wheel_runs_the_demo_with_no_repository_around(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    requires = [line.split(": ", 1)[1] for line in _metadata(wheel).splitlines() if line.startswith("Requires-Dist: ")]
    _link_dependencies(requires, tmp_path / "dependencies")
    Path(purelib, "dependencies.pth").write_text(f"{tmp_path / 'dependencies'}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SOMA_POOL", "VIRTUAL_ENV")}
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                                "--quiet", str(wheel)], capture_output=True, text=True, env=env, timeout=300)
    assert installed.returncode == 0, installed.stderr  # also: every declared dependency was found

    _assert_the_demo_runs_from_elsewhere(env_dir / "bin", tmp_path / "elsewhere", env)


def test_pipx_installs_the_wheel_into_an_environment_of_its_own(wheel, tmp_path):
    """What the README tells a user to run: `pipx install` of the wheel (its dependencies resolved from the
    package index as on a user's machine), then the `soma-lsp` it puts on PATH, from a folder with no
    repository around it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SOMA_POOL", "VIRTUAL_ENV")}
    env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"))
    installed = subprocess.run([sys.executable, "-m", "pipx", "install", str(wheel)], capture_output=True,
                               text=True, env=env, timeout=900, stdin=subprocess.DEVNULL)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "installed package soma-lsp 0.1.0" in installed.stdout
    venv_bin = tmp_path / "pipx" / "venvs" / "soma-lsp" / "bin"
    assert (tmp_path / "bin" / "soma-lsp").resolve() == (venv_bin / "soma-lsp").resolve()
    _assert_the_demo_runs_from_elsewhere(venv_bin, tmp_path / "elsewhere", env, launcher=tmp_path / "bin" / "soma-lsp")


def _assert_the_demo_runs_from_elsewhere(env_bin: Path, elsewhere: Path, env: dict[str, str],
                                         launcher: Path | None = None) -> None:
    """The environment's own copy of soma_lsp is the one imported, and its `soma-lsp demo` runs on the
    workspace the wheel carries."""
    elsewhere.mkdir()
    python = env_bin / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    where = subprocess.run([str(python), "-c", "import soma_lsp; print(soma_lsp.__file__)"], cwd=elsewhere,
                           env=env, capture_output=True, text=True)
    assert where.stdout.startswith(purelib), where  # the installed copy, not this checkout
    soma = launcher or env_bin / "soma-lsp"
    demo = subprocess.run([str(soma), "demo"], cwd=elsewhere, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert demo.returncode == 0, demo.stderr
    shipped = f"{purelib}/soma_lsp/demo_workspace"
    assert f"pool: 79 experiments in 24 files, 6 bad records — {shipped}/.soma/pool, {shipped}/mlruns" in demo.stdout
    assert f"from MLflow file store {shipped}/mlruns · experiment lm-125m" in demo.stdout
    assert "model/transformer.py:55: [exp-0042] Dead end: rope-theta-500k" in demo.stdout
    assert "Bad records in .soma/pool/broken/mixed.jsonl" in demo.stdout
