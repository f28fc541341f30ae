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
_ZONES: dict[float, timezone] = {}


def encode(record: Record) -> bytes:
    """The record as bytes for `RecordStore`, its source as its line only (the store knows each
    position's file). Raises ValueError when its `extra` holds a value `marshal` cannot store (say a
    YAML timestamp)."""
    return marshal.dumps((
        record.id, record.name, record.status.value, _moment(record.created_at), _moment(record.finished_at),
        record.headline, record.details, record.notes, record.architecture,
        tuple((m.name, m.value, m.baseline, m.goal) for m in record.metrics),
        tuple((t.path, t.symbol) for t in record.code), record.commit, record.tags, record.url,
        record.importance, dict(record.extra), record.source.line if record.source else 0, record.warnings,
        record.repo, record.origin, record.patch))


def _moment(value: datetime | None) -> tuple[str, float | None] | None:
    if value is None:
        return None
    offset = value.utcoffset()
    return value.replace(tzinfo=None).isoformat(), None if offset is None else offset.total_seconds()


def _datetime(value: tuple[str, float | None] | None) -> datetime | None:
    if value is None:
        return None
    text, offset = value
    moment = datetime.fromisoformat(text)
    if offset is None:
        return moment
    zone = _ZONES.get(offset)
    if zone is None:
        zone = _ZONES[offset] = timezone(timedelta(seconds=offset))
    return moment.replace(tzinfo=zone)


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
        (id_, name, status, created, finished, headline, details, notes, architecture, metrics, code, commit,
         tags, url, importance, extra, line, warnings, repo, origin, patch) = marshal.loads(
            self._blob[self._offsets[i]:self._offsets[i + 1]])
        return record_from_fields(id_, name, _STATUS[status], _datetime(created), _datetime(finished), headline,
                                  details, notes, architecture, tuple(metric_from_fields(*m) for m in metrics),
                                  tuple(tie_from_fields(*t) for t in code), commit, tags, url, importance, extra,
                                  Source(self._paths[bisect_right(self._starts, i) - 1], line), warnings, repo, origin,
                                  patch)


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
