"""Requests first: the server's background work steps aside while a request is being answered.

(A module of its own below every layer: the pool's watcher marks a pool change as awaited too.)

Python runs one thread at a time (the GIL). A background thread that reads the whole pool — the
commit ties' runs, the levers' evidence table — takes turns at the interpreter with a hover's thread
(`sys.getswitchinterval`), so a hover takes several times as long while it runs: right after every
load, and on every pool change before they followed the index (measured at 100k records: new-scope
hovers p50 4 → 57 ms, docs/benchmarks.md § LSP). So the work a user waits for marks itself
(`answering`, around every feature's computation, `Session.run_query`, and a watched pool change
being applied, `PoolWatcher`; `arrived` as a request comes in), and background loops call
`pause()` every `STEP` items (a step must stay short: once begun it shares the interpreter with the
request, halving its speed): it returns at once when no request is being answered, else once
none has been for `QUIET` seconds (the answer is still being written out by the event loop then),
and never waits longer than `MAX_WAIT` in one call, so a stream of requests slows the background
work down without stopping it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

#: How long after the last request ended background work stays paused (the answer's encoding and
#: writing, and the next request of a burst, e.g. a mouse moving over a function, arriving).
QUIET = 0.01
#: The longest one `pause()` waits: background work always moves on.
MAX_WAIT = 0.5
#: Records a background loop handles between two `pause()` calls (≈ 0.2 ms of the evidence table's
#: build; a call that finds nothing to wait for costs a fraction of a microsecond). At 32 (≈ 1.5 ms,
#: far more on a loaded machine) a pool change arriving while the table of 100k records was built
#: waited for the step in progress: its warnings up to 145 ms late, 17–44 ms at 4 (docs/benchmarks.md § LSP).
STEP = 4

_changed = threading.Condition()
_answering = 0
_last_end = 0.0
_mine = threading.local()  # `answering` in this thread (a request's own work never waits for itself)


@contextlib.contextmanager
def answering(linger: float = 0.0) -> Iterator[None]:
    """Mark the calling thread's work as a request's (background work pauses meanwhile, and for
    `linger` seconds more than `QUIET` after it: the work it starts elsewhere — a pool change's
    refreshed warnings — goes first too)."""
    global _answering, _last_end
    with _changed:
        _answering += 1
    _mine.answering = True
    try:
        yield
    finally:
        _mine.answering = False
        with _changed:
            _answering -= 1
            _last_end = max(_last_end, time.monotonic() + linger)
            _changed.notify_all()


def arrived() -> None:
    """A request came in (the event loop's thread, as it dispatches it): background work steps aside
    from now — for `QUIET` seconds, and on while its work is `answering` — so that what the loop does
    before that part begins (decoding the request, the document's snapshot) does not share the
    interpreter with it (the evidence table's build ran through every hover after a 1M restart,
    docs/benchmarks.md § 1M). A mark in time, not a count: a request never answered holds nothing."""
    global _last_end
    with _changed:
        _last_end = max(_last_end, time.monotonic())


def idle() -> float:
    """Seconds since a request last arrived or was answered (0 while one is being answered): how long
    the user has left the server alone, for background work that should not start under a request at
    all (`PoolService`'s snapshot after a load: its first step copies the pool's state at once)."""
    with _changed:
        return 0.0 if _answering else max(0.0, time.monotonic() - _last_end)


def pause() -> None:
    """Let requests go first: return when none is being answered (module docstring); at once in a
    request's own thread."""
    if getattr(_mine, "answering", False) or (not _answering and time.monotonic() - _last_end >= QUIET):
        return
    deadline = time.monotonic() + MAX_WAIT
    with _changed:
        while True:
            now = time.monotonic()
            quiet_in = QUIET - (now - _last_end)
            if (not _answering and quiet_in <= 0) or now >= deadline:
                return
            _changed.wait(min(deadline - now, quiet_in if not _answering else deadline - now))
