"""A big `.jsonl` file read for the first time is committed in parts, so the server answers from its
first records while the rest still loads (docs/spec.md §4.8).

A part is always a prefix of the file: the records of its first `FIRST_PART_LINES` lines, then of its
first 30k, 70k, 150k … lines (each part adds twice the lines of the one before, so a file of N lines
takes about log2(N / 10k) commits, and the index's work per commit stays proportional to what it
adds). The loader hands each prefix over as a `FileLoad` of its own (`prefix`); the pool commits it
like any file, and the next prefix replaces it — the records already committed are the same objects,
so only the new ones reach the index. `pool.counting`'s child cuts its count at the same lines; of a
part whose count the child has not sent yet, only what it has counted is committed (the loader reads
on rather than wait for the rest), and the next cut commits the rest with its own — but the loader
waits when the child has not even counted the part before: a commit's transient memory grows with its
records, and one of many parts at once (the 690k lines after the 310k part, at 1M) would raise the
load's peak.

Only a first read is cut: a file already loaded is re-read whole and swapped in as one update, so a
query sees either the old records of a file or the new ones, never a mix.
"""

from __future__ import annotations

import dataclasses
import itertools
from bisect import bisect_left
from collections.abc import Callable, Iterator

from .loader import FileLoad

FIRST_PART_LINES = 10_000


def part_ends(first: int | None = None) -> Iterator[int]:
    """The line numbers (exclusive) where the parts end: `first` (`FIRST_PART_LINES`), 3×, 7× … that."""
    first = first or FIRST_PART_LINES
    return ((2 ** k - 1) * first for k in itertools.count(1))


def prefix(load: FileLoad, end: int | None = None) -> FileLoad:
    """What `load` holds so far — of the lines before `end` — as a load of its own that later reading
    does not change (the records and problems copied; the unchanged-lines digest left out: a prefix is
    never re-read). Cut short of what was read, it leaves out the count of the problems not kept
    (`FileProblems.more`): that count does not say at which lines they are."""
    if end is None:
        return dataclasses.replace(load, records=list(load.records), problems=load.problems.done(load.path),
                                   line_records=None)
    records = load.records[:bisect_left(load.records, end, key=lambda record: record.source.line)]
    return dataclasses.replace(load, records=records,
                               problems=[p for p in load.problems if p.line < end and p.kind != "more"],
                               line_records=None)


class Parts:
    """What `loader.load_file(batch=...)` cuts a first read at: `end` is the line the current part
    ends at; `cut(load)` hands the prefix read so far to `commit` — up to the line `counted(end)`
    says its count reaches (waited for, `counted(end, wait=True)`, as far as the part before), if
    that is further than the last one handed — and moves `end` to the next part's."""

    def __init__(self, commit: Callable[[FileLoad], None], first: int | None = None,
                 counted: Callable[..., int] = lambda end, wait=False: end) -> None:
        self._commit = commit
        self._counted = counted
        self._ends = part_ends(first)
        self._handed = 0
        self._start = 0  # where the current part starts
        self.end = next(self._ends)

    def cut(self, load: FileLoad) -> int:
        self._hand(load, self.end, whole=True)
        self._start, self.end = self.end, next(self._ends)
        return self.end

    def flush(self, load: FileLoad) -> None:
        """At the end of the file (all of it in `load`): hand what is counted of it and not handed
        yet, so that the last commit — the rest, its count shared with the child — holds only what
        is left of the last part. A file that ended in its first part is all the last commit's."""
        if self._start:
            self._hand(load, load.records[-1].source.line + 1 if load.records else 0, whole=False)

    def _hand(self, load: FileLoad, end: int, whole: bool) -> None:
        """`whole`: `load` is what is read so far (else the whole file, whose load is committed last)."""
        if self._counted(self._start) < self._start:  # not even the part before: waited for
            self._counted(self._start, wait=True)
        counted = min(self._counted(end), end)
        if counted > self._handed:
            self._commit(prefix(load) if whole and counted == end else prefix(load, counted))
            self._handed = counted
