"""Records kept as bytes until first used: what lets a restart skip building 100k `Record`s.

A restart from a snapshot (`pool.snapshot`) needs every record's id, postings and columns at once,
but a record itself only when something shows it. `RecordStore` holds each record as a `marshal`ed
tuple of plain values and builds the `Record` on first access (then keeps it, so every holder sees
the same object); `RecordList` is a list whose items may still be store positions.
"""

from __future__ import annotations

import marshal
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from .records import Record, Source, Status, metric_from_fields, record_from_fields, tie_from_fields

_STATUS = {status.value: status for status in Status}
_ZONES: dict[timedelta, timezone] = {}


def encode(record: Record) -> bytes:
    """The record as bytes for `RecordStore`, its source as its line only (the store knows each
    position's file). Raises ValueError when its `extra` holds a value `marshal` cannot store (say a
    YAML timestamp)."""
    return marshal.dumps(fields_of(record))


def fields_of(record: Record) -> tuple:
    """The record as a tuple of plain values (`marshal`'s), its source as its line only: `record_of`
    builds it back, equal, given its file."""
    return (
        record.id, record.name, record.status.value, _moment(record.created_at), _moment(record.finished_at),
        record.headline, record.details, record.notes, record.architecture,
        tuple((m.name, m.value, m.baseline, m.goal) for m in record.metrics),
        tuple((t.path, t.symbol) for t in record.code), record.commit, record.tags, record.url,
        record.importance, dict(record.extra), record.source.line if record.source else 0, record.warnings,
        record.repo, record.origin, record.patch)


def record_of(fields: tuple, path: str) -> Record:
    """The record `fields_of` gave `fields` of, its source at `path`."""
    (id_, name, status, created, finished, headline, details, notes, architecture, metrics, code, commit,
     tags, url, importance, extra, line, warnings, repo, origin, patch) = fields
    return record_from_fields(id_, name, _STATUS[status], _datetime(created), _datetime(finished), headline,
                              details, notes, architecture, tuple(metric_from_fields(*m) for m in metrics),
                              tuple(tie_from_fields(*t) for t in code), commit, tags, url, importance, extra,
                              Source(path, line), warnings, repo, origin, patch)


def _moment(value: datetime | None) -> str | tuple[str, float] | None:
    """A datetime as ISO text, its offset (if any) in it: `fromisoformat` reads that back 10× faster
    than it builds a naive one and `replace`s its zone (≈ 0.1 against 1 µs). An offset with
    microseconds goes apart, as seconds: Python 3.11 reads `+00:00:00.000001` back as no offset."""
    if value is None:
        return None
    offset = value.utcoffset()
    if offset is None or not offset.microseconds:
        return value.isoformat()
    return value.replace(tzinfo=None).isoformat(), offset.total_seconds()


def _datetime(value: str | tuple[str, float] | None) -> datetime | None:
    """`_moment`'s value back; the zone of an offset other than UTC shared by every datetime of it."""
    if value is None:
        return None
    if type(value) is str:
        moment = datetime.fromisoformat(value)
        zone = moment.tzinfo
        if zone is None or zone is timezone.utc:
            return moment
        offset = zone.utcoffset(None)
    else:
        moment, offset = datetime.fromisoformat(value[0]), timedelta(seconds=value[1])
        zone = None
    shared = _ZONES.get(offset)
    if shared is None:
        shared = _ZONES[offset] = zone or timezone(offset)
    return moment if shared is zone else moment.replace(tzinfo=shared)


class RecordStore:
    """Encoded records (`blob[offsets[i]:offsets[i + 1]]`), decoded once each on first access; `files`
    are the (first position, path) of each file's records, in position order: a record's source."""

    def __init__(self, blob: Any, offsets: np.ndarray, files: Sequence[tuple[int, str]]) -> None:
        self._blob = memoryview(blob)
        self._offsets = offsets.tolist()
        self._starts = [start for start, _ in files]
        self._paths = [path for _, path in files]
        self._built: list[Record | None] = [None] * (len(self._offsets) - 1)
        self._building = threading.Lock()  # one `Record` per position, whichever thread builds it

    def __getitem__(self, i: int) -> Record:
        record = self._built[i]
        if record is None:
            with self._building:
                record = self._built[i]
                if record is None:
                    record = self._built[i] = self._decode(i)
        return record

    def peek(self, i: int) -> Record:
        """Record i, decoded for this caller alone when nobody has built it yet: a walk over every
        record (the levers' table after a restart) must not leave them all built — at 1M records
        that was 4 GB on top of the restored pool."""
        return self._built[i] or self._decode(i)

    def encoded(self, i: int) -> bytes:
        """Record i's bytes as stored (the same in any store that places it in a file of the same path)."""
        return bytes(self._blob[self._offsets[i]:self._offsets[i + 1]])

    def _decode(self, i: int) -> Record:
        return record_of(marshal.loads(self._blob[self._offsets[i]:self._offsets[i + 1]]),
                         self._paths[bisect_right(self._starts, i) - 1])


class RecordList:
    """A list of records (or None) whose items may still be positions in a `RecordStore`."""

    __slots__ = ("items", "store")

    def __init__(self, items: Iterable[Record | int | None] = (), store: RecordStore | None = None) -> None:
        self.items: list[Record | int | None] = list(items)
        self.store = store

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        item = self.items[i]
        if type(item) is int:
            item = self.items[i] = self.store[item]
        return item

    def peek(self, i: int) -> Any:
        """Item i, a stored one decoded without being kept (`RecordStore.peek`)."""
        item = self.items[i]
        return self.store.peek(item) if type(item) is int else item

    def __setitem__(self, i: int, value: Record | None) -> None:
        self.items[i] = value

    def __iter__(self) -> Iterator[Any]:
        return map(self.__getitem__, range(len(self.items)))

    def append(self, item: Record | int | None) -> None:
        self.items.append(item)

    def extend(self, records: Iterable[Record]) -> None:
        self.items.extend(records)

    def taken(self, positions: Iterable[int]) -> "RecordList":
        """The items at these positions, still unbuilt where they were."""
        items = self.items
        return RecordList([items[i] for i in positions], self.store)


def items_of(records: list[Record] | RecordList) -> list[Record | int | None]:
    """The items of a list of records: for a `RecordList`, still unbuilt where they were."""
    return records.items if isinstance(records, RecordList) else records
