"""Many small pool files read ahead by a second process while this one decodes and indexes them.

A first load of a pool of 100k single-record files spent a quarter of its time opening, `fstat`ing and
reading them (1.9 s of the kernel's time and the Python around each call, on a 7.5 s load, 2 cores),
the part its baseline spends too but that needs no Python object of ours. With a core to spare,
`ReadAhead(paths, …)` has a child open and read the files in the loader's order — exactly as
`loader.open_regular` and `read_bounded` do: non-blocking, regular files only, bounded by the format's
limit — and append each one's stamp and bytes to an unnamed temporary file, which `take(path)` reads
back in big chunks (`pread`) instead of opening the file here.

Never wrong and never waiting: `take` gives only what the child read of exactly that file, complete
(its size as `fstat` said, racy or not as the loader decides it); anything else — a file the child has
not reached yet, one it could not or would not read (an error, not a regular file, over the limit,
grown while read), a child that failed or sent a malformed entry — is read by the loader itself as
without it, with the same problems, and the child's entry for it, if it comes, is skipped.

The child runs this very file as a script (`python -I -S`): the standard library only, nothing of the
package, no `site` — it starts in ≈ 15 ms and reads 100k files while the loader decodes its first
thousands.
"""

from __future__ import annotations

import logging
import os
import stat
import struct
import subprocess
import sys
import tempfile
import time

log = logging.getLogger(__name__)

AHEAD_FILES = 1000  # fewer files than this are read here: the child would not pay for its start
CHUNK_BYTES = 1 << 20  # read back from the child's output this much at a time
LOOKAHEAD = 64  # how far past the last path asked for the next one is looked for
FLUSH_BYTES = 256 << 10  # the child writes its entries out in runs of this size
ID_BITS = (1 << 64) - 1  # `loader.ID_BITS`, written again: the child runs this file without the package
_ENTRY = struct.Struct("<IBQqqQQQ")  # ordinal, state, size, mtime_ns, ctime_ns, inode, device, bytes that follow
READ, RACY, UNREAD = 0, 1, 2  # states: read (and stamped), read but modified too recently to stamp, not read


class ReadAhead:
    """One child reading `paths` (in this order) ahead of the loader."""

    def __init__(self, paths: list[str], limits: list[int], racy_ns: int) -> None:
        """`limits[i]`: the most bytes `paths[i]` may hold to be read (its format's limit);
        `racy_ns`: a file modified less than this before it is read gets no stamp (`FileLoad.stamp`)."""
        from .loader import STAMP  # (not at the top: the child runs this file without the package)
        self._stamp = STAMP.pack
        self._paths, self._limits = paths, limits
        self._next = 0  # where the next path asked for is looked for in `paths` (asked in that order)
        self._buffer, self._pos, self._at = b"", 0, 0
        self._failed = False
        with tempfile.TemporaryFile() as listing:
            listing.write(b"\0".join(os.fsencode(p) + b"\0" + str(n).encode() for p, n in zip(paths, limits)))
            listing.seek(0)
            self._out = tempfile.TemporaryFile()
            try:
                self._child = subprocess.Popen([sys.executable, "-I", "-S", __file__, str(racy_ns)],
                                               stdin=listing, stdout=self._out, stderr=subprocess.DEVNULL)
            except OSError:
                self._out.close()
                raise

    def take(self, path: str) -> tuple[int, bytes | None, bytes] | None:
        """What the child read of `path` — (size, stamp or None when racy, bytes) — or None when the
        loader must read it itself."""
        wanted = self._ordinal(path)
        if wanted is None or self._failed:
            return None
        try:
            while True:
                entry = self._peek()
                if entry is None:  # the child is behind: read here, its entry skipped when it comes
                    return None
                ordinal, state, size, mtime, ctime, inode, device, length = entry
                if ordinal > wanted:
                    return None
                start = self._pos + _ENTRY.size
                self._pos = start + length
                if ordinal == wanted:
                    if state == UNREAD:
                        return None
                    stamp = self._stamp(size, mtime, ctime, inode, device) if state == READ else None
                    return size, stamp, self._buffer[start:start + length]
        except ValueError as error:
            log.warning("reading ahead failed (%s); the pool's files are read here", error)
            self._failed = True
            self.close()
            return None

    def _ordinal(self, path: str) -> int | None:
        """Where `path` is in `paths`, looked for among the next `LOOKAHEAD` after the last one asked
        for (the loader asks for them in order): no 100k-entry dict (≈ 10 MB) for a lookup that is one
        comparison, and never a scan of all of them."""
        try:
            at = self._paths.index(path, self._next, self._next + LOOKAHEAD)
        except ValueError:
            return None
        self._next = at + 1
        return at

    def _peek(self) -> tuple | None:
        """The next whole entry (its header; its bytes follow it in the buffer), or None when the child
        has not written all of it yet."""
        need = _ENTRY.size
        while True:
            available = len(self._buffer) - self._pos
            if available >= _ENTRY.size:
                entry = _ENTRY.unpack_from(self._buffer, self._pos)
                ordinal, state, size, *_, length = entry
                if ordinal >= len(self._limits) or state not in (READ, RACY, UNREAD) \
                        or length != (0 if state == UNREAD else size) or length > self._limits[ordinal]:
                    raise ValueError(f"a malformed entry {entry!r}")
                need = _ENTRY.size + length
                if available >= need:
                    return entry
            if self._out.closed:
                return None
            more = os.pread(self._out.fileno(), max(CHUNK_BYTES, need - available), self._at)
            if not more:
                return None
            self._at += len(more)
            self._buffer, self._pos = self._buffer[self._pos:] + more, 0

    def close(self) -> None:
        """Stop the child if it still runs (a failure of its own is logged); drop its output."""
        code = self._child.poll()
        if code is None:
            self._child.kill()
            self._child.wait()
        elif code and not self._out.closed:
            log.warning("reading ahead ended with exit status %s; the files it did not read were read here", code)
        self._out.close()


def start(paths: list[str], limits: list[int], racy_ns: int) -> ReadAhead | None:
    """A child reading `paths` ahead when they are many and a core is spare, else None."""
    if len(paths) < AHEAD_FILES or spare_cores() < 1:
        return None
    try:
        return ReadAhead(paths, limits, racy_ns)
    except OSError as error:
        log.warning("could not start reading the pool's files ahead: %r", error)
        return None


def spare_cores() -> int:
    """The cores this process may run on, less the one it runs on: what a child working apart takes."""
    return (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 1


# -- the child ------------------------------------------------------------------------------------

def main() -> None:
    """The child: `python -I -S read_ahead.py RACY_NS`, stdin the paths and their limits
    (`path\\0limit\\0…`), stdout an entry per path, in order."""
    racy_ns = int(sys.argv[1])
    fields = sys.stdin.buffer.read().split(b"\0")
    pending = bytearray()
    for ordinal in range(len(fields) // 2):
        pending += _entry(ordinal, fields[2 * ordinal], int(fields[2 * ordinal + 1]), racy_ns)
        if len(pending) >= FLUSH_BYTES:
            _write(pending)
    _write(pending)


def _entry(ordinal: int, path: bytes, limit: int, racy_ns: int) -> bytes:
    """One file's entry: its stamp and bytes, or UNREAD (whatever went wrong, the loader reads it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return _ENTRY.pack(ordinal, UNREAD, 0, 0, 0, 0, 0, 0)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return _ENTRY.pack(ordinal, UNREAD, 0, 0, 0, 0, 0, 0)
        pieces, got = [], 0
        while got <= status.st_size:  # to the end, one byte past the size at most: a file that grew
            piece = os.read(fd, status.st_size + 1 - got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        if got != status.st_size:
            return _ENTRY.pack(ordinal, UNREAD, 0, 0, 0, 0, 0, 0)
        racy = time.time_ns() - max(status.st_mtime_ns, status.st_ctime_ns) < racy_ns
        return _ENTRY.pack(ordinal, RACY if racy else READ, status.st_size, status.st_mtime_ns, status.st_ctime_ns,
                           status.st_ino & ID_BITS, status.st_dev & ID_BITS, got) + b"".join(pieces)
    except OSError:
        return _ENTRY.pack(ordinal, UNREAD, 0, 0, 0, 0, 0, 0)
    finally:
        os.close(fd)


def _write(pending: bytearray) -> None:
    view = memoryview(pending)
    while view:
        view = view[os.write(1, view):]
    del view
    pending.clear()


if __name__ == "__main__":
    main()
