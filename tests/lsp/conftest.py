"""End-to-end harness for the language server: a real `python -m soma_lsp` subprocess driven by
pytest-lsp's client, under the capabilities of real clients (VS Code and Neovim presets).

* `workspace` — a copy of `fixtures/workspace` in `tmp_path` (tests may edit code and pool).
* `start_session(...)` — start a server and initialise a session with options (preset, settings,
  capability tweaks); the session is shut down at teardown. `session` — the default one, run once
  per client preset (`CLIENTS`).
* `RawServer` — a server subprocess spoken to in raw bytes, for framing and protocol abuse.

No wall-clock limits: every wait is `asyncio.wait_for` with a generous `TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import client_capabilities
from pytest_lsp.client import LanguageClient, make_test_lsp_client

from soma_lsp.client import plain

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "workspace"
SERVER = [sys.executable, "-m", "soma_lsp"]
CLIENTS = ["visual-studio-code", "neovim@0.11.0"]
TIMEOUT = 30.0


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


async def wait_until(predicate: Callable[[], Any], timeout: float = TIMEOUT, step: float = 0.02) -> Any:
    async def poll():
        while True:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(step)

    return await asyncio.wait_for(poll(), timeout)


@dataclass
class Session:
    client: LanguageClient
    workspace: Path
    preset: str
    statuses: list[dict] = field(default_factory=list)
    registrations: list[lsp.Registration] = field(default_factory=list)
    lens_refreshes: int = 0

    def uri(self, rel: str) -> str:
        return (self.workspace / rel).as_uri()

    def path(self, rel: str) -> Path:
        return self.workspace / rel

    def open(self, rel: str, text: str | None = None, language: str = "python", version: int = 1) -> str:
        uri = self.uri(rel)
        text = self.path(rel).read_text(encoding="utf-8") if text is None else text
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)))
        return uri

    def change(self, uri: str, version: int, changes: list[lsp.TextDocumentContentChangeEvent]) -> None:
        self.client.text_document_did_change(lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=version), changes))

    async def hover(self, uri: str, line: int, character: int) -> lsp.Hover | None:
        return await asyncio.wait_for(self.client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(line, character))), TIMEOUT)

    async def lenses(self, uri: str) -> list[lsp.CodeLens]:
        return await asyncio.wait_for(self.client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))), TIMEOUT) or []

    async def command(self, name: str, *arguments: Any) -> Any:
        return await asyncio.wait_for(self.client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(name, list(arguments))), TIMEOUT)

    async def diagnostics(self, uri: str, predicate: Callable[[list[lsp.Diagnostic]], bool] = lambda d: True,
                          timeout: float = TIMEOUT) -> list[lsp.Diagnostic]:
        """Wait until the diagnostics published for `uri` satisfy `predicate`."""
        def ready():
            found = self.client.diagnostics.get(uri)
            return found is not None and predicate(list(found))
        await wait_until(ready, timeout)
        return list(self.client.diagnostics[uri])

    async def wait_status(self, predicate: Callable[[dict], bool]) -> dict:
        await wait_until(lambda: any(predicate(s) for s in self.statuses))
        return next(s for s in reversed(self.statuses) if predicate(s))

    def line_of(self, rel: str, needle: str) -> tuple[int, int]:
        for number, line in enumerate(self.path(rel).read_text(encoding="utf-8").splitlines()):
            if needle in line:
                return number, line.index(needle)
        raise AssertionError(f"{needle!r} not in {rel}")


def capabilities(preset: str, tweak: Callable[[lsp.ClientCapabilities], None] | None = None) -> lsp.ClientCapabilities:
    caps = client_capabilities(preset)
    if tweak is not None:
        tweak(caps)
    return caps


async def open_session(workspace: Path, preset: str = "visual-studio-code", *,
                       init_options: Any = None, configuration: dict | None = None,
                       tweak: Callable[[lsp.ClientCapabilities], None] | None = None,
                       command: list[str] | None = None, env: dict[str, str] | None = None,
                       wait_loaded: bool = True) -> Session:
    client = make_test_lsp_client()
    if configuration is not None:
        client.set_configuration(configuration)
    session = Session(client, workspace, preset)

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register(ls, params: lsp.RegistrationParams):
        session.registrations.extend(params.registrations)

    @client.feature(lsp.CLIENT_UNREGISTER_CAPABILITY)
    def unregister(ls, params):
        return None

    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(ls, params):
        session.lens_refreshes += 1

    @client.feature("soma/poolStatus")
    def pool_status(ls, params):
        session.statuses.append(plain(params))

    await client.start_io(*(command or SERVER), env=env or server_env())
    await asyncio.wait_for(client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities(preset, tweak),
        root_uri=workspace.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(workspace.as_uri(), workspace.name)],
        initialization_options=init_options)), TIMEOUT)
    if wait_loaded:
        await session.wait_status(lambda s: not s["indexing"] and s["version"] > 0)
    return session


async def close_session(session: Session) -> None:
    client = session.client
    try:
        if client._server is not None and client._server.returncode is None:
            await asyncio.wait_for(client.shutdown_session(), TIMEOUT)
    finally:
        await client.stop()


def small_workspace(root: Path, pool_yaml: str, files: dict[str, str]) -> Path:
    """A workspace of its own: one pool file in `.soma/pool` and these source files."""
    (root / ".soma" / "pool").mkdir(parents=True)
    (root / ".soma" / "pool" / "runs.yaml").write_text(pool_yaml, encoding="utf-8")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    target = tmp_path / "workspace"
    shutil.copytree(FIXTURES, target, symlinks=True)
    return target


@pytest_asyncio.fixture
async def start_session(workspace: Path):
    sessions: list[Session] = []

    async def start(preset: str = "visual-studio-code", **options: Any) -> Session:
        session = await open_session(options.pop("workspace", workspace), preset, **options)
        sessions.append(session)
        return session

    yield start
    for session in sessions:
        await close_session(session)


@pytest.fixture(params=CLIENTS)
def preset(request) -> str:
    return request.param


@pytest_asyncio.fixture
async def session(start_session, preset) -> Session:
    return await start_session(preset)


# -- raw bytes ---------------------------------------------------------------------------------------

def frame(body: bytes | str | dict) -> bytes:
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


class RawServer:
    """The server as a subprocess, spoken to in bytes; responses parsed as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[dict] = []
        self._buffer = b""
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, command: list[str] | None = None, env: dict | None = None) -> "RawServer":
        process = await asyncio.create_subprocess_exec(
            *(command or SERVER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, env=env or server_env())
        return cls(process)

    async def _read(self) -> None:
        stdout = self.process.stdout
        while True:
            chunk = await stdout.read(65536)
            if not chunk:
                return
            self._buffer += chunk
            while True:
                head, sep, rest = self._buffer.partition(b"\r\n\r\n")
                if not sep:
                    break
                length = int(re.search(rb"Content-Length: *(\d+)", head, re.I).group(1))
                if len(rest) < length:
                    break
                self.messages.append(json.loads(rest[:length]))
                self._buffer = rest[length:]

    def send(self, data: bytes) -> None:
        self.process.stdin.write(data)

    def request(self, msg_id: int, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(frame(message))

    def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(frame(message))

    async def response(self, msg_id: Any) -> dict:
        return await wait_until(lambda: next((m for m in self.messages if m.get("id") == msg_id
                                              and "method" not in m), None))

    async def initialize(self, workspace: Path) -> dict:
        self.request(1, "initialize", {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {},
                                            "workspaceFolders": [{"uri": workspace.as_uri(), "name": "ws"}]})
        answer = await self.response(1)
        self.notify("initialized", {})
        return answer

    async def exit_code(self) -> int:
        return await asyncio.wait_for(self.process.wait(), TIMEOUT)

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self._reader.cancel()


@pytest_asyncio.fixture
async def raw_server():
    servers: list[RawServer] = []

    async def start(**options: Any) -> RawServer:
        server = await RawServer.start(**options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()
