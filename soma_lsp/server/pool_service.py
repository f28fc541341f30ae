"""The experiment pool behind the session: settings, loading and reloading, watching, status.

* Settings come from `initializationOptions`, then `workspace/configuration` (when the client has
  it), else what `didChangeConfiguration` carried; invalid values are reported once and replaced.
* The first load fills the index queries already use, so results appear as batches of files land
  (and a big `.jsonl` file in parts, `pool.parts`); until it ends, answers say they are partial
  (`Session.partial`), and the status carries the load's `percentage`.
  A reload (the command, or new pool roots) loads into a *fresh* index while the previous one keeps
  answering — no query waits behind a big update — and swaps it in when done
  (`Session.swap` → the `index_swapped` hook).
* Watching: the client's watcher (`client/registerCapability` for `workspace/didChangeWatchedFiles`)
  when it supports dynamic registration and every pool root is inside the workspace; otherwise the
  server's own `PoolWatcher`. Watching starts before the load; changes seen during it are applied
  after it. Trackers in the pool (MLflow, W&B: docs/spec.md §1.6) are followed by their own
  `TrackerFollower` once loaded — folder events, SQLite change checks, a tracking server polled every
  `pollSeconds`.
* Status: `soma/poolStatus` notifications (and the `soma.poolStatus` command's answer), work-done
  progress while loading (`progress`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from lsprotocol import types as lsp

from .. import foreground
from ..pool import LivePool, PoolChange, PoolWatcher, pool_roots
from ..pool.snapshot import cache_directory
from ..pool.trackers.follow import TrackerFollower
from ..query import build_query, definitions
from ..retrieval import LiveIndex, RetrievalQuery
from . import convert, related, settings as settings_module
from .progress import IndexingProgress
from .session import Session, to_the_minute
from .settings import Settings
from .timing import POOL_REFRESH_DELAY

log = logging.getLogger("soma_lsp.server")

POOL_STATUS = "soma/poolStatus"
#: After a load, the snapshot is written once no request has come for this many seconds …
SNAPSHOT_IDLE = 1.0
#: … or this long after the load at the latest (a stream of requests does not put it off for ever).
SNAPSHOT_WAIT = 30.0
WATCH_GLOB = "**/*.{json,jsonl,yaml,yml}"


class PoolService:
    """Loads, reloads and watches the session's pool (module docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.roots: list[str] = []
        self.watcher: PoolWatcher | None = None
        self.follower: TrackerFollower | None = None
        self._pending_pool: LivePool | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._refresh_pending = False
        self._last_refresh = float("-inf")  # (the event loop's clock)
        self._settings_problems: tuple[str, ...] = ()
        self._tokens = itertools.count(1)
        self._watch_registration: str | None = None

    # -- settings ---------------------------------------------------------------------------------

    def initialize(self, options: Any) -> None:
        """`initialize`: the client's options give the first settings (problems are reported once,
        when `load_settings` runs at `initialized`)."""
        self.session.init_options = options
        self.session.settings, _ = settings_module.parse(options)

    async def load_settings(self, changed: Any = None) -> None:
        """Settings from initializationOptions, then `workspace/configuration` (when the client has
        it), else what didChangeConfiguration carried. Reports invalid values; applies the result."""
        session = self.session
        sources: list[Any] = [session.init_options]
        if session.capability("workspace.configuration", False):
            try:
                answer = await asyncio.wait_for(session.server.workspace_configuration_async(
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
                session.log_message(f"soma: {problem}", lsp.MessageType.Warning)
            session.show_message("soma: invalid settings, defaults used for: " + "; ".join(problems))
        self._settings_problems = tuple(problems)
        old, session.settings = session.settings, new
        log.info("settings: %s", new.to_json())
        if session.pool is not None:
            if self._roots_for(new) != self.roots:
                await self.start()
            elif old != new:
                session.refresh_documents()

    def _roots_for(self, settings: Settings) -> list[str]:
        return [str(r) for r in pool_roots(self.session.folders(), settings.pool, os.environ)]

    # -- loading -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """(Re)create the pool for the current roots and load it off the loop (module docstring)."""
        session = self.session
        roots = self._roots_for(session.settings)
        first = session.pool is None
        index = session.index if first else LiveIndex()
        pool = LivePool(roots, index, cache_dir=cache_directory(os.environ) if session.settings.snapshot else None,
                        cache_limits=session.settings.cache_limits)
        log.info("pool roots: %s", ", ".join(roots))
        if first:
            self.roots = roots
        previous_watcher, self.watcher = self.watcher, None
        self._pending_pool = pool
        if first:  # requests read this pool's index as it fills: status and documents follow each batch
            self._follow(pool)
        try:  # until the swap the pending pool is what status answers from (a tracker follower's
            # start takes a while: before, a status asked then read "0 experiments, not indexing")
            await self._watch(pool)
            await self._load(pool)
            if previous_watcher is not None:
                session.submit_pool(previous_watcher.stop)
            previous_follower, self.follower = self.follower, None
            if previous_follower is not None:
                session.submit_pool(previous_follower.stop)
            if pool.trackers:
                follower = TrackerFollower(pool, poll_seconds=session.settings.poll_seconds)
                await session.run_pool(follower.start)
                self.follower = follower
            self.roots = roots
            session.swap(pool, index)
        finally:
            self._pending_pool = None
        if not first:
            self._follow(pool)
        self.pool_changed(None)
        if pool.unsaved:  # read files the snapshot did not have: save it, off the loop, after the swap
            session.spawn(self._save_when_idle(pool))

    async def _save_when_idle(self, pool: LivePool) -> None:
        """`settle_after_load` once requests have left the server alone for `SNAPSHOT_IDLE` seconds (or
        after `SNAPSHOT_WAIT` in all). The snapshot's first step copies the pool's state whole, in Python, under the
        index's lock (at 1M records ≈ 0.4 s of CPU, not divisible into steps that could stand aside),
        and the first hovers come right after a load: begun at once, it was what the first hover after
        a 1M load waited for, 70–430 ms (docs/benchmarks.md § 1M)."""
        loop = self.session.loop
        deadline = loop.time() + SNAPSHOT_WAIT
        while (wait := SNAPSHOT_IDLE - foreground.idle()) > 0 and loop.time() < deadline:
            await asyncio.sleep(min(wait, max(0.0, deadline - loop.time())))
        self.session.submit_pool(self.settle_after_load, pool)

    def settle_after_load(self, pool: LivePool) -> None:
        """What the load left for after its result: the big `.jsonl` files' line digests (which a
        change to one of them needs, snapshot or not: `LivePool.settle_lines`), then the snapshot."""
        try:
            pool.settle_lines()
        except Exception:  # noqa: BLE001 - a re-read settles what is left itself
            log.exception("taking the lines' digests failed")
        self.save_snapshot(pool)

    def save_snapshot(self, pool: LivePool | None = None) -> None:
        """Write the pool's snapshot if it changed since it was restored or saved (never raises)."""
        pool = pool or self.session.pool
        if pool is None or not pool.unsaved:
            return
        started = time.perf_counter()
        try:
            if pool.save_snapshot():
                log.info("pool snapshot saved in %.2fs: %s", time.perf_counter() - started, pool.snapshot_path)
        except Exception:  # noqa: BLE001 - a snapshot is an optimisation; failing to write one is not fatal
            log.exception("saving the pool snapshot failed")

    async def _load(self, pool: LivePool) -> None:
        session = self.session
        progress = IndexingProgress(session, pool.__len__)
        await progress.begin()
        session.indexing = True
        self.send_status(pool)
        started = time.perf_counter()
        try:
            await session.run_pool(pool.load, progress.threadsafe_report)
            await session.run_pool(self._warm, pool.index, session.open_sources())
        except Exception as error:  # noqa: BLE001 - a pool that fails to load leaves the server up
            log.exception("loading the pool failed")
            session.show_message(f"soma: loading the experiment pool failed: {error}", lsp.MessageType.Error)
        finally:
            session.loading = None
            session.indexing = False
            session.loaded.set()
            summary = pool.summary()
            text = f"{summary['records']} experiments from {summary['files']} files"
            if summary["errors"]:
                text += f", {summary['errors']} problems"
            await progress.end(text)
        log.info("pool loaded in %.2fs: %s", time.perf_counter() - started, text)
        session.log_message(f"soma: {text} ({', '.join(pool.roots)})")
        self.send_status(pool)

    def _warm(self, index: LiveIndex, sources: dict[str, str]) -> None:
        """The index's once-per-layout work for a hover's two shapes — in a file whose scope builds
        components and in one that does not — and for the words of the hovers of the definitions of
        the open documents (`sources`, path → text; the last opened first), made before the load is
        said to be over, not by the first hovers after it (`LiveIndex.warm`; never raises: the first
        query makes it otherwise)."""
        settings = self.session.settings
        now = to_the_minute(self.session.now())
        shapes = [RetrievalQuery(text="warm", architecture=bag, now=now, half_life_days=settings.half_life_days,
                                 weights=settings.weights) for bag in (("warm",), None)]
        try:
            index.warm(shapes, [self._hover_text(index, source, path, d.name_range[0])
                                for path, source in reversed(sources.items()) for d in definitions(source, path)])
        except Exception:  # noqa: BLE001 - an optimisation
            log.exception("warming the index failed")

    def _hover_text(self, index: LiveIndex, source: str, path: str, position: tuple[int, int]) -> str:
        """The words a hover at this position ranks with (`related.ranked_query`)."""
        levers = self.session.settings.levers
        built = build_query(source, path, position=position, scope="hover", levers=levers)
        return related.ranked_query(index, RetrievalQuery(text=built.ask), built.hints, levers).text

    def _follow(self, pool: LivePool) -> None:
        """`pool_changed` after each of this pool's batches (and no longer after the previous pool's)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = pool.subscribe(self._pool_changed_threadsafe)

    def _pool_changed_threadsafe(self, change: PoolChange) -> None:
        loop = self.session.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.pool_changed, change)

    def pool_changed(self, change: PoolChange | None) -> None:
        """After every applied batch: status to the client, then open documents refreshed — at once
        for the first change of a burst (a run's record landing shows in its warnings within
        milliseconds), then at most once per `POOL_REFRESH_DELAY` while the burst lasts (a sweep's
        records landing by the hundred refresh a few times, not once per file)."""
        if self._refresh_pending:
            return
        wait = self._last_refresh + POOL_REFRESH_DELAY - self.session.loop.time()
        if wait <= 0:
            self._refresh()
            return
        self._refresh_pending = True

        async def later() -> None:
            await asyncio.sleep(wait)
            self._refresh_pending = False
            self._refresh()

        self.session.spawn(later())

    def _refresh(self) -> None:
        """Open documents first (their warnings are computed off the loop), the status while they are."""
        loop = self.session.loop
        self._last_refresh = loop.time()
        self.session.refresh_documents()
        loop.call_soon(self.send_status)

    async def apply_paths(self, paths: Iterable[str]) -> None:
        """Changed paths reported by the client's watcher: into the pool (and one being loaded)."""
        paths = [p for p in paths if p]
        for pool in {id(p): p for p in (self.session.pool, self._pending_pool) if p is not None}.values():
            if paths:
                await asyncio.get_running_loop().run_in_executor(None, pool.apply, paths)

    # -- status ------------------------------------------------------------------------------------

    def status(self, pool: LivePool | None = None) -> dict[str, Any]:
        session = self.session
        pool = pool or session.pool or self._pending_pool  # (the first load's pool: what answers)
        percentage = (session.loading or 0) if session.indexing else None  # (0: the load has not begun)
        if pool is None:
            return {"version": 0, "pools": list(self.roots), "records": 0, "files": 0, "errors": 0,
                    "indexing": session.indexing, "percentage": percentage, "restored": 0}
        summary = pool.summary()
        return {"version": pool.version, "pools": pool.sources, "records": summary["records"],
                "files": summary["files"], "errors": summary["errors"], "indexing": session.indexing,
                "percentage": percentage, "restored": pool.restored}

    def send_status(self, pool: LivePool | None = None) -> None:
        try:
            self.session.server.protocol.notify(POOL_STATUS, self.status(pool))
        except Exception:  # noqa: BLE001
            log.exception("could not send %s", POOL_STATUS)

    # -- watching ----------------------------------------------------------------------------------

    def _all_roots_in_workspace(self, roots: list[str]) -> bool:
        folders = [convert.real(f) for f in self.session.folders()]
        return bool(folders) and all(any(convert.inside(convert.real(r), f) for f in folders) for r in roots)

    async def _watch(self, pool: LivePool) -> None:
        """The client's watcher (dynamic registration) when it has one and every root is in the
        workspace; else the server's own."""
        dynamic = self.session.capability("workspace.did_change_watched_files.dynamic_registration", False)
        if dynamic and self._all_roots_in_workspace(pool.roots):
            if await self._register_watchers(pool.roots):
                return
        watcher = PoolWatcher(pool, on_error=lambda e: log.warning("pool watcher: %s", e))
        await self.session.run_pool(watcher.start)
        self.watcher = watcher
        log.info("watching the pool with the server's own watcher")

    async def _register_watchers(self, roots: list[str]) -> bool:
        relative = self.session.capability("workspace.did_change_watched_files.relative_pattern_support", False)
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
            await asyncio.wait_for(self.session.server.client_register_capability_async(lsp.RegistrationParams([
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
            await asyncio.wait_for(self.session.server.client_unregister_capability_async(lsp.UnregistrationParams([
                lsp.Unregistration(registration, lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)])), 10)
        except Exception as error:  # noqa: BLE001
            log.warning("client/unregisterCapability failed: %s", error)

    def shut_down(self) -> None:
        """`shutdown`: stop the server's own watcher and the tracker follower (off the loop) and save
        what changed since the last snapshot (usually a few records: quick)."""
        for stopping in self._followers():
            self.session.submit_pool(stopping.stop)
        self.save_snapshot()

    def close(self) -> None:
        """The server is going away: stop the watcher and the follower now (briefly waiting)."""
        for stopping in self._followers():
            try:
                stopping.stop(timeout=1.0)
            except Exception:  # noqa: BLE001
                pass

    def _followers(self) -> list:
        """The watcher and the tracker follower, detached from the service."""
        found = [f for f in (self.watcher, self.follower) if f is not None]
        self.watcher = self.follower = None
        return found
