"""End-to-end test of the VS Code extension in real VS Code (code-server 4.100.3 = VS Code 1.100.3),
driven headless by Debian's Chromium through playwright-core (tests/e2e/vscode/drive.js).

Set-up (cached under .cache/, ~2 min the first time): editors/vscode/scripts/setup-e2e.sh, which this test
runs itself; it also rebuilds editors/vscode/soma-lsp.vsix so the test always runs the current extension.
A run: install the .vsix into a fresh profile, open a copy of fixtures/workspace, open
model/transformer.py, check the code lens, the hover over RotaryEmbedding, "Soma: Find Related
Experiments" from the command palette, and that picking a row opens the record.

Artifacts (screenshots, result.json, the Soma output channel = server log, code-server's log) go to
test-artifacts/vscode/ in the repo root.

Environment:
  SOMA_SKIP_VSCODE_E2E=1   skip (loudly; a deliberate opt-out, also on CI)
  CI=...                   a machine that cannot run the test fails instead of skipping
  SOMA_E2E_SERVER_COMMAND  JSON list overriding the server command (default: [sys.executable, "-m", "soma_lsp"])
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXT_DIR = REPO / "editors" / "vscode"
SETUP = EXT_DIR / "scripts" / "setup-e2e.sh"
VSIX = EXT_DIR / "soma-lsp.vsix"
DRIVER_DIR = REPO / "tests" / "e2e" / "vscode"
CS_HOME = REPO / ".cache" / "code-server"
CODE_SERVER = CS_HOME / "node_modules" / ".bin" / "code-server"
FIXTURE = REPO / "fixtures" / "workspace"
ARTIFACTS = REPO / "test-artifacts" / "vscode"
INSTALL_ARTIFACTS = REPO / "test-artifacts" / "vscode-install"
PIPE_ARTIFACTS = REPO / "test-artifacts" / "vscode-pipe"

FILE = "model/transformer.py"
SYMBOL = "RotaryEmbedding"
EXPECTED_ID = "exp-0042"
EXPECTED_NAME = "rope-theta-500k"


def _cannot_run(reason: str) -> None:
    """Skip loudly — or fail on CI, where this test must run."""
    msg = f"VS Code end-to-end test NOT RUN: {reason}"
    if os.environ.get("CI"):
        pytest.fail(msg + " (CI is set: this machine must be able to run it)", pytrace=False)
    print("\n" + "!" * 100 + f"\n{msg}\n" + "!" * 100, file=sys.stderr)
    warnings.warn(msg, stacklevel=2)
    pytest.skip(msg)


def _machine_check() -> None:
    if os.environ.get("SOMA_SKIP_VSCODE_E2E"):  # a deliberate opt-out, honoured on CI too
        msg = "VS Code end-to-end test NOT RUN: SOMA_SKIP_VSCODE_E2E is set"
        warnings.warn(msg, stacklevel=2)
        pytest.skip(msg)
    if not sys.platform.startswith("linux"):
        _cannot_run(f"needs Linux (code-server + Debian chromium), this is {sys.platform}")
    for tool in ("node", "npm"):
        if not shutil.which(tool):
            _cannot_run(f"{tool} is not installed (node >= 20 is needed)")
    can_apt = os.geteuid() == 0 and shutil.which("apt-get") is not None
    missing = [t for t in ("chromium", "rg") if not shutil.which(t)]
    if missing and not can_apt:
        _cannot_run(f"{', '.join(missing)} missing and no apt-get as root to install them "
                    "(apt-get install -y chromium libkrb5-dev ripgrep)")


_setup_done = False


def _run_setup(log: Path) -> None:
    global _setup_done
    if _setup_done:  # once a test session: it rebuilds the .vsix
        return
    with log.open("w") as out:
        proc = subprocess.run([str(SETUP)], cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=1200)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        pytest.fail(f"{SETUP.relative_to(REPO)} failed (exit {proc.returncode}); log {log}:\n{tail}", pytrace=False)
    assert VSIX.is_file(), f"setup did not produce {VSIX}"
    assert CODE_SERVER.exists(), f"setup did not install {CODE_SERVER}"
    _setup_done = True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kill_group(proc: subprocess.Popen | None) -> None:
    """Kill the process group of `proc` (started with start_new_session=True) and everything in it."""
    if proc is None:
        return
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _group_alive(pgid):
            time.sleep(0.1)
        if not _group_alive(pgid):
            break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields: state ppid pgrp ...; zombies do not count
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _wait_healthy(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"code-server exited with {proc.returncode}; log:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    pytest.fail(f"code-server not healthy after {timeout}s; log:\n{log.read_text(errors='replace')[-3000:]}")


def _symbol_position(path: Path, symbol: str) -> tuple[int, int]:
    """1-based (line, column) of the name in `class SYMBOL`."""
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        m = re.match(rf"\s*class\s+({symbol})\b", line)
        if m:
            return i, m.start(1) + 2  # one character into the name
    raise AssertionError(f"no `class {symbol}` in {path}")


def _collect_logs(run: Path, out: Path) -> list[str]:
    kept = []
    for f in sorted((run / "data" / "logs").rglob("*.log")):
        if "Soma" in f.name:
            dest = out / "soma-output.log"  # the extension's output channel: client + server log
        elif f.name in ("exthost.log", "remoteexthost.log"):
            dest = out / f"{f.parent.name}-{f.name}"
        else:
            continue
        shutil.copyfile(f, dest)
        kept.append(dest.name)
    return kept


def test_package_json_mirrors_the_server_settings() -> None:
    """VS Code sends every contributed setting with its default, so the extension's defaults *are* the
    server's defaults in VS Code: they must match `soma_lsp.server.settings` key for key."""
    from soma_lsp.server.settings import FIELDS, Settings

    props = json.loads((EXT_DIR / "package.json").read_text())["contributes"]["configuration"]["properties"]
    client_only = {"soma.server.command", "soma.server.pipe", "soma.server.installSource", "soma.trace.server"}
    assert set(props) - client_only == {f"soma.{k}" for k in FIELDS}
    defaults = Settings().to_json()

    def server_default(key: str):
        value = defaults
        for part in key.split("."):
            value = value[part]
        return value

    for key in FIELDS:
        assert props[f"soma.{key}"]["default"] == server_default(key), key
        assert props[f"soma.{key}"].get("markdownDescription") or props[f"soma.{key}"].get("description"), key
    assert props["soma.deadEnds.severity"]["enum"] == ["warning", "information", "hint", "off"]


def _vscode_run(out: Path, settings: dict, env: dict, driver_env: dict) -> tuple[dict, Path, str, Path]:
    """One code-server session on a fresh copy of the fixture workspace, with a fresh profile that has
    the .vsix installed and `settings` as its user settings, driven by drive.js with `driver_env`.
    Returns the driver's result.json, the driver log, where the artifacts are, and the run folder."""
    # A short path: Chromium's and VS Code's unix sockets live below it (108-byte limit). Removed at the
    # end of a passing run, kept for a look otherwise.
    tmp_path = Path(tempfile.mkdtemp(prefix="soma-e2e-", dir="/tmp"))
    workspace = tmp_path / "workspace"
    shutil.copytree(FIXTURE, workspace, symlinks=True)
    run = tmp_path / "run"
    for d in ("ext", "data/User", "xdg-config", "xdg-data", "xdg-cache", "tmp"):
        (run / d).mkdir(parents=True, exist_ok=True)
    env = dict(env)
    env.update(
        XDG_CONFIG_HOME=str(run / "xdg-config"),
        XDG_DATA_HOME=str(run / "xdg-data"),
        XDG_CACHE_HOME=str(run / "xdg-cache"),
        TMPDIR=str(run / "tmp"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("SOMA_POOL", None)  # the workspace's own .soma/pool
    settings = {
        "workbench.startupEditor": "none",
        "workbench.tips.enabled": False,
        "workbench.enableExperiments": False,
        "security.workspace.trust.enabled": False,
        "extensions.autoUpdate": False,
        "extensions.autoCheckUpdates": False,
        "extensions.ignoreRecommendations": True,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
        "editor.hover.delay": 200,
        "editor.codeLens": True,
        "editor.minimap.enabled": False,
        "files.watcherExclude": {"**/.git/**": True},
        **settings,
    }
    (run / "data" / "User" / "settings.json").write_text(json.dumps(settings, indent=1))
    port = _free_port()
    (run / "config.yaml").write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    cs_args = [str(CODE_SERVER), "--config", str(run / "config.yaml"),
               "--extensions-dir", str(run / "ext"), "--user-data-dir", str(run / "data")]

    install = subprocess.run(cs_args + ["--install-extension", str(VSIX), "--force"], env=env,
                             capture_output=True, text=True, timeout=120)
    (out / "install-extension.log").write_text(install.stdout + install.stderr)
    assert install.returncode == 0 and "soma" in (install.stdout + install.stderr), (
        f"installing {VSIX.name} failed:\n{install.stdout}\n{install.stderr}")

    line, col = _symbol_position(workspace / FILE, SYMBOL)
    cs_log = out / "code-server.log"
    server = driver = None
    drive_out = out / "drive.log"
    t_run = time.monotonic()
    try:
        with cs_log.open("w") as log:
            server = subprocess.Popen(
                cs_args + ["--bind-addr", f"127.0.0.1:{port}", "--auth", "none",
                           "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
                           "--disable-getting-started-override", str(workspace)],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=run)
        _wait_healthy(port, server, cs_log)
        denv = dict(env, CS_URL=f"http://127.0.0.1:{port}/?folder={workspace}", OUT_DIR=str(out),
                    FILE=FILE, SYMBOL=SYMBOL, SYMBOL_LINE=str(line), SYMBOL_COL=str(col), **driver_env)
        with drive_out.open("w") as log:
            driver = subprocess.Popen(["node", str(DRIVER_DIR / "drive.js")], env=denv, cwd=DRIVER_DIR,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                driver.wait(timeout=600)
            except subprocess.TimeoutExpired:
                pass
    finally:
        _kill_group(driver)
        _kill_group(server)
        kept = _collect_logs(run, out)
    t_run = time.monotonic() - t_run

    result_file = out / "result.json"
    where = (f"artifacts in {out} ({', '.join(kept) or 'no Soma output log found'}); "
             f"run folder kept: {tmp_path}")
    assert result_file.is_file(), f"the driver wrote no result.json:\n{drive_out.read_text()[-3000:]}\n{where}"
    result = json.loads(result_file.read_text())
    print(f"run {t_run:.0f}s; {where}")
    print(json.dumps(result["steps"], indent=1))
    return result, drive_out, where, tmp_path


def _step_value(result: dict, drive_out: Path, where: str):
    """`value(name)`: the named driver step's value, asserting that it ran and passed."""
    def value(name: str):
        st = result["steps"].get(name)
        assert st is not None and st["ok"], (
            f"step {name!r} failed: {st and st.get('error')}\n"
            f"driver log tail:\n{drive_out.read_text()[-2000:]}\n{where}")
        return st["value"]
    return value


def _prepare(out: Path) -> None:
    _machine_check()
    if not FIXTURE.joinpath(FILE).is_file():
        pytest.fail(f"fixture {FIXTURE / FILE} is missing")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    _run_setup(out / "setup.log")


def test_vscode_extension_end_to_end() -> None:
    _prepare(ARTIFACTS)
    server_command = [sys.executable, "-m", "soma_lsp"]
    if os.environ.get("SOMA_E2E_SERVER_COMMAND"):
        server_command = json.loads(os.environ["SOMA_E2E_SERVER_COMMAND"])
    result, drive_out, where, tmp_path = _vscode_run(
        ARTIFACTS, {"soma.server.command": server_command, "soma.trace.server": "messages"}, dict(os.environ),
        {"EXPECT_HOVER": EXPECTED_ID, "EXPECT_PICK": EXPECTED_ID})
    value = _step_value(result, drive_out, where)

    lenses = value("code_lens")
    assert any("related experiment" in t for t in lenses), lenses

    hover = value("hover")
    assert EXPECTED_ID in hover and EXPECTED_NAME in hover, hover
    assert "lexical" in hover, f"no component breakdown in the hover: {hover!r}"
    # rendered by VS Code itself: names and headlines as written, the tie and the dead end explained
    assert "\\" not in hover and "theta 500k diverges at 2k steps" in hover, hover
    assert "⚓ tied to this code" in hover and "dead end: status failed" in hover, hover
    assert (ARTIFACTS / "hover.png").is_file()

    clicked = value("lens_click")
    assert "related experiment" in clicked["lens"] and clicked["rows"] >= 1, clicked

    picked = value("find_related")
    assert any(EXPECTED_ID in r for r in picked["rows"]), picked
    row = next(r for r in picked["rows"] if EXPECTED_ID in r)
    assert EXPECTED_NAME in row and "score" in row and "lexical" in row, row
    assert "dead end" in row, f"exp-0042 is a dead end but its row does not say so: {row!r}"

    opened = value("open_record")
    assert opened["tab"], opened

    assert "reloaded" in value("reload_pool")
    value("restart_server")
    output_log = ARTIFACTS / "soma-output.log"
    assert output_log.is_file(), f"no Soma output log; {where}"
    log_text = output_log.read_text(errors="replace")
    restart_at = log_text.rfind("restarting the server")
    assert restart_at >= 0 and log_text.find("the server is running", restart_at) > restart_at, (
        f"no clean restart in {output_log}")

    assert value("settings_change")["visibleLenses"] == 0

    status = value("status_bar")
    assert "Soma" in status, status
    assert result["ok"], result["errors"]
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_vscode_offers_to_install_a_missing_server(tmp_path) -> None:
    """No soma-lsp anywhere (not on PATH, not importable by any Python on it): the extension says so
    once, with the exact fix, and offers to install it with that Python into a private environment;
    accepted, the environment is made in the extension's storage, the server installed from
    `soma.server.installSource` (here the wheel of this checkout; by default the package name) and
    started — its code lenses show."""
    from wheels import build_wheel

    _prepare(INSTALL_ARTIFACTS)
    wheel = build_wheel(tmp_path)
    # VS Code adds what the user's login shell puts on PATH; the directories holding this test's
    # soma-lsp (its venv's bin/) are left out, and PYTHONPATH, which would make any Python import it
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if d and not Path(d, "soma-lsp").exists())
    result, drive_out, where, run_dir = _vscode_run(
        INSTALL_ARTIFACTS, {"soma.server.installSource": str(wheel), "soma.trace.server": "messages"}, env,
        {"SCENARIO": "install"})
    value = _step_value(result, drive_out, where)

    said = value("not_installed")
    assert "soma-lsp is not installed" in said["text"], said
    fix = re.search(rf"Fix: run `(\S+) -m pip install {re.escape(str(wheel))}`", said["text"])
    assert fix, said  # the exact fix, with the Python it found
    python = fix.group(1)
    assert subprocess.run([python, "-c", "import soma_lsp"], env=env, cwd=tmp_path, capture_output=True).returncode
    assert f"install it with {python} into a private environment" in said["text"], said
    assert "Install in a Private Environment" in said["buttons"], said
    assert value("said_once")["toasts"] == 1
    log_text = (INSTALL_ARTIFACTS / "soma-output.log").read_text(errors="replace")
    assert log_text.count("soma-lsp is not installed") >= 2, "the restart did not look for the server again"

    assert "74 experiments" in value("install")
    assert any("related experiment" in t for t in value("code_lens"))
    (server,) = run_dir.glob("run/data/User/globalStorage/*/soma-lsp-venv/bin/soma-lsp")
    assert f"installed: {server}" in log_text
    assert result["ok"], result["errors"]
    shutil.rmtree(run_dir, ignore_errors=True)


def test_vscode_connects_to_a_server_started_with_pipe() -> None:
    """`soma.server.pipe` names the socket of `soma-lsp serve --pipe PATH` started by hand: the
    extension connects to it (no server command is run) and its code lenses show."""
    _prepare(PIPE_ARTIFACTS)
    folder = Path(tempfile.mkdtemp(prefix="soma-pipe-", dir="/tmp"))  # short: a socket path has 108 bytes
    sock = folder / "soma.sock"
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    server = subprocess.Popen([sys.executable, "-m", "soma_lsp", "serve", "--pipe", str(sock)], cwd=folder,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        assert "listening on" in server.stderr.readline().decode()
        result, drive_out, where, run_dir = _vscode_run(
            PIPE_ARTIFACTS, {"soma.server.pipe": str(sock), "soma.server.command": ["soma-lsp-not-run"],
                             "soma.trace.server": "messages"}, dict(os.environ), {"SCENARIO": "pipe"})
        value = _step_value(result, drive_out, where)
        assert any("related experiment" in t for t in value("code_lens"))
        log_text = (PIPE_ARTIFACTS / "soma-output.log").read_text(errors="replace")
        assert f"connecting to the server on {sock}" in log_text
        assert result["ok"], result["errors"]
        shutil.rmtree(run_dir, ignore_errors=True)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)
