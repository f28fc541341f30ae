"""A first read of a big MLflow SQLite store shared with a child process on the spare core.

A first load of 100k runs spent ≈ 4 s of its ≈ 6.5 s CPU reading each run's row, fingerprinting it,
mapping it (`mapping.record_mapping`) and validating the record (`records.parse_record`), one run after
another in one thread (docs/benchmarks.md § Trackers). None of it needs this process's objects. So
`start` cuts the runs into chunks of `CHUNK_RUNS` by `rowid` and has a child (`pool.apart`, running
`mlflow_sqlite.main`, that is `serve`) read and
build them exactly as this process would (`SqliteStore.scan` of the chunk's `rowid` range), from the last
chunk down, while this process does the same from the first chunk up; they meet where the child got to
(`Share.chunks`), so the work is split by how fast each goes — on a busy machine the child may do little,
and nothing waits for it. The child sends each chunk as plain values — each run's id, fingerprint, record
(`stored.fields_of`) or problems, and the `runs` rows of the chunk's open runs (`SqliteStore`'s quick
polls compare them) — in a `marshal` frame (an 8-byte length, then the value), built back here into `FileLoad`s equal to
those built here (a test compares).

Never wrong, at worst not faster: a child that cannot start, fails (its last words are logged), or sends
anything malformed leaves its chunks to this process. The chunks are read in separate transactions, not
one cut: a write meanwhile is a change after the state the first load took (`SqliteStore._seen` and the
marker's stamp are taken before), so the follower and a restart read again what it changed.
"""

from __future__ import annotations

import gc
import logging
import marshal
import os
import sqlite3
import struct
import sys
from collections.abc import Callable, Iterator
from dataclasses import astuple

from ...stored import fields_of, record_of
from ..apart import Child, idle_cores
from ..loader import FileLoad
from ..problems import NO_PROBLEMS, Problem
from ..read_ahead import spare_cores
from .source import TrackerError

log = logging.getLogger(__name__)

APART_RUNS = 10_000  # fewer runs than this are read here: the child would not pay for its start (≈ 0.3 s)
CHUNK_RUNS = 2_000  # runs a chunk: how finely the two processes share the work
ROWIDS = range(-(1 << 63), (1 << 63) - 1)  # every rowid SQLite gives (but the largest)
_LENGTH = struct.Struct("<Q")


def chunks(starts: list[int]) -> list[range]:
    """Ranges of `rowid`s that cover them all, the second starting at `starts[0]`, and so on."""
    bounds = [ROWIDS.start, *starts, ROWIDS.stop]
    return [range(a, b) for a, b in zip(bounds, bounds[1:])]


def start(store) -> "Share | None":
    """A child sharing the first read of `store` (a `SqliteStore`), or None when the store is small, no
    core is spare and idle (`apart.idle_cores`), or it cannot start (then it is all read here, and any
    problem reported as ever)."""
    if idle_cores(spare_cores()) < 1:
        return None
    try:
        connection = store._connect()
        try:
            rowids = [rowid for (rowid,) in connection.execute("SELECT rowid FROM runs ORDER BY rowid")]
        finally:
            connection.close()
        if len(rowids) < APART_RUNS:
            return None
        return Share(store, chunks(rowids[CHUNK_RUNS::CHUNK_RUNS]), rowids[-1])
    except Exception as error:  # noqa: BLE001 - read here, where its problem is reported
        log.info("reading %s: no child for a share of its runs (%r)", store.entry, error)
        return None


class Share:
    """A first read of `store`'s runs, cut into `chunks`, shared with a child; `last_rowid`, the largest
    `rowid` when they were cut (what a run added since is above)."""

    def __init__(self, store, rowids: list[range], last_rowid: int) -> None:
        self.store = store
        self.chunks = rowids
        self.last_rowid = last_rowid
        self._child = Child(type(store).__module__,
                            [store.path, repr(store.busy_seconds), *(str(c.start) for c in rowids[1:])],
                            f"reading the runs of {store.entry}")
        self._at = 0  # where the next frame starts in the child's output
        self._lowest = len(rowids)  # the lowest chunk received from the child
        self._failed = False

    def read(self, read_here: Callable[[range], dict[str, FileLoad]],
             take: Callable[[dict[str, FileLoad]], None]) -> dict[str, tuple]:
        """Every run's load, a chunk's at a time to `take`: chunks from the first up read by
        `read_here(rowids)`, until they meet those the child sent from the last down. Returns the
        `runs` rows of the open runs the child read, by run id."""
        heads: dict[str, tuple] = {}
        next_here = 0
        try:
            while True:
                for loads, chunk_heads in self._received(next_here):
                    take(loads)
                    heads.update(chunk_heads)
                if next_here >= self._lowest:
                    return heads
                take(read_here(self.chunks[next_here]))
                next_here += 1
        finally:
            self._child.close()

    def _received(self, next_here: int) -> Iterator[tuple[dict[str, FileLoad], dict[str, tuple]]]:
        """The chunks the child has sent so far, not waited for, down to `next_here` (those below it
        are read here); none once it failed or sent anything malformed (logged)."""
        while not self._failed and self._lowest > next_here:
            try:
                frame = self._frame()
                if frame is None:
                    return
                chunk, runs, rows = frame
                if chunk != self._lowest - 1:
                    raise ValueError(f"chunk {chunk} after chunk {self._lowest}")
                loads, heads = self._loads(runs), {row[0]: tuple(row) for row in rows}
            except Exception:  # noqa: BLE001 - reading its chunks here is always possible
                log.exception("%s apart: its answer is malformed; read here", self._child.what)
                self._failed = True
                return
            self._lowest = chunk
            yield loads, heads

    def _frame(self) -> tuple | None:
        length = self._child.read(self._at, _LENGTH.size, wait=False)
        if length is None:
            return None
        body = self._child.read(self._at + _LENGTH.size, _LENGTH.unpack(length)[0], wait=False)
        if body is None:
            return None
        self._at += _LENGTH.size + len(body)
        return marshal.loads(body)

    def _loads(self, runs: list[tuple]) -> dict[str, FileLoad]:
        prefix, loads = self.store.prefix, {}
        for run, stamp, fields, problems in runs:
            key = prefix + run
            loads[key] = FileLoad(key, [record_of(fields, key)] if fields is not None else [],
                                  [Problem(*p) for p in problems] if problems else NO_PROBLEMS, stamp=stamp)
        return loads


# -- the child ------------------------------------------------------------------------------------

def serve(store) -> None:
    """The child's work, for its module's `main()`: `python -c ... DATABASE BUSY_SECONDS CHUNK_START…`
    (`chunks`) and `store(database, busy_seconds)` a `SqliteStore`; on stdout a frame per chunk, from the
    last down: `(chunk, [(run id, stamp, record fields or None, problems), …], [its open runs' `runs`
    rows])`. A store it cannot read: its message on stderr, exit 1."""
    gc.disable()  # many small acyclic objects, a short life
    reader = store(sys.argv[1], float(sys.argv[2]))
    rowids = chunks([int(a) for a in sys.argv[3:]])
    out = sys.stdout.buffer
    for number in reversed(range(len(rowids))):
        try:
            scan = reader.scan(rowids[number])
        except (TrackerError, sqlite3.Error) as error:
            print(error, file=sys.stderr)
            sys.exit(1)
        runs = []
        for key, (stamp, build) in scan.runs.items():
            load = build()
            records = load.records
            problems = tuple(astuple(p) for p in load.problems) if load.problems else ()
            runs.append((key[len(reader.prefix):], stamp, fields_of(records[0]) if records else None, problems))
        body = marshal.dumps((number, runs, list(reader._open.values())))
        reader._open = {}
        out.write(_LENGTH.pack(len(body)) + body)
        out.flush()
    os._exit(0)
