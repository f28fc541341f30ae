"""The soma language server: state (settings, workspace folders, the live pool and index, watching),
the protocol fixes pygls 2.1 needs, and the plumbing the feature modules share.

Protocol fixes (see /work/shared/recipes/pygls-notes.md for pygls' own behaviour):

* A request whose params do not match the method's type gets a -32602 answer (pygls sends none).
* A frame whose body is not JSON gets a -32700 answer to its id when the id can be read
  (`transport`); bad headers and wrong Content-Length no longer leave the server deaf.
* Requests after `shutdown` get -32600 (pygls drops them silently).
* `exit` without `shutdown` exits 1 (pygls exits 0).
* `workspace/executeCommand` runs as a cancellable task; malformed arguments get -32602.
* Positions are always UTF-16 (what the query builder speaks; every client supports it).

Threads: the event loop only moves messages. Parsing, ranking and pool loading run in executors
(`run_query`, `run_pool`), so typing is never blocked and a hover during a big reindex still answers
from the index's consistent snapshot.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import unquote

from cattrs.errors import ClassValidationError
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import RPCRequest

from .. import __version__
from ..pool import LivePool, PoolChange, PoolWatcher, pool_roots
from ..pool.snapshot import cache_directory
from ..retrieval import LiveIndex
from . import convert, settings as settings_module
from .settings import Settings
from .timing import DIAGNOSTIC_DEBOUNCE, LENS_DEBOUNCE, POOL_REFRESH_DELAY

log = logging.getLogger("soma_lsp.server")

NAME = "soma-lsp"
POOL_STATUS = "soma/poolStatus"
SWITCH_INTERVAL = 0.0005  # seconds, see `_serve`
WATCH_GLOB = "**/*.{json,jsonl,yaml,yml}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One document as it is now: what every feature works from (off the event loop)."""

    uri: str
    path: str | None  # filesystem path (None: not a file: URI)
    relpath: str | None  # workspace-relative `/` path (None: outside every folder)
    source: str
    version: int | None

    @property
    def name(self) -> str:
        """What the query builder is given to pick the language (path, else the URI)."""
        return self.path or self.uri

    @property
    def lines(self) -> list[str]:
        return convert.split_lines(self.source)


class SomaProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, with the answers it leaves out (module docstring)."""

    _server: "SomaServer"

    # -- messages in ------------------------------------------------------------------------------

    def handle_raw(self, data: Any) -> None:
        """A decoded JSON value from the transport: structure it, answer what cannot be."""
        if not isinstance(data, dict) or data.get("jsonrpc") != self.VERSION:
            msg_id = data.get("id") if isinstance(data, dict) else None
            if isinstance(data, dict) and "method" in data and isinstance(msg_id, int | str):
                self._answer_error(msg_id, JsonRpcInvalidRequest("Invalid Request: not a JSON-RPC 2.0 message"))
            else:
                log.warning("ignoring a message that is not JSON-RPC 2.0: %.200r", data)
            return
        try:
            message = self.structure_message(data)
        except Exception as error:  # noqa: BLE001
            self._unstructurable(data, error)
            return
        self.handle_message(message)

    def _unstructurable(self, data: dict, error: Exception) -> None:
        msg_id, method = data.get("id"), data.get("method")
        detail = _describe(error)
        if method is not None and isinstance(msg_id, int | str):
            log.warning("invalid params for %s (id %r): %s", method, msg_id, detail)
            self._answer_error(msg_id, JsonRpcInvalidParams(f"Invalid params for {method}: {detail}"))
        elif method is None and isinstance(msg_id, int | str):
            # A response to one of our requests that does not match its type: fail that request.
            future = self._request_futures.pop(msg_id, None)
            log.warning("malformed response to request %r: %s", msg_id, detail)
            if future is not None and not future.done():
                future.set_exception(JsonRpcInvalidParams(f"malformed response: {detail}"))
        else:
            log.warning("invalid params for notification %s: %s", method, detail)

    def answer_parse_error(self, msg_id: int | str | None, text: str) -> None:
        log.warning("unparsable message (id %r): %s", msg_id, text)
        self._send_data({"jsonrpc": self.VERSION, "id": msg_id,
                         "error": {"code": JsonRpcParseError.CODE, "message": text}})

    def _answer_error(self, msg_id: int | str, error: JsonRpcException) -> None:
        self._send_response(msg_id, error=error.to_response_error())

    def handle_message(self, message: Any) -> None:
        if self._shutdown and isinstance(message, RPCRequest) and message.method != lsp.EXIT:
            self._answer_error(message.id, JsonRpcInvalidRequest("Invalid Request: the server is shutting down"))
            return
        super().handle_message(message)

    # -- lifecycle ----------------------------------------------------------------------------------

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        general = params.capabilities.general
        offered = general.position_encodings if general is not None else None
        if general is not None:
            general.position_encodings = None  # → UTF-16, which every client must support
        try:
            result = yield from super().lsp_initialize(params)
        finally:
            if general is not None:
                general.position_encodings = offered
        return result

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> None:
        code = 0 if self._shutdown else 1
        if code:
            log.warning("exit without shutdown: exiting with status 1")
        self._server.stop(code)

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Any:
        from .commands import execute  # the feature module owns the commands

        return await execute(self._server, params.command, params.arguments)


def _describe(error: BaseException) -> str:
    """A readable reason for a structuring failure (cattrs' per-field messages when there are any)."""
    cause = error.__cause__ or error
    if isinstance(cause, ClassValidationError):
        try:
            from cattrs import transform_error

            return "; ".join(m.replace(" @ .", " @ ", 1) for m in transform_error(cause, path=""))
        except Exception:  # noqa: BLE001
            pass
    return str(cause) or type(cause).__name__


class SomaServer(LanguageServer):
    """The server and its state. Feature modules register handlers in `create_server`."""

    def __init__(self) -> None:
        super().__init__(NAME, __version__, protocol_cls=SomaProtocol,
                         text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental)
        self.settings = Settings()
        self.init_options: Any = None
        self.index = LiveIndex()
        self.pool: LivePool | None = None
        self.watcher: PoolWatcher | None = None
        self.roots: list[str] = []
        self.indexing = True  # from the start until the first load ends: "not loaded yet" is not "empty"
        self.loaded = asyncio.Event()  # set once the first load has ended (commands wait for it)
        self.client_watching = False
        self.exit_code: int | None = None
        self._stop_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._query_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="soma-query")
        self._pool_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soma-pool")
        self._unsubscribe: Callable[[], None] | None = None
        self._tasks: set[asyncio.Task] = set()
        self._doc_tasks: dict[str, asyncio.Task] = {}
        self._last_change: dict[str, float] = {}
        self._refresh_pending = False
        self._settings_problems: tuple[str, ...] = ()
        self._tokens = itertools.count(1)
        self._watch_registration: str | None = None
        self.lens_states: dict[str, Any] = {}  # uri → code_lens.LensState
        self._opened: dict[str, str] = {}  # unquoted URI → the client's spelling
        self._pending_pool: LivePool | None = None

    # -- small helpers ------------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop or asyncio.get_running_loop()

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def capability(self, dotted: str, default: Any = None) -> Any:
        """A client capability by snake_case path, e.g. `window.work_done_progress`."""
        value: Any = getattr(self.protocol, "client_capabilities", None)
        for part in dotted.split("."):
            if value is None:
                return default
            value = getattr(value, part, None)
        return default if value is None else value

    def spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    async def run_query(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a feature's pure work in the query executor (off the event loop)."""
        return await self.loop.run_in_executor(self._query_executor, lambda: fn(*args))

    async def run_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.loop.run_in_executor(self._pool_executor, lambda: fn(*args))

    def log_message(self, text: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        try:
            self.window_log_message(lsp.LogMessageParams(kind, text))
        except Exception:  # noqa: BLE001 - no transport yet (CLI, tests)
            pass

    def show_message(self, text: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        try:
            self.window_show_message(lsp.ShowMessageParams(kind, text))
        except Exception:  # noqa: BLE001
            pass

    def report_feature_failure(self, feature: str, error: BaseException) -> None:
        self.log_message(f"soma: {feature} failed: {type(error).__name__}: {error}", lsp.MessageType.Error)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls' default shows a message for every failed notification; log instead (the features
        contain their own failures, and a popup while typing is in the way). Failed requests are
        answered with their error already."""
        from pygls.exceptions import FeatureRequestError

        if source is FeatureRequestError:
            return
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)
        self.log_message(f"soma: internal error: {error}", lsp.MessageType.Error)

    # -- workspace ------------------------------------------------------------------------------------

    def folders(self) -> list[str]:
        """Workspace folder paths (the root URI when the client sent no folders)."""
        try:
            workspace = self.workspace
        except RuntimeError:
            return []
        paths = [convert.uri_to_path(f.uri) for f in workspace.folders.values()]
        if not paths and workspace.root_uri:
            paths = [convert.uri_to_path(workspace.root_uri)]
        return [p for p in paths if p]

    def snapshot(self, uri: str) -> Snapshot:
        """The document as the client has it (or as it is on disk, for a file the client has not
        opened). Raises when there is no such document."""
        document = self.workspace.get_text_document(uri)
        source = document.source  # reads the file for a document that is not open
        path = convert.uri_to_path(uri)
        relpath = convert.relative_to_folders(path, self.folders()) if path else None
        return Snapshot(uri, path, relpath, source, document.version)

    def open_uris(self) -> list[str]:
        """The open documents, spelled as the client spelled their URIs (pygls keys them unquoted)."""
        return list(self._opened.values())

    def open_document(self, uri: str):
        """The open document for this URI (None when it is not open)."""
        if unquote(uri) not in self._opened:
            return None
        try:
            return self.workspace.text_documents.get(unquote(uri))
        except RuntimeError:
            return None

    def document_opened(self, uri: str) -> None:
        self._opened[unquote(uri)] = uri

    # -- settings -------------------------------------------------------------------------------------

    async def load_settings(self, changed: Any = None) -> None:
        """Settings from initializationOptions, then `workspace/configuration` (when the client has
        it), else what didChangeConfiguration carried. Reports invalid values; applies the result."""
        sources: list[Any] = [self.init_options]
        if self.capability("workspace.configuration", False):
            try:
                answer = await asyncio.wait_for(self.workspace_configuration_async(
                    lsp.ConfigurationParams([lsp.ConfigurationItem(section=settings_module.SECTION)])), 10)
                if answer:
                    sources.append(answer[0])
            except Exception as error:  # noqa: BLE001 - a client that does not answer keeps defaults
                log.warning("workspace/configuration failed: %s", error)
        elif changed is not None:
            sources.append(changed)
        new, problems = settings_module.parse(*sources)
        if problems and tuple(problems) != self._settings_problems:
            for problem in problems:
                log.warning("%s", problem)
                self.log_message(f"soma: {problem}", lsp.MessageType.Warning)
            self.show_message("soma: invalid settings, defaults used for: " + "; ".join(problems))
        self._settings_problems = tuple(problems)
        old, self.settings = self.settings, new
        log.info("settings: %s", new.to_json())
        if self.pool is not None:
            if self._roots_for(new) != self.roots:
                await self.start_pool()
            elif old != new:
                self.refresh_documents(lenses=True)

    def _roots_for(self, settings: Settings) -> list[str]:
        return [str(r) for r in pool_roots(self.folders(), settings.pool, os.environ)]

    # -- the pool -------------------------------------------------------------------------------------

    async def start_pool(self) -> None:
        """(Re)create the pool for the current roots and load it off the loop.

        The first load fills the index queries already use, so results appear as batches of files land. A
        reload (same roots or new ones) loads into a fresh index while the previous one keeps
        answering — no query waits behind a big update — and swaps it in when done. The new pool
        is watched from before its load (changes seen during the load are applied right after it),
        the previous watcher runs until the swap."""
        roots = self._roots_for(self.settings)
        first = self.pool is None
        index = self.index if first else LiveIndex()
        pool = LivePool(roots, index, cache_dir=cache_directory(os.environ) if self.settings.snapshot else None)
        log.info("pool roots: %s", ", ".join(roots))
        if first:
            self.roots = roots
        previous_watcher, self.watcher = self.watcher, None
        self._pending_pool = pool
        try:
            await self._watch(pool)
            await self._load(pool)
        finally:
            self._pending_pool = None
        if previous_watcher is not None:
            self._pool_executor.submit(previous_watcher.stop)
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.pool, self.index, self.roots = pool, index, roots
        if not first:
            from . import hover

            hover.clear_cache()  # answers of the old index (and never a stale hit on a reused id)
        self._unsubscribe = pool.subscribe(self._pool_changed_threadsafe)
        self.pool_changed(None)
        if pool.unsaved:  # read files the snapshot did not have: save it, off the loop, after the swap
            self._pool_executor.submit(self.save_snapshot, pool)

    def save_snapshot(self, pool: LivePool | None = None) -> None:
        """Write the pool's snapshot if it changed since it was restored or saved (never raises)."""
        pool = pool or self.pool
        if pool is None or not pool.unsaved:
            return
        started = time.perf_counter()
        try:
            if pool.save_snapshot():
                log.info("pool snapshot saved in %.2fs: %s", time.perf_counter() - started, pool.snapshot_path)
        except Exception:  # noqa: BLE001 - a snapshot is an optimisation; failing to write one is not fatal
            log.exception("saving the pool snapshot failed")

    async def reload_pool(self) -> None:
        await self.start_pool()

    async def _load(self, pool: LivePool) -> None:
        from .progress import IndexingProgress

        progress = IndexingProgress(self)
        await progress.begin()
        self.indexing = True
        self.send_pool_status(pool)
        started = time.perf_counter()
        try:
            await self.run_pool(pool.load, progress.threadsafe_report)
        except Exception as error:  # noqa: BLE001 - a pool that fails to load leaves the server up
            log.exception("loading the pool failed")
            self.show_message(f"soma: loading the experiment pool failed: {error}", lsp.MessageType.Error)
        finally:
            self.indexing = False
            self.loaded.set()
            summary = pool.summary()
            text = f"{summary['records']} experiments from {summary['files']} files"
            if summary["errors"]:
                text += f", {summary['errors']} problems"
            await progress.end(text)
        log.info("pool loaded in %.2fs: %s", time.perf_counter() - started, text)
        self.log_message(f"soma: {text} ({', '.join(pool.roots)})")
        self.send_pool_status(pool)

    def _pool_changed_threadsafe(self, change: PoolChange) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.pool_changed, change)

    def pool_changed(self, change: PoolChange | None) -> None:
        """After every applied batch: status to the client, then (coalesced) open documents refreshed."""
        if self._refresh_pending:
            return
        self._refresh_pending = True

        async def later() -> None:
            await asyncio.sleep(POOL_REFRESH_DELAY)
            self._refresh_pending = False
            self.send_pool_status()
            self.refresh_documents(lenses=True)

        self.spawn(later())

    def status(self, pool: LivePool | None = None) -> dict[str, Any]:
        pool = pool or self.pool
        if pool is None:
            return {"version": 0, "pools": list(self.roots), "records": 0, "files": 0, "errors": 0,
                    "indexing": self.indexing, "restored": 0}
        summary = pool.summary()
        return {"version": pool.version, "pools": pool.roots, "records": summary["records"],
                "files": summary["files"], "errors": summary["errors"], "indexing": self.indexing,
                "restored": pool.restored}

    def send_pool_status(self, pool: LivePool | None = None) -> None:
        try:
            self.protocol.notify(POOL_STATUS, self.status(pool))
        except Exception:  # noqa: BLE001
            log.exception("could not send %s", POOL_STATUS)

    async def apply_paths(self, paths: Iterable[str]) -> None:
        """Changed paths reported by the client's watcher: into the pool (and one being loaded)."""
        paths = [p for p in paths if p]
        for pool in {id(p): p for p in (self.pool, self._pending_pool) if p is not None}.values():
            if paths:
                await asyncio.get_running_loop().run_in_executor(None, pool.apply, paths)

    # -- watching -------------------------------------------------------------------------------------

    def _all_roots_in_workspace(self, roots: list[str]) -> bool:
        folders = [convert.real(f) for f in self.folders()]
        return bool(folders) and all(any(convert.inside(convert.real(r), f) for f in folders) for r in roots)

    async def _watch(self, pool: LivePool) -> None:
        """The client's watcher (dynamic registration) when it has one and every root is in the
        workspace; else the server's own."""
        dynamic = self.capability("workspace.did_change_watched_files.dynamic_registration", False)
        if dynamic and self._all_roots_in_workspace(pool.roots):
            if await self._register_watchers(pool.roots):
                self.client_watching = True
                return
        self.client_watching = False
        watcher = PoolWatcher(pool, on_error=lambda e: log.warning("pool watcher: %s", e))
        await self.run_pool(watcher.start)
        self.watcher = watcher
        log.info("watching the pool with the server's own watcher")

    async def _register_watchers(self, roots: list[str]) -> bool:
        relative = self.capability("workspace.did_change_watched_files.relative_pattern_support", False)
        watchers = []
        for root in roots:
            if relative:
                base = convert.path_to_uri(root)
                watchers.append(lsp.FileSystemWatcher(lsp.RelativePattern(base, WATCH_GLOB)))
                watchers.append(lsp.FileSystemWatcher(lsp.RelativePattern(base, "**/*"), kind=lsp.WatchKind.Delete))
            else:
                prefix = root.replace(os.sep, "/").rstrip("/")
                watchers.append(lsp.FileSystemWatcher(f"{prefix}/{WATCH_GLOB}"))
                watchers.append(lsp.FileSystemWatcher(f"{prefix}/**/*", kind=lsp.WatchKind.Delete))
        await self._unregister_watchers()
        registration_id = f"soma-pool-watch-{next(self._tokens)}"
        try:
            await asyncio.wait_for(self.client_register_capability_async(lsp.RegistrationParams([
                lsp.Registration(registration_id, lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                 lsp.DidChangeWatchedFilesRegistrationOptions(watchers))])), 10)
        except Exception as error:  # noqa: BLE001
            log.warning("client/registerCapability for file watching failed (%s); using our own watcher", error)
            return False
        self._watch_registration = registration_id
        log.info("the client watches the pool (%s)", registration_id)
        return True

    async def _unregister_watchers(self) -> None:
        registration, self._watch_registration = self._watch_registration, None
        if registration is None:
            return
        try:
            await asyncio.wait_for(self.client_unregister_capability_async(lsp.UnregistrationParams([
                lsp.Unregistration(registration, lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)])), 10)
        except Exception as error:  # noqa: BLE001
            log.warning("client/unregisterCapability failed: %s", error)

    def _stop_watching(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            self._pool_executor.submit(watcher.stop)

    # -- documents ------------------------------------------------------------------------------------

    def document_changed(self, uri: str) -> None:
        self._last_change[uri] = time.monotonic()
        self.schedule_document(uri, DIAGNOSTIC_DEBOUNCE)

    def schedule_document(self, uri: str, delay: float, *, lenses: bool = True) -> None:
        """(Re)compute a document's diagnostics (and lenses) after `delay` seconds of quiet; a later
        call supersedes (cancels) a pending one."""
        pending = self._doc_tasks.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._doc_tasks[uri] = self.spawn(self._refresh_document(uri, delay, lenses))

    async def _refresh_document(self, uri: str, delay: float, lenses: bool) -> None:
        from . import code_lens, diagnostics

        try:
            if delay:
                await asyncio.sleep(delay)
            await diagnostics.publish(self, uri)
            if lenses and uri in self.lens_states:
                await asyncio.sleep(max(0.0, LENS_DEBOUNCE - delay))
                await code_lens.recompute(self, uri)
        finally:
            if self._doc_tasks.get(uri) is asyncio.current_task():
                del self._doc_tasks[uri]

    def refresh_documents(self, *, lenses: bool) -> None:
        for uri in self.open_uris():
            self.schedule_document(uri, 0.0, lenses=False)
        if lenses:
            from . import code_lens

            self.spawn(code_lens.recompute_all(self))

    def document_closed(self, uri: str) -> None:
        self._opened.pop(unquote(uri), None)
        pending = self._doc_tasks.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self.lens_states.pop(uri, None)
        self._last_change.pop(uri, None)

    def idle_for(self, uri: str) -> float:
        last = self._last_change.get(uri)
        return float("inf") if last is None else time.monotonic() - last

    # -- running --------------------------------------------------------------------------------------

    def stop(self, code: int) -> None:
        self.exit_code = code
        if self._stop_event is not None:
            self._stop_event.set()

    def shutdown(self) -> None:  # pygls calls this on the way out of its own loops; ours below
        self._cleanup()

    def _cleanup(self) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            try:
                watcher.stop(timeout=1.0)
            except Exception:  # noqa: BLE001
                pass
        for task in list(self._tasks):
            task.cancel()
        self._query_executor.shutdown(wait=False, cancel_futures=True)
        self._pool_executor.shutdown(wait=False, cancel_futures=True)

    async def _serve(self, read: Callable[[], Any], writer: Any) -> int:
        from .transport import serve_stream

        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        # Queries hand the GIL back and forth with a pool load that parses in another thread; a
        # short switch interval keeps each handoff (numpy releases the GIL on every array op)
        # from waiting the default 5 ms behind the loader — hovers stay prompt during a reindex.
        sys.setswitchinterval(SWITCH_INTERVAL)
        self.protocol.set_writer(writer)
        try:
            await serve_stream(read, self.protocol, self._stop_event)
        finally:
            self._cleanup()
        if self.exit_code is None:  # the client went away without `exit`
            return 0 if self.protocol._shutdown else 1
        return self.exit_code

    def serve_stdio(self, stdin=None, stdout=None) -> int:
        """Serve over stdio; returns the exit status (0 after shutdown + exit, else 1)."""
        stdin = stdin or sys.stdin.buffer
        stdout = stdout or sys.stdout.buffer

        class Writer:
            def write(self, data: bytes) -> None:
                stdout.write(data)  # a BufferedWriter: partial writes are retried for us
                stdout.flush()

            def close(self) -> None:
                pass

        async def main() -> int:
            loop = asyncio.get_running_loop()
            read = await _stdin_reader(loop, stdin)
            return await self._serve(read, Writer())

        return asyncio.run(main())

    def serve_tcp(self, host: str, port: int, ready: Callable[[str, int], None] | None = None) -> int:
        """Listen on host:port, serve the first client that connects, exit when it is done."""

        async def main() -> int:
            done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

            async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                if done.done() or getattr(self, "_connected", False):
                    writer.close()
                    return
                self._connected = True

                class Writer:
                    def write(self, data: bytes) -> None:
                        writer.write(data)

                    def close(self) -> None:
                        writer.close()

                try:
                    code = await self._serve(lambda: reader.read(65536), Writer())
                finally:
                    writer.close()
                if not done.done():
                    done.set_result(code)

            server = await asyncio.start_server(connection, host, port)
            bound = server.sockets[0].getsockname()
            log.info("listening on %s:%s", bound[0], bound[1])
            if ready is not None:
                ready(bound[0], bound[1])
            async with server:
                code = await done
            return code

        return asyncio.run(main())


async def _stdin_reader(loop: asyncio.AbstractEventLoop, stdin) -> Callable[[], Any]:
    """An async `read()` of whatever stdin has, from a dedicated thread.

    Not `connect_read_pipe`: that makes the descriptor non-blocking, and a client that gives the
    server one socket for stdin and stdout would then see writes fail with EAGAIN. The thread is
    outside the loop's default executor, so a read still blocked at exit holds nothing up."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soma-stdin")
    read1 = getattr(stdin, "read1", None) or stdin.read
    return lambda: loop.run_in_executor(executor, read1, 65536)


def create_server() -> SomaServer:
    """A server with every feature registered."""
    from . import code_lens, commands, diagnostics, hover, lifecycle, links, symbols

    server = SomaServer()
    for module in (lifecycle, hover, code_lens, commands, diagnostics, links, symbols):
        module.register(server)
    return server


__all__ = ["NAME", "POOL_STATUS", "Snapshot", "SomaProtocol", "SomaServer", "create_server"]
