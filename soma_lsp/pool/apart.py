"""Work apart: a child process of this package on a spare core, its answer read back as it comes.

A first load has work that does not need this process's objects — counting a big `.jsonl` file's
documents (`pool.counting`), reading and validating a share of an MLflow SQLite store's runs
(`trackers.mlflow_sqlite_apart`) — and on 2 cores a second process does it meanwhile. `Child` runs
`module.main()` under the same interpreter and package (its folder first on `PYTHONPATH`), writing into
two unnamed temporary files rather than pipes: a pipe would hold the child until this process reads, and
then pass tens of MB 64 KB at a time (0.1–0.3 s, measured). `read(at, size)` waits for the bytes at
`at` of its output, reading them with `pread` (the child writes through the same open file at its own
offset).

A child is never needed: every user does the work here when `read` gives None (the child failed — its
last words are logged —, or took over `WAIT_SECONDS`) or what it wrote is malformed.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

WAIT_SECONDS = 120  # a child this late is stopped and its work done here
POLL_SECONDS = 0.002  # how often bytes not written yet are looked for
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def idle_cores(spare: int) -> int:
    """Of `spare` cores (`read_ahead.spare_cores`), those other work left idle over the last minute
    (`os.getloadavg`, which counts this process too). A child on a core that is busy anyway does not
    help: the kernel shares the cores between sessions, not processes (autogroup), so this process and
    its child split one session's share, and the child's own cost (its start, sending its work back)
    comes on top — measured: ≈ 30% more CPU for a first load, and no faster, at a load average of 3 on
    2 cores (docs/benchmarks.md § Trackers)."""
    try:
        busy = os.getloadavg()[0]
    except OSError:  # (no load average on this platform)
        return spare
    return max(0, min(spare, round(spare + 1 - busy)))


class Child:
    """`python -c "from MODULE import main; main()" ARGS…`, started at once; `what` names its work in
    the log ("counting /data/runs.jsonl")."""

    def __init__(self, module: str, args: list[str], what: str) -> None:
        self.what = what
        self._failure_logged = False
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_PARENT, environment.get("PYTHONPATH")]))
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        try:
            self._process = subprocess.Popen([sys.executable, "-c", f"from {module} import main; main()", *args],
                                             stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                             env=environment)
        except OSError:
            self._out.close()
            self._err.close()
            raise

    @property
    def closed(self) -> bool:
        return self._out.closed

    def read(self, at: int, size: int, wait: bool = True) -> bytes | None:
        """The `size` bytes at `at` of the child's output once it has written them; None when it failed
        or took too long (logged), or — `wait` False — when they are not all written yet. ValueError
        when it ended without writing them."""
        fd = self._out.fileno()
        deadline = time.monotonic() + WAIT_SECONDS
        while os.fstat(fd).st_size < at + size:
            if not wait:
                return None
            code = self._process.poll()
            if code is not None and os.fstat(fd).st_size < at + size:
                if code:
                    self._log_failure(code)
                    return None
                raise ValueError(f"{self.what} apart: its output cut short")
            if time.monotonic() > deadline:
                log.warning("%s apart took over %d s; done here", self.what, WAIT_SECONDS)
                return None
            time.sleep(POLL_SECONDS)
        return os.pread(fd, size, at)

    def _log_failure(self, code: int) -> None:
        """Its last words, logged once."""
        if self._failure_logged:
            return
        self._failure_logged = True
        self._err.seek(max(0, os.fstat(self._err.fileno()).st_size - 2000))  # its last words
        log.warning("%s apart failed (exit %s): %s", self.what, code, self._err.read().decode(errors="replace").strip())

    def close(self) -> None:
        """Stop the child if it still runs (its work is not wanted, or came too late); drop its files.
        A child that had failed meanwhile is logged (its last words) if nobody waited for it."""
        if self._out.closed:
            return
        code = self._process.poll()
        if code is None:
            self._process.kill()
            self._process.wait()
        elif code:
            self._log_failure(code)
        self._out.close()
        self._err.close()
