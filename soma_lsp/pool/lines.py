"""Which record each line of a `.jsonl` file gave, by the line's digest, packed (`FileLoad.line_records`).

A re-read of a `.jsonl` file that grew or changed in a few lines reuses the records of the lines that
did not change: it looks each line's digest up in the last load's table. Kept as a dict of 100k
`bytes → (int, int)` that table cost ≈ 170 bytes a line (≈ 17 MB of a 100k-line file's first load)
and was marshalled into the snapshot and read back on every restart; here it is three flat buffers
(32 bytes a line, stored and restored as they are), and the dict is built only when a re-read first
looks a digest up.

The digests of a big file's first read are taken later (`LineDigests.later`): hashing 100k lines is
≈ 0.17 s of the loader's CPU, on the path to a first load's full result (issue 22 point 3), and
nothing needs them until the file changes or the snapshot is written. They are then read from the
file again, only if its stamp (`loader.stamp_of`: size, mtime, ctime, inode, device — what a
snapshot's restart trusts as well) is still the one the load read under, before and after the
reading; if it moved, the old bytes are gone and the table is left empty: a re-read then decodes
every line, which gives the same records (the digests only spare work), so it stays exact.
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections.abc import Callable, Iterator

from .. import foreground

DIGEST_BYTES = 16
PAUSE_LINES = 64  # lines settled between two `foreground.pause()` calls (≈ 0.2 ms: a hover's turn comes soon)

_settling = threading.Lock()  # (a table is settled once: by a re-read, the snapshot or the pool's idle time)


def digest(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=DIGEST_BYTES).digest()


class LineDigests:
    """(digest of a valid line's bytes → its record's position, its 0-based line), in line order; a
    digest added twice (the same line written twice) finds its last occurrence."""

    __slots__ = ("_digests", "_positions", "_lines", "_index", "_later")

    def __init__(self, digests: bytes = b"", positions: bytes = b"", lines: bytes = b"") -> None:
        self._digests = bytearray(digests)
        self._positions = array("q", positions)
        self._lines = array("q", lines)
        if not len(self._digests) == DIGEST_BYTES * len(self._positions) == DIGEST_BYTES * len(self._lines):
            raise ValueError("inconsistent line digests")
        self._index: dict[bytes, int] | None = None
        self._later: Callable[[], Iterator[tuple[int, bytes]]] | None = None

    @classmethod
    def later(cls, lines: Callable[[], Iterator[tuple[int, bytes]]]) -> LineDigests:
        """A table whose digests are taken when first needed (`settle`): `lines()` gives
        the file's (number, bytes) again, to its end — every line `add` was given among them, the
        same bytes — or raises `Changed` or an OSError (the file is not the one read)."""
        table = cls()
        table._later = lines
        return table

    def __len__(self) -> int:
        return len(self._positions)

    @property
    def pending(self) -> bool:
        return self._later is not None

    def add(self, digest: bytes | None, position: int, line: int) -> None:
        """`digest` is None in a table made `later` (taken when it is settled)."""
        self._positions.append(position)
        self._lines.append(line)
        if self._later is None:
            self._digests += digest
            if self._index is not None:
                self._index[digest] = len(self._positions) - 1

    def settle(self) -> None:
        """Take the digests a `later` table left for now (reading its file again); an empty table if
        the file changed since. Idempotent; never raises for a file that changed or went away."""
        if self._later is None:
            return
        with _settling:
            if self._later is None:
                return
            wanted = iter(self._lines)
            digests = bytearray()
            try:
                next_line = next(wanted, None)
                for number, line in self._later():  # (read to its end: its last stamp check)
                    if number % PAUSE_LINES == 0:
                        foreground.pause()
                    if number == next_line:
                        if line is None:  # (longer than the limit now)
                            raise Changed
                        digests += digest(line)
                        next_line = next(wanted, None)
                if next_line is not None:
                    raise Changed
            except (Changed, OSError):
                del self._positions[:], self._lines[:]
                digests = bytearray()
            self._digests, self._later = digests, None

    def get(self, digest: bytes) -> tuple[int, int] | None:
        """(position, line) of the line with this digest, or None."""
        if self._index is None:
            self.settle()
            data = bytes(self._digests)
            self._index = {data[at:at + DIGEST_BYTES]: i
                           for i, at in enumerate(range(0, len(data), DIGEST_BYTES))}
        i = self._index.get(digest)
        return None if i is None else (self._positions[i], self._lines[i])

    def packed(self) -> tuple[bytes, bytes, bytes]:
        """The three buffers, for the snapshot (`LineDigests(*packed)` gives the table back)."""
        self.settle()
        return bytes(self._digests), self._positions.tobytes(), self._lines.tobytes()


class Changed(Exception):
    """The file a `later` table's lines are read from is not the one its load read."""
