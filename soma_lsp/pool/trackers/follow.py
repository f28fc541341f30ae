"""Keeping a pool's tracker sources live: one daemon thread per source, each calling
`LivePool.sync_tracker` when its store may have changed.

* A folder (`mlruns/`, `wandb/`): watchfiles' Rust backend over it; each debounced burst of events
  names the run folders to stat-scan (`hint`), not the whole store. A source with `rescan_seconds`
  (W&B: 60) is also scanned whole that often, for what no event tells (a run whose log went still).
* SQLite: every `sqlite_seconds` the cheap `changed()` check (the database and WAL files' stat,
  `PRAGMA data_version`); a change means a quick sync (the runs new or still open: `SqliteStore.scan`),
  then — at most every `sqlite_full_seconds` — a full one (tag, note, metric edits; renames, deletions).
* A tracking server: every `poll_seconds` a poll (three small requests: anything new?), and every
  `full_every`-th time — or after a failure — a full scan that catches edits and deletions.

Failures are the pool's business (`sync_tracker` keeps the last good records and reports once); a
follower only keeps going. `stop()` ends every thread within about one step.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from .source import TrackerSource

log = logging.getLogger(__name__)


class TrackerFollower:
    """Follow every tracker of `pool` (a `LivePool`); `start()` returns once folder watches are armed."""

    def __init__(self, pool, *, poll_seconds: float = 10.0, full_every: int = 6, sqlite_seconds: float = 0.5,
                 sqlite_full_seconds: float = 5.0, debounce_ms: int = 50, step_ms: int = 50) -> None:
        self.pool = pool
        self.poll_seconds = poll_seconds
        self.full_every = full_every
        self.sqlite_seconds = sqlite_seconds
        self.sqlite_full_seconds = sqlite_full_seconds
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, timeout: float = 10.0) -> "TrackerFollower":
        self._stop.clear()
        armed = []
        for source in self.pool.trackers:
            ready = threading.Event()
            target = {"watch": self._watch, "poll": self._poll_sqlite, "server": self._poll_server}[source.follow]
            thread = threading.Thread(target=self._guard, args=(target, source, ready), daemon=True,
                                      name=f"soma-tracker-{source.kind}")
            thread.start()
            self._threads.append(thread)
            armed.append(ready)
        for ready in armed:
            ready.wait(timeout)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        threads, self._threads = self._threads, []
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def __enter__(self) -> "TrackerFollower":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _guard(self, target: Callable, source: TrackerSource, ready: threading.Event) -> None:
        try:
            while not self._stop.is_set():
                try:
                    target(source, ready)
                    return
                except Exception:  # noqa: BLE001 - a follower keeps following
                    log.exception("following %s failed; retrying", source)
                    ready.set()
                    self._stop.wait(1.0)
        finally:
            ready.set()

    def _watch(self, source: TrackerSource, ready: threading.Event) -> None:
        from watchfiles.main import RustNotify  # (only a following process needs it)

        path = source.path
        while not self._stop.is_set():
            if not os.path.isdir(path):  # gone (or not there yet): wait for it, then scan it whole
                ready.set()
                if self._stop.wait(1.0):
                    return
                if os.path.isdir(path):
                    self.pool.sync_tracker(source)
                continue
            rescan = source.rescan_seconds
            with RustNotify([path], False, False, 300, True, True) as notify:
                ready.set()
                last_full = time.monotonic()
                while os.path.isdir(path):
                    wait_ms = 0 if rescan is None else max(1, int((last_full + rescan - time.monotonic()) * 1000))
                    raw = notify.watch(self.debounce_ms, self.step_ms, wait_ms, self._stop)
                    if raw in ("stop", "signal") or self._stop.is_set():
                        return
                    if raw != "timeout":
                        self.pool.sync_tracker(source, {changed for _, changed in raw})
                    if rescan is not None and time.monotonic() - last_full >= rescan:
                        self.pool.sync_tracker(source)  # what no event tells: a run gone still (crashed)
                        last_full = time.monotonic()
            self.pool.sync_tracker(source)  # the folder went away: its runs go too

    def _poll_sqlite(self, source, ready: threading.Event) -> None:
        ready.set()
        failing, pending, last_full = None, False, time.monotonic()
        while not self._stop.wait(self.sqlite_seconds):
            if failing or source.changed():
                failing = self.pool.sync_tracker(source, "runs")  # new and ended runs: at once
                pending = True
            if pending and not failing and time.monotonic() - last_full >= self.sqlite_full_seconds:
                failing = self.pool.sync_tracker(source)  # tag, note, metric edits; renames, deletions
                pending, last_full = bool(failing), time.monotonic()

    def _poll_server(self, source, ready: threading.Event) -> None:
        ready.set()
        polls, failing = 0, None
        while not self._stop.wait(self.poll_seconds):
            polls += 1
            full = failing or polls % self.full_every == 0
            failing = self.pool.sync_tracker(source, None if full else "poll")
