"""`LiveIndex`: a pool's records as slots, columns and postings, and the atomic `update`.

One lock makes `update` atomic for queries: a query sees the pool before or after a batch, never half.
Writers tokenize and build a batch's postings before taking it (`_prepare`), so queries wait only for
the commit; writers queue on a lock of their own. Merging segments runs after the commit, off the read
lock (only writers change segments), and is swapped in under it. Every change moves `_layout`, the
counter the query caches (`ranking`, `contributions`) key on.

What changed is kept too, for those who follow the index instead of reading it whole after every
update (the server's commit ties and evidence table: a pool change at 100k must not cost a pass
over every record): a bounded journal of the ids each version touched (`changed_since`), and the
ids of the records that name a git commit (`ids_naming_a_commit`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...gcpause import collector_paused
from ...records import Record
from ...stored import RecordList
from .. import terms as T
from ..documents import CountedLines, DocumentCounter
from .columns import _Columns
from .contributions import _Contributions
from .ranking import _Ranking
from .segments import _Postings, _Prepared, _Segment
from .state import _Exporting
from . import tuning


def document_fields(record: Record) -> tuple[str, str, str, str]:
    """A record's document fields — name, headline, notes, details — as `DocumentCounter` counts them."""
    return (record.name, record.headline or "", record.notes or "", record.details or "")


def _by_counting(records: list[Record], counted: Mapping[str, Callable[[], CountedLines | None]],
                 ) -> list[tuple[list[Record], Callable[[], CountedLines | None] | None]]:
    """The records of each counted file, in line order (so their rows stay ascending), with its
    counting; then the rest, to count here."""
    if not counted:
        return [(records, None)]
    by_file: dict[str, list[Record]] = {}
    rest = []
    for record in records:
        path = record.source.path if record.source is not None else None
        if path in counted:
            by_file.setdefault(path, []).append(record)
        else:
            rest.append(record)
    groups = [(_in_line_order(group), counted[path]) for path, group in by_file.items()]
    return groups + [(rest, None)] if rest else groups


def _in_line_order(records: list[Record]) -> list[Record]:
    lines = np.fromiter((r.source.line for r in records), dtype=np.int64, count=len(records))
    if np.all(lines[:-1] < lines[1:]):
        return records
    return [records[i] for i in np.argsort(lines).tolist()]


#: The journal keeps the ids of the last updates up to this many ids (and `JOURNAL_UPDATES` updates):
#: a follower further behind reads the index whole again.
JOURNAL_IDS = 50_000
JOURNAL_UPDATES = 1024

_LENGTH_CHUNK = 1 << 20  # postings summed at once by `_lengths`


def _lengths(slots: np.ndarray, counts: np.ndarray, size: int) -> np.ndarray:
    """Each document's length (its counts summed by slot), a chunk of postings at a time: `bincount`
    converts its float32 weights to float64 first — a transient 68 MB for a 100k-record batch, the
    peak of a first load's memory. The counts are whole numbers, so the sums are exact in any order."""
    lengths = np.zeros(size, dtype=np.float64)
    for start in range(0, slots.size, _LENGTH_CHUNK):
        lengths += np.bincount(slots[start:start + _LENGTH_CHUNK], weights=counts[start:start + _LENGTH_CHUNK],
                               minlength=size)
    return lengths


@dataclass(frozen=True, slots=True)
class _Batch:
    """Everything about a batch of new records that can be computed before taking the read lock."""

    records: list[Record]
    columns: dict[str, list]
    terms: _Prepared
    components: _Prepared
    ties: dict[str, list[str]]  # code path → ids of the batch's records tied to it


class LiveIndex(_Ranking, _Exporting):
    """A pool's records, ready to rank; `update` adds, replaces and removes records in place.

    Ranking (`rank`, `score`) is `ranking._Ranking`'s, `export` and `restore` are `state._Exporting`'s:
    this class holds the state they read, its locks, and the update."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._lock = threading.RLock()  # readers, and the short commit of an update
        self._write_lock = threading.Lock()  # one writer at a time
        self._columns = _Columns()
        self._slot_records = RecordList()  # per slot: its record (None once removed)
        self._slot_of: dict[str, int] = {}
        self._terms = _Postings()
        self._documents = DocumentCounter(self._terms.vocabulary)  # writers only
        self._components = _Postings()
        self._ties: dict[str, set[str]] = {}
        self._total_dl = 0.0
        self._dead_slots = 0
        self._layout_cache: dict[Any, Any] = {}  # what queries reuse while the layout stands
        self._cache_layout = -1
        self._contributions = _Contributions()
        self._commit_ids: set[str] = set()  # ids of the records naming a git commit
        self._journal: deque[tuple[int, tuple[str, ...]]] = deque()  # (version, ids it added or removed)
        self._journal_ids = 0
        self._journal_from = 0  # `changed_since(v)` is known for every v ≥ this
        self.version = 0  # one step per update
        #: True while a pool's load is committing into this index (a big file by parts, docs/spec.md
        #: §4.8): it holds a growing prefix, so work that reads it whole in the background (the
        #: server's evidence table) waits for the end rather than redo itself after every part.
        self.filling = False
        self._layout = 0  # one step per update or change of segments/slots: what query caches key on
        self.update(add=records)

    # -- reading ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._slot_of

    def get(self, record_id: str) -> Record | None:
        with self._lock:  # (a compaction renumbers slots)
            slot = self._slot_of.get(record_id)
            return None if slot is None else self._slot_records[slot]

    def peek(self, record_id: str) -> Record | None:
        """`get`, but a record still stored is decoded without being kept (`RecordStore.peek`): for
        walks over the whole pool that keep only a little of each record."""
        with self._lock:
            slot = self._slot_of.get(record_id)
            return None if slot is None else self._slot_records.peek(slot)

    def records(self) -> list[Record]:
        """Every record, in id order."""
        with self._lock:
            return [self._slot_records[self._slot_of[i]] for i in sorted(self._slot_of)]

    def ids(self) -> list[str]:
        """Every record's id (in no particular order): a census without building any record."""
        with self._lock:
            return list(self._slot_of)

    def ids_naming_a_commit(self) -> list[str]:
        """The ids of the records that name a git commit (`Record.commit`), in no particular order."""
        with self._lock:
            return list(self._commit_ids)

    def changed_since(self, version: int, limit: int = JOURNAL_IDS) -> set[str] | None:
        """The ids added, replaced or removed by the updates after `version` — or None when the
        journal no longer reaches back that far (a restore, too many changes) or they are more than
        `limit`: read the index whole then."""
        with self._lock:
            if version == self.version:
                return set()
            if version < self._journal_from or version > self.version:
                return None
            found: set[str] = set()
            for at, ids in reversed(self._journal):
                if at <= version:
                    break
                if len(ids) > limit:  # (an update's ids are distinct: too many, known without a walk)
                    return None
                found.update(ids)
                if len(found) > limit:
                    return None
            return found

    def _note(self, ids: tuple[str, ...]) -> None:
        """Journal the ids this version touched (under the read lock, with the version's step)."""
        journal = self._journal
        if len(ids) > JOURNAL_IDS:
            journal.clear()
            self._journal_ids, self._journal_from = 0, self.version
            return
        journal.append((self.version, ids))
        self._journal_ids += len(ids)
        while self._journal_ids > JOURNAL_IDS or len(journal) > JOURNAL_UPDATES:
            self._journal_from, dropped = journal.popleft()
            self._journal_ids -= len(dropped)

    def _forget_journal(self) -> None:
        """Nothing before this version can be followed (a restore replaced everything)."""
        self._journal.clear()
        self._journal_ids, self._journal_from = 0, self.version

    def tied_to(self, path: str) -> list[Record]:
        """Records with a `code` tie naming this workspace-relative path, in id order."""
        with self._lock:
            return [self._slot_records[self._slot_of[i]] for i in sorted(self._ties.get(path, ()))]

    # -- writing ------------------------------------------------------------------------------

    def update(self, add: Iterable[Record] = (), remove: Iterable[str] = (),
               counted: Mapping[str, Callable[[], CountedLines | None]] | None = None) -> None:
        """Remove the `remove` ids, then add `add` (a present id is replaced), as one atomic step.

        The costly part (tokenizing, postings) runs before the read lock is taken, so queries keep
        being answered from the previous state meanwhile; writers queue on their own lock.
        `counted`: per source path, a function giving what was counted elsewhere from that file's
        lines (`CountedLines`), called once the rest of its records' batch is done (so the counting
        can finish meanwhile); when it gives None, their records are counted here.
        """
        with self._write_lock:
            latest = {r.id: r for r in add}  # within a batch, the last record of an id wins
            gone = [self._slot_records[self._slot_of[i]]
                    for i in dict.fromkeys([*remove, *latest]) if i in self._slot_of]
            with collector_paused():
                forgotten = (np.diff(self._documents.count([document_fields(r) for r in gone])[0]),
                             self._components.doc_freq_of(T.component_bag(r.architecture) for r in gone))
                batches = [self._prepare(group[i:i + tuning.SEGMENT_RECORDS], fetch)
                           for group, fetch in _by_counting(list(latest.values()), counted or {})
                           for i in range(0, len(group), tuning.SEGMENT_RECORDS)]
            with self._lock:
                self._remove(gone, *forgotten)
                for batch in batches:
                    self._commit(batch)
                self.version += 1
                self._layout += 1
                self._note(tuple(dict.fromkeys([*(r.id for r in gone), *latest])))
            self._tidy()

    def _prepare(self, records: list[Record], fetch: Callable[[], CountedLines | None] | None = None) -> _Batch:
        ties: dict[str, list[str]] = {}
        for record in records:
            for tie in record.code:
                ties.setdefault(tie.path, []).append(record.id)
        dead_ends = [T.is_dead_end(r) for r in records]
        columns = {
            "time": [T.epoch_seconds(r.time) if r.time else np.nan for r in records],
            "importance": [T.importance(r, dead) for r, dead in zip(records, dead_ends)],
            "dead_end": dead_ends,
        }
        counted = fetch() if fetch is not None else None
        if counted is None:
            component_bags = [T.component_bag(r.architecture) for r in records]
            columns["arch_total"] = [sum(bag.values()) for bag in component_bags]
            components = self._components.prepare(component_bags)
            indptr, slots, counts = self._documents.count([document_fields(r) for r in records])
        else:
            lines = np.fromiter((r.source.line for r in records), dtype=np.int64, count=len(records))
            columns["arch_total"] = counted.arch_total[lines]
            components = _Prepared.of(_Segment(*counted.components.select(lines, self._components.vocabulary)))
            indptr, slots, counts = counted.terms.select(lines, self._terms.vocabulary)
        columns["dl"] = _lengths(slots, counts, len(records))
        return _Batch(records, columns, _Prepared.of(_Segment(indptr, slots, counts)), components, ties)

    def _remove(self, records: list[Record], term_doc_freq: np.ndarray, component_doc_freq: np.ndarray) -> None:
        if not records:
            return
        slots = [self._slot_of.pop(r.id) for r in records]
        self._commit_ids.difference_update(r.id for r in records)
        self._terms.forget(term_doc_freq)
        self._components.forget(component_doc_freq)
        for record in records:
            for tie in record.code:
                ids = self._ties.get(tie.path)
                if ids is not None:
                    ids.discard(record.id)
                    if not ids:
                        del self._ties[tie.path]
        columns = self._columns
        self._total_dl -= float(columns.dl[slots].sum())
        for slot in slots:
            self._slot_records[slot] = None
        columns.alive[slots] = False
        self._dead_slots += len(slots)

    def _commit(self, batch: _Batch) -> None:
        slots = self._columns.grow(len(batch.records))
        first = int(slots[0]) if slots.size else 0
        self._slot_records.extend(batch.records)
        self._slot_of.update(zip((r.id for r in batch.records), slots.tolist()))
        self._commit_ids.update(r.id for r in batch.records if r.commit)
        for path, ids in batch.ties.items():
            self._ties.setdefault(path, set()).update(ids)
        columns = self._columns
        columns.alive[slots] = True
        for name, values in batch.columns.items():
            getattr(columns, name)[slots] = values
        self._total_dl += float(np.sum(batch.columns["dl"]))
        self._terms.commit(batch.terms, first)
        self._components.commit(batch.components, first)

    def _tidy(self) -> None:
        """Merge segments off the read lock (only writers change them); compact slots when dead ones
        dominate."""
        compact = self._dead_slots > max(1024, self._columns.size // 2)
        keep = self._columns.view("alive").copy()
        terms = self._terms.tidied(keep, compact)
        components = self._components.tidied(keep, compact)
        if terms == self._terms.segments and components == self._components.segments:
            return
        with self._lock:
            self._terms.segments, self._components.segments = terms, components
            if compact:
                self._compact_slots()
            self._layout += 1

    def _compact_slots(self) -> None:
        """Renumber live slots densely once dead ones dominate; postings were merged just before."""
        alive = self._columns.view("alive")
        new_of_old = np.cumsum(alive) - 1
        old = self._columns
        fresh = _Columns()
        live_slots = np.flatnonzero(alive)
        fresh.grow(live_slots.size)
        for name in _Columns.FIELDS:
            fresh.view(name)[:] = old.view(name)[live_slots]
        self._columns = fresh
        ids = {slot: i for i, slot in self._slot_of.items()}
        self._slot_records = self._slot_records.taken(live_slots.tolist())
        self._slot_of = {ids[slot]: i for i, slot in enumerate(live_slots.tolist())}
        for postings in (self._terms, self._components):
            postings.segments = [_Segment(s.indptr, new_of_old[s.slots].astype(np.int32), s.counts)
                                 for s in postings.segments]
        self._dead_slots = 0
