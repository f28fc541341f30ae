"""A big `.jsonl` file read for the first time is committed in parts, so the server answers from its
first records while the rest still loads (docs/spec.md §4.8).

A part is always a prefix of the file: the records of its first `FIRST_PART_LINES` lines, then of its
first 30k, 70k, 150k … lines (each part adds twice the lines of the one before, so a file of N lines
takes about log2(N / 10k) commits, and the index's work per commit stays proportional to what it
adds). The loader hands each prefix over as a `FileLoad` of its own (`prefix`); the pool commits it
like any file, and the next prefix replaces it — the records already committed are the same objects,
so only the new ones reach the index. `pool.counting`'s child cuts its count at the same lines.

Only a first read is cut: a file already loaded is re-read whole and swapped in as one update, so a
query sees either the old records of a file or the new ones, never a mix.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator

from .loader import FileLoad

FIRST_PART_LINES = 10_000


def part_ends(first: int | None = None) -> Iterator[int]:
    """The line numbers (exclusive) where the parts end: `first` (`FIRST_PART_LINES`), 3×, 7× … that."""
    first = first or FIRST_PART_LINES
    return ((2 ** k - 1) * first for k in itertools.count(1))


def prefix(load: FileLoad) -> FileLoad:
    """What `load` holds so far, as a load of its own that later reading does not change (the
    records and problems copied; the unchanged-lines digest left out: a prefix is never re-read)."""
    return dataclasses.replace(load, records=list(load.records), problems=load.problems.done(load.path),
                               line_records=None)


class Parts:
    """What `loader.load_file(batch=...)` cuts a first read at: `end` is the line the current part
    ends at; `cut(load)` hands the prefix read so far to `commit` and moves `end` to the next part's."""

    def __init__(self, commit: Callable[[FileLoad], None], first: int | None = None) -> None:
        self._commit = commit
        self._ends = part_ends(first)
        self.end = next(self._ends)

    def cut(self, load: FileLoad) -> int:
        self._commit(prefix(load))
        self.end = next(self._ends)
        return self.end
