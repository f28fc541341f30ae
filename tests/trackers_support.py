"""What the tracker tests share: an environment that keeps mlflow and wandb inside a temporary folder,
the client worker (`trackers_worker.py`, real mlflow and wandb in a child process), a real `mlflow
server` on 127.0.0.1, and a bounded wait for live updates.

Fixtures are session-scoped where they are slow (the worker imports mlflow once; one server serves
every REST test). Import them into a test module with `from trackers_support import *`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool
from soma_lsp.retrieval import LiveIndex

TIMEOUT = 60.0  # seconds: a bound on waiting, not a performance limit
HERE = Path(__file__).parent

__all__ = ["TIMEOUT", "Worker", "mlflow_server", "tracker_env", "tracker_home", "wait_for", "worker", "pool_of",
           "free_port"]


def wait_for(condition, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def tracker_env(home: Path) -> dict[str, str]:
    """The environment for processes running mlflow or wandb: everything they write stays under `home`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "WANDB_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), XDG_CACHE_HOME=str(home / "cache"),
               XDG_DATA_HOME=str(home / "data"), MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1",
               MLFLOW_ALLOW_FILE_STORE="true", WANDB_MODE="offline", WANDB_SILENT="true",
               WANDB_DIR=str(home / "wandb-default"), WANDB_CACHE_DIR=str(home / "cache" / "wandb"),
               WANDB_CONFIG_DIR=str(home / "config" / "wandb"), WANDB_DATA_DIR=str(home / "data" / "wandb"),
               GIT_PYTHON_REFRESH="quiet", PYTHONWARNINGS="ignore")
    return env


class Worker:
    """The client worker: `worker("mlflow_run", uri=…, …)` returns the command's answer."""

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen([sys.executable, str(HERE / "trackers_worker.py")], cwd=home,
                                        env=tracker_env(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True)

    def __call__(self, op: str, **arguments):
        self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        assert "error" not in answer, answer["error"]
        return answer["ok"]

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="session")
def tracker_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tracker-home")


@pytest.fixture(scope="session")
def worker(tracker_home):
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    w = Worker(tracker_home)
    yield w
    w.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def mlflow_server(tracker_home):
    """A real `mlflow server` on 127.0.0.1 (SQLite backend) for the session: its base URL."""
    pytest.importorskip("mlflow")
    folder = tracker_home / "server"
    folder.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{folder}/mlflow.db",
         "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        cwd=folder, env=tracker_env(tracker_home), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)

    def healthy() -> bool:
        assert process.poll() is None, "mlflow server exited"
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    try:
        wait_for(healthy, "mlflow server /health", timeout=120)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the server and its workers
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def pool_of(*entries) -> LivePool:
    pool = LivePool([str(e) for e in entries], LiveIndex())
    pool.load()
    return pool
