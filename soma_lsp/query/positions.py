"""Positions as LSP counts them: 0-based (line, character), characters in UTF-16 code units.

Python strings index code points and tree-sitter reports (row, byte column) in UTF-8, so every
position crossing a layer boundary goes through here. Lines are LSP's lines, the one rule every
layer uses (`split_lines`): only ``\\r\\n``, ``\\r`` and ``\\n`` end a line (not the other separators
``str.splitlines`` knows), and the break is not part of the line's text. Tree-sitter counts rows at
``\\n`` only, so its points are never taken as (row, column): `LineIndex.byte_offset` maps its byte
offsets, which do not depend on how lines are split. Out-of-range positions are clamped, never an
error.
"""

from __future__ import annotations

import re
from bisect import bisect_right

Position = tuple[int, int]
Range = tuple[Position, Position]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(source: str) -> list[str]:
    """LSP's lines: only CR LF, CR and LF break a line (not str.splitlines' other separators)."""
    return _LINE_BREAK.split(source)


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (astral characters count 2)."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def utf16_to_index(line: str, character: int) -> int:
    """Code-point index in ``line`` for a UTF-16 column; clamped to [0, len(line)]. A column that
    falls inside a surrogate pair rounds down to the start of that character."""
    if character <= 0:
        return 0
    if line.isascii():
        return min(character, len(line))
    units = 0
    for i, c in enumerate(line):
        units += 2 if ord(c) > 0xFFFF else 1
        if units > character:
            return i
        if units == character:
            return i + 1
    return len(line)


def index_to_utf16(line: str, index: int) -> int:
    """UTF-16 column of code-point ``index`` in ``line`` (clamped)."""
    index = max(0, min(index, len(line)))
    return index if line.isascii() else utf16_len(line[:index])


class LineIndex:
    """Converts between code-point offsets into ``source``, LSP positions and tree-sitter points."""

    __slots__ = ("source", "lines", "starts", "ascii", "_byte_starts", "_breaks")

    def __init__(self, source: str):
        self.source = source
        self.lines = split_lines(source)
        starts = [0]
        breaks: list[int] = []  # the length of each line's break (1, or 2 for CR LF)
        for match in _LINE_BREAK.finditer(source):
            breaks.append(match.end() - match.start())
            starts.append(match.end())
        self.starts = starts
        self._breaks = breaks
        self.ascii = source.isascii()
        self._byte_starts: list[int] | None = None

    def offset(self, position: Position) -> int:
        """Code-point offset of an LSP position (clamped into the text)."""
        line, character = position
        if line < 0:
            return 0
        if line >= len(self.lines):
            return len(self.source)
        return self.starts[line] + utf16_to_index(self.lines[line], character)

    def position(self, offset: int) -> Position:
        """LSP position of a code-point offset (clamped into the text)."""
        offset = max(0, min(offset, len(self.source)))
        row = bisect_right(self.starts, offset) - 1
        if self.ascii:  # (an offset inside a CR LF break is the end of its line)
            return (row, min(offset - self.starts[row], len(self.lines[row])))
        return (row, index_to_utf16(self.lines[row], offset - self.starts[row]))

    def point_offset(self, row: int, byte_column: int) -> int:
        """Code-point offset of a UTF-8 byte column in one of our (LSP) lines."""
        if row >= len(self.lines):
            return len(self.source)
        line = self.lines[row]
        width = self._breaks[row] if row < len(self._breaks) else 0  # a byte inside the break counts too
        if self.ascii or line.isascii():
            return self.starts[row] + min(byte_column, len(line) + width)
        encoded = line.encode("utf-8", "surrogatepass")
        if byte_column >= len(encoded):
            return self.starts[row] + len(line) + min(byte_column - len(encoded), width)
        return self.starts[row] + len(encoded[:byte_column].decode("utf-8", "ignore"))

    def byte_offset(self, byte: int) -> int:
        """Code-point offset of a UTF-8 byte offset into the source (tree-sitter's start_byte)."""
        if self.ascii:
            return min(byte, len(self.source))
        if self._byte_starts is None:
            starts, total = [0], 0
            for line, width in zip(self.lines, self._breaks):
                total += (len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))) + width
                starts.append(total)
            self._byte_starts = starts
        row = bisect_right(self._byte_starts, byte) - 1
        return self.point_offset(row, byte - self._byte_starts[row])
