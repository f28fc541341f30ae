"""The server's own watcher over the pool roots (for clients that cannot watch, and pools outside the
workspace): `watchfiles` (Rust `notify`) in a background thread, debounced, feeding `LivePool.apply`."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from .. import foreground
from .discover import Roots
from .live import LivePool
from .loader import SUFFIXES

log = logging.getLogger(__name__)

#: How long after a burst is applied the server's background work still waits (`foreground`): the
#: open documents' warnings are refreshed from the event loop and the query threads meanwhile.
LINGER = 0.05


class PoolWatcher:
    """Watch a pool's roots and apply each debounced burst of changes.

    A burst ends when `step_ms` pass without an event (or `debounce_ms` after it began): watchfiles
    looks at what it gathered once a step, and ends a burst at the first step that adds nothing, so a
    record file written reaches the pool one to two steps after its last event. At 1 ms that is
    ≈ 2 ms of a pool change → warnings (at 3 ms it was ≈ 4–5 ms of the 9 at 100k records:
    docs/benchmarks.md § LSP); the watcher then wakes ~1000 times a second for a few microseconds
    (an idle server: ≈ 1.7% of a core, against 0.5% at 3 ms), which the hovers do not measurably
    feel.

    `start()` returns once the watch is armed (events after it are seen); `stop()` stops and joins the
    thread (within about `step_ms`). Roots that do not exist yet are checked for every `rescan_ms`; when
    one appears, it is loaded and watched. Errors in `apply` are logged (or passed to `on_error`) and the
    watcher keeps going.
    """

    def __init__(self, pool: LivePool, *, debounce_ms: int = 50, step_ms: int = 1, rescan_ms: int = 1000,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        self.pool = pool
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.rescan_ms = rescan_ms
        self.on_error = on_error
        self._roots = Roots(pool.roots)
        self._stop = threading.Event()
        self._armed = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> "PoolWatcher":
        if self.running:
            return self
        self._stop.clear()
        self._armed.clear()
        self._thread = threading.Thread(target=self._run, name="soma-pool-watcher", daemon=True)
        self._thread.start()
        self._armed.wait(timeout)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> "PoolWatcher":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _filter(self, path: str) -> bool:
        if not self._roots.is_visible(path):
            return False
        suffix = os.path.splitext(path)[1].lower()
        return suffix in SUFFIXES or not os.path.isfile(path)  # directories (and what is gone) count

    def _run(self) -> None:
        previous: list[str] | None = None
        try:
            while not self._stop.is_set():
                present = [root for root in self._roots.paths if os.path.isdir(root)]
                appeared = [] if previous is None else [r for r in present if r not in previous]
                previous = present
                if not present:
                    self._armed.set()
                    if self._stop.wait(self.rescan_ms / 1000):
                        return
                    continue
                try:
                    self._watch(present, appeared)
                except Exception as error:  # noqa: BLE001 - keep watching
                    self._report(error)
                    if self._stop.wait(self.rescan_ms / 1000):
                        return
        finally:
            self._armed.set()

    def _watch(self, present: list[str], appeared: list[str]) -> None:
        """One armed watch over the roots that exist (watchfiles' documented Rust backend, so that
        `start()` can return once the watch is really in place). Returns to re-arm when a missing root
        appears or a watched one disappears."""
        from watchfiles.main import RustNotify  # documented: watchfiles' Rust backend (imported here: of
        # the processes that load a pool, only a watching server needs it)

        missing = len(present) < len(self._roots.paths)
        with RustNotify(present, False, False, 300, True, True) as notify:
            self._armed.set()
            if appeared:  # roots created since the last watch: load what they already hold
                self._apply(set(appeared))
            while True:
                raw = notify.watch(self.debounce_ms, self.step_ms, self.rescan_ms if missing else 0, self._stop)
                if raw in ("stop", "signal"):
                    self._stop.set()
                    return
                if raw != "timeout":
                    paths = {path for _, path in raw if self._filter(path)}
                    if paths:
                        self._apply(paths)
                    if not all(os.path.isdir(root) for root in present):
                        return
                if missing and any(os.path.isdir(r) for r in self._roots.paths if r not in present):
                    return

    def _apply(self, paths: set[str]) -> None:
        """Apply a burst: work a user waits for (the warnings it changes), so the server's background
        work steps aside meanwhile and until the warnings are refreshed (`foreground`, `LINGER`)."""
        try:
            with foreground.answering(linger=LINGER):
                self.pool.apply(paths)
        except Exception as error:  # noqa: BLE001
            self._report(error)

    def _report(self, error: BaseException) -> None:
        if self.on_error is not None:
            self.on_error(error)
        else:
            log.exception("pool watcher: %s", error, exc_info=error)
