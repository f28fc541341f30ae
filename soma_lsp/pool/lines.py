"""Which record each line of a `.jsonl` file gave, by the line's digest, packed (`FileLoad.line_records`).

A re-read of a `.jsonl` file that grew or changed in a few lines reuses the records of the lines that
did not change: it looks each line's digest up in the last load's table. Kept as a dict of 100k
`bytes → (int, int)` that table cost ≈ 170 bytes a line (≈ 17 MB of a 100k-line file's first load)
and was marshalled into the snapshot and read back on every restart; here it is three flat buffers
(32 bytes a line, stored and restored as they are), and the dict is built only when a re-read first
looks a digest up.
"""

from __future__ import annotations

from array import array

DIGEST_BYTES = 16


class LineDigests:
    """(digest of a valid line's bytes → its record's position, its 0-based line), in line order; a
    digest added twice (the same line written twice) finds its last occurrence."""

    __slots__ = ("_digests", "_positions", "_lines", "_index")

    def __init__(self, digests: bytes = b"", positions: bytes = b"", lines: bytes = b"") -> None:
        self._digests = bytearray(digests)
        self._positions = array("q", positions)
        self._lines = array("q", lines)
        if not len(self._digests) == DIGEST_BYTES * len(self._positions) == DIGEST_BYTES * len(self._lines):
            raise ValueError("inconsistent line digests")
        self._index: dict[bytes, int] | None = None

    def __len__(self) -> int:
        return len(self._positions)

    def add(self, digest: bytes, position: int, line: int) -> None:
        self._digests += digest
        self._positions.append(position)
        self._lines.append(line)
        if self._index is not None:
            self._index[digest] = len(self._positions) - 1

    def get(self, digest: bytes) -> tuple[int, int] | None:
        """(position, line) of the line with this digest, or None."""
        if self._index is None:
            data = bytes(self._digests)
            self._index = {data[at:at + DIGEST_BYTES]: i
                           for i, at in enumerate(range(0, len(data), DIGEST_BYTES))}
        i = self._index.get(digest)
        return None if i is None else (self._positions[i], self._lines[i])

    def packed(self) -> tuple[bytes, bytes, bytes]:
        """The three buffers, for the snapshot (`LineDigests(*packed)` gives the table back)."""
        return bytes(self._digests), self._positions.tobytes(), self._lines.tobytes()
