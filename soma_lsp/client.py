"""A small LSP client for soma-lsp: what `soma-lsp demo` and the LSP benchmark drive the server with.

It starts the server as a subprocess and speaks LSP over stdio, answers what the server asks of an
editor (configuration, capability registration, progress tokens) and remembers what it pushes
(diagnostics, pool status).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from . import __version__

#: Lines of the server's stderr kept: what a failed session shows of why.
STDERR_KEPT = 20
LINE_KEPT = 400


def plain(value: Any) -> Any:
    """JSON-like data from what pygls hands over (attribute objects for unknown shapes)."""
    if hasattr(value, "_asdict"):  # namedtuples (custom notifications' params) before other tuples
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: plain(v) for k, v in vars(value).items()}
    return value


class SomaClient(LanguageClient):
    """An editor stand-in: start it with `start(command, cwd)`, then `open_workspace(folder)`."""

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__("soma-lsp-client", __version__)
        self.settings = settings
        self.diagnostics: dict[str, list[lsp.Diagnostic]] = {}
        self.messages: list[str] = []
        self.progress: list[Any] = []
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_KEPT)
        self._diagnostics_changed = asyncio.Condition()

        @self.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        async def _diagnostics(client: SomaClient, params: lsp.PublishDiagnosticsParams) -> None:
            async with client._diagnostics_changed:
                client.diagnostics[params.uri] = list(params.diagnostics)
                client._diagnostics_changed.notify_all()

        @self.feature("soma/poolStatus")
        def _pool_status(client: SomaClient, params: Any) -> None:
            return None

        @self.feature(lsp.PROGRESS)
        def _progress(client: SomaClient, params: lsp.ProgressParams) -> None:
            client.progress.append(plain(params.value))

        @self.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def _register(client: SomaClient, params: lsp.RegistrationParams) -> None:
            return None

        @self.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def _progress_create(client: SomaClient, params: lsp.WorkDoneProgressCreateParams) -> None:
            return None

        @self.feature(lsp.WORKSPACE_CONFIGURATION)
        def _configuration(client: SomaClient, params: lsp.ConfigurationParams) -> list[Any]:
            return [client.settings for _ in params.items]

        @self.feature(lsp.WINDOW_LOG_MESSAGE)
        def _log(client: SomaClient, params: lsp.LogMessageParams) -> None:
            return None

        @self.feature(lsp.WINDOW_SHOW_MESSAGE)
        def _show(client: SomaClient, params: lsp.ShowMessageParams) -> None:
            client.messages.append(params.message)

    async def start_io(self, cmd: str, *args: str, **kwargs: Any) -> None:
        """Start the server, and read its stderr as it comes. pygls pipes the server's stderr; a pipe
        nobody reads fills (64 KiB) and then stops a server that logs in the middle of a write — at
        INFO a first load's worth of lines (seen in bench/lsp.py: no exit within 60 s of shutdown)."""
        await super().start_io(cmd, *args, **kwargs)
        self._async_tasks.append(asyncio.create_task(self._read_stderr(self._server.stderr)))

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        """Keep the last lines, each cut to `LINE_KEPT` characters (a line may be any length)."""
        rest = b""
        while chunk := await stream.read(1 << 16):
            *lines, rest = (rest + chunk).split(b"\n")
            self.stderr_tail.extend(line.decode(errors="replace")[:LINE_KEPT] for line in lines)
            rest = rest[:LINE_KEPT * 4]
        if rest:
            self.stderr_tail.append(rest.decode(errors="replace")[:LINE_KEPT])

    def exited(self) -> int | None:
        """The server's return code once its process has ended, else None."""
        return self._server.returncode if self._server else None

    async def open_workspace(self, folder: Path) -> lsp.InitializeResult:
        result = await self.initialize_async(lsp.InitializeParams(
            process_id=None, root_uri=folder.as_uri(), initialization_options=self.settings,
            workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
            capabilities=lsp.ClientCapabilities(
                window=lsp.WindowClientCapabilities(work_done_progress=True),
                workspace=lsp.WorkspaceClientCapabilities(configuration=True),
                text_document=lsp.TextDocumentClientCapabilities(
                    hover=lsp.HoverClientCapabilities(content_format=[lsp.MarkupKind.Markdown])))))
        self.initialized(lsp.InitializedParams())
        return result

    async def command(self, name: str, argument: dict[str, Any] | None = None) -> Any:
        return plain(await self.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=name, arguments=[argument or {}])))

    async def wait_for_pool(self, polls: int = 600, interval: float = 0.1) -> dict[str, Any]:
        """The pool status once the server has loaded the pool (or the last status seen). Before
        `initialized` is handled the status names no pool; an empty or missing pool is loaded too."""
        status: dict[str, Any] = {}
        for _ in range(polls):
            status = await self.command("soma.poolStatus") or {}
            if (status.get("records") or status.get("pools")) and not status.get("indexing"):
                break
            await asyncio.sleep(interval)
        return status

    async def open(self, path: Path, language: str, *, wait: float = 10.0) -> str:
        """didOpen the file; return its URI once its diagnostics arrived (or `wait` passed)."""
        uri = path.as_uri()
        async with self._diagnostics_changed:
            self.diagnostics.pop(uri, None)
            self.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=path.read_text())))
            try:
                await asyncio.wait_for(self._diagnostics_changed.wait_for(lambda: uri in self.diagnostics), wait)
            except TimeoutError:
                pass
        return uri

    async def diagnostics_until(self, uri: str, test: Callable[[list[lsp.Diagnostic]], bool]) -> list[lsp.Diagnostic]:
        """The diagnostics of `uri` once `test` holds for them (those already received first)."""
        async with self._diagnostics_changed:
            await self._diagnostics_changed.wait_for(lambda: test(self.diagnostics.get(uri, [])))
            return self.diagnostics.get(uri, [])

    async def hover(self, uri: str, line: int, character: int) -> lsp.Hover | None:
        return await self.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(line=line, character=character)))

    async def lenses(self, uri: str) -> list[lsp.CodeLens]:
        lenses = await self.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        return [lens if lens.command else await self.code_lens_resolve_async(lens) for lens in lenses or []]

    async def close(self) -> None:
        """shutdown + exit, then wait for the process."""
        try:
            await asyncio.wait_for(self.shutdown_async(None), 10)
            self.exit(None)
        finally:
            await self.stop()


def find(path: Path, needle: str, offset: int = 1) -> tuple[int, int]:
    """(line, character) `offset` characters into the first occurrence of `needle` in the file."""
    for line, text in enumerate(path.read_text().splitlines()):
        column = text.find(needle)
        if column >= 0:
            return line, column + offset
    raise ValueError(f"{needle!r} not in {path}")


async def start(command: Sequence[str], cwd: Path, settings: dict[str, Any] | None = None) -> SomaClient:
    client = SomaClient(settings)
    await client.start_io(*command, cwd=str(cwd))
    return client
