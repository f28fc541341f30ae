"""The session: what the server knows between requests — settings, workspace folders, open
documents, the current index and pool — and nothing about any feature.

Features read it through an immutable `Snapshot` taken per request (the document as the client has
it, the index, the settings, `now`, the client's capabilities), do their work on the snapshot off the
event loop, and learn about changes by subscribing to its hooks instead of being called by it:

* `edited(uri, changes)` — an edit arrived (before any debounce);
* `settled(uri, delay, lenses)` — a document is quiet (after `delay` seconds) or was opened/saved:
  recompute what is shown for it (`lenses`: lenses too, not only warnings);
* `closed(uri)` — the client closed a document;
* `stale()` — the pool or the settings changed: every open document's answers are out of date;
* `index_swapped(index)` — a reload swapped in a fresh index (answers kept for the old one are void).

Threads: the event loop only moves messages. Parsing and ranking run in the query executor
(`run_query`), pool loading in the pool executor (`run_pool`), so typing is never blocked and a hover
during a big reindex still answers from the index's consistent snapshot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Any, Generic, TypeVar
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from ..pool import LivePool
from ..pool.commit_ties import CommitTie, CommitTieMap
from ..query import BuiltQuery, retrieval_query, split_lines
from ..retrieval import LiveIndex, RetrievalQuery
from .. import foreground
from . import convert
from .settings import Settings
from .timing import DIAGNOSTIC_DEBOUNCE
from .unopened import read_unopened

log = logging.getLogger("soma_lsp.server")

F = TypeVar("F", bound=Callable[..., Any])


def capability(capabilities: Any, dotted: str, default: Any = None) -> Any:
    """A client capability by snake_case path, e.g. `window.work_done_progress`."""
    value = capabilities
    for part in dotted.split("."):
        if value is None:
            return default
        value = getattr(value, part, None)
    return default if value is None else value


def to_the_minute(now: datetime) -> datetime:
    """A hover's time: ages and recency to the minute, so that hovers share the index's work for a
    `now` (and the warming at the end of a load makes it for the minute hovers will ask)."""
    return now.replace(second=0, microsecond=0)


@dataclass(frozen=True, slots=True)
class Document:
    """One document as it is now (its text is never edited in place)."""

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
        return split_lines(self.source)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one request works from, fixed when it arrived: features never read the session
    from an executor thread, so a reload or a settings change mid-request cannot mix two worlds."""

    index: LiveIndex
    settings: Settings
    now: datetime
    pool: LivePool | None = None
    document: Document | None = None
    capabilities: Any = field(default=None, compare=False)  # lsp.ClientCapabilities (None: a CLI)
    commit_ties: CommitTieMap = field(default_factory=CommitTieMap, compare=False)
    #: while the first load still fills `index`: how far it is, in percent (answers are then partial,
    #: and say so — docs/spec.md §4.8); None once the pool is loaded
    partial: int | None = None

    def commit_ties_here(self) -> tuple[CommitTie, ...]:
        """The commit ties on this request's document (pool.commit_ties; keyed by resolved path)."""
        doc = self.document
        if doc is None or not doc.path or not self.commit_ties.by_path:
            return ()  # (no ties: no `realpath`, a few system calls on every hover)
        return self.commit_ties.for_path(convert.real(doc.path))

    def capability(self, dotted: str, default: Any = None) -> Any:
        return capability(self.capabilities, dotted, default)

    def retrieval_query(self, built: BuiltQuery | None, *, limit: int | None,
                        text: str | None = None) -> RetrievalQuery:
        """The core's query for a built scope, with this request's settings and time."""
        return retrieval_query(built, self.now, half_life_days=self.settings.half_life_days,
                               weights=self.settings.weights, limit=limit, text=text)


class Hook(Generic[F]):
    """Subscribers to one kind of event, called in subscription order (which `app` fixes)."""

    def __init__(self) -> None:
        self._subscribers: list[F] = []

    def subscribe(self, subscriber: F) -> F:
        self._subscribers.append(subscriber)
        return subscriber

    def emit(self, *args: Any) -> None:
        for subscriber in self._subscribers:
            subscriber(*args)

    async def emit_async(self, *args: Any) -> None:
        for subscriber in self._subscribers:
            await subscriber(*args)


class Session:
    """The server's state between requests (module docstring). `server` is the pygls server the
    session talks to the client through."""

    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        self.settings = Settings()
        self.init_options: Any = None
        self.index = LiveIndex()
        self.pool: LivePool | None = None
        self.commit_ties = CommitTieMap()  # replaced whole by the commit-tie service when it recomputes
        self.indexing = True  # from the start until the first load ends: "not loaded yet" is not "empty"
        self.loaded = asyncio.Event()  # set once the first load has ended
        self.loading: int | None = None  # percent done of the load under way (first or reload), else None
        self.edited: Hook[Callable[[str, Sequence[lsp.TextDocumentContentChangeEvent]], None]] = Hook()
        self.settled: Hook[Callable[[str, float, bool], Awaitable[None]]] = Hook()
        self.closed: Hook[Callable[[str], None]] = Hook()
        self.stale: Hook[Callable[[], None]] = Hook()
        self.index_swapped: Hook[Callable[[LiveIndex], None]] = Hook()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._query_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="soma-query")
        self._pool_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="soma-pool")
        self._tasks: set[asyncio.Task] = set()
        self._doc_tasks: dict[str, asyncio.Task] = {}
        self._last_change: dict[str, float] = {}
        self._opened: dict[str, str] = {}  # unquoted URI → the client's spelling

    # -- plumbing -----------------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop or asyncio.get_running_loop()

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the server runs on (threads hand events back to it)."""
        self._loop = loop

    def now(self) -> datetime:
        return datetime.now(timezone.utc)

    def capability(self, dotted: str, default: Any = None) -> Any:
        return capability(getattr(self.server.protocol, "client_capabilities", None), dotted, default)

    def handle(self, method: str, handler: Callable[..., Any], *bound: Any, options: Any = None) -> None:
        """Register a feature's handler `(session, *bound, params)` for an LSP method (`bound`: what
        the feature keeps for itself, e.g. its caches)."""
        self.server.feature(method, options)(partial(handler, self, *bound))

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
        """Run a feature's pure work in the query executor (off the event loop); background work
        steps aside meanwhile (`foreground`)."""
        def answer() -> Any:
            with foreground.answering():
                return fn(*args)
        return await self.loop.run_in_executor(self._query_executor, answer)

    async def run_pool(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self.loop.run_in_executor(self._pool_executor, lambda: fn(*args))

    def submit_pool(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run `fn` in the pool executor without waiting for it."""
        self._pool_executor.submit(fn, *args)

    def log_message(self, text: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        try:
            self.server.window_log_message(lsp.LogMessageParams(kind, text))
        except Exception:  # noqa: BLE001 - no transport yet (CLI, tests)
            pass

    def show_message(self, text: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        try:
            self.server.window_show_message(lsp.ShowMessageParams(kind, text))
        except Exception:  # noqa: BLE001
            pass

    def report_feature_failure(self, feature: str, error: BaseException) -> None:
        self.log_message(f"soma: {feature} failed: {type(error).__name__}: {error}", lsp.MessageType.Error)

    def close(self) -> None:
        """Cancel what runs in the background; stop the executors (the server is going away)."""
        for task in list(self._tasks):
            task.cancel()
        self._query_executor.shutdown(wait=False, cancel_futures=True)
        self._pool_executor.shutdown(wait=False, cancel_futures=True)

    # -- workspace and documents -------------------------------------------------------------------

    def folders(self) -> list[str]:
        """Workspace folder paths (the root URI when the client sent no folders)."""
        try:
            workspace = self.server.workspace
        except RuntimeError:
            return []
        paths = [convert.uri_to_path(f.uri) for f in workspace.folders.values()]
        if not paths and workspace.root_uri:
            paths = [convert.uri_to_path(workspace.root_uri)]
        return [p for p in paths if p]

    async def snapshot_at(self, uri: str) -> Snapshot:
        """`snapshot()` with the document at `uri`: as the client has it, or, for a document not
        open, as it is on disk — read in the query executor, and only where `unopened` allows
        (else `Unavailable`, which a feature answers empty)."""
        snap = self.snapshot()
        document = self.open_document(uri)
        if document is not None:
            source, version, path = document.source, document.version, convert.uri_to_path(uri)
        else:
            roots = self.folders() + (self.pool.roots if self.pool is not None else [])
            path, source = await self.run_query(read_unopened, uri, roots)
            version = None
        relpath = convert.relative_to_folders(path, self.folders()) if path else None
        return dataclasses.replace(snap, document=Document(uri, path, relpath, source, version))

    def snapshot(self) -> Snapshot:
        """This request's world without a document: the index, settings and time."""
        return Snapshot(self.index, self.settings, self.now(), self.pool, None,
                        getattr(self.server.protocol, "client_capabilities", None), self.commit_ties,
                        self.partial)

    @property
    def partial(self) -> int | None:
        """Percent done of the first load while it fills the index requests read (a reload fills a
        fresh index while the previous one answers whole: not partial); None otherwise."""
        return self.loading if self.pool is None else None

    def open_uris(self) -> list[str]:
        """The open documents, spelled as the client spelled their URIs (pygls keys them unquoted)."""
        return list(self._opened.values())

    def open_document(self, uri: str):
        """The open document for this URI (None when it is not open)."""
        if unquote(uri) not in self._opened:
            return None
        try:
            return self.server.workspace.text_documents.get(unquote(uri))
        except RuntimeError:
            return None

    def open_sources(self) -> dict[str, str]:
        """Resolved path → text of every open `file:` document."""
        out = {}
        for uri in self.open_uris():
            document, path = self.open_document(uri), convert.uri_to_path(uri)
            if document is not None and path:
                out[convert.real(path)] = document.source
        return out

    def document_opened(self, uri: str) -> None:
        self._opened[unquote(uri)] = uri
        self.schedule_document(uri, 0.0)

    def document_changed(self, uri: str, changes: Sequence[lsp.TextDocumentContentChangeEvent]) -> None:
        self.edited.emit(uri, changes)
        self._last_change[uri] = time.monotonic()
        self.schedule_document(uri, DIAGNOSTIC_DEBOUNCE)

    def schedule_document(self, uri: str, delay: float, *, lenses: bool = True) -> None:
        """`settled` for a document after `delay` seconds of quiet; a later call supersedes
        (cancels) a pending one."""
        pending = self._doc_tasks.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._doc_tasks[uri] = self.spawn(self._settle(uri, delay, lenses))

    async def _settle(self, uri: str, delay: float, lenses: bool) -> None:
        try:
            if delay:
                await asyncio.sleep(delay)
            await self.settled.emit_async(uri, delay, lenses)
        finally:
            if self._doc_tasks.get(uri) is asyncio.current_task():
                del self._doc_tasks[uri]

    def refresh_documents(self) -> None:
        """The pool or the settings changed: every open document settles again, then `stale`."""
        for uri in self.open_uris():
            self.schedule_document(uri, 0.0, lenses=False)
        self.stale.emit()

    def document_closed(self, uri: str) -> None:
        self._opened.pop(unquote(uri), None)
        pending = self._doc_tasks.pop(uri, None)
        if pending is not None:
            pending.cancel()
        self._last_change.pop(uri, None)
        self.closed.emit(uri)

    def idle_for(self, uri: str) -> float:
        last = self._last_change.get(uri)
        return float("inf") if last is None else time.monotonic() - last

    # -- the index -------------------------------------------------------------------------------

    def swap(self, pool: LivePool, index: LiveIndex) -> None:
        """Make a loaded pool and its index the ones requests read; `index_swapped` when the index
        is a new one."""
        old, self.pool, self.index = self.index, pool, index
        if index is not old:
            self.index_swapped.emit(index)
