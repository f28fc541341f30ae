"""The live index: a pool's records as columns and postings, updated in place, ranked in numpy.

Each record lives in a slot. Per-slot columns (document length, time, importance, architecture size)
are numpy arrays; terms and components have postings stored in immutable *segments* (CSR arrays, one
per update batch, small ones merged as they pile up). Removing a record clears its slot's `alive` bit
and its document frequencies; its postings stay until a compaction drops them. So an update costs what
its records cost (a batch's documents are counted at once, `documents.DocumentCounter`), and a query
costs the postings of its terms plus a few passes of vector arithmetic.

A query with a limit is ranked in two steps (see "ranking" below): every slot scored approximately,
with a proven error bound, then the few slots that can make the cut scored exactly.

One lock makes `update` atomic for queries: a query sees the pool before or after a batch, never half.
Writers tokenize and build a batch's postings before taking it, so queries wait only for the commit.
What a query can reuse — float32 BM25 contributions per (segment, term) or per common term, per-record
weightings per query shape, length norms — is kept per *layout* (a counter that moves with every
update, merge or compaction) and dropped when it moves.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import compress, repeat
from typing import Any

import numpy as np

from ..gcpause import collector_paused
from ..records import Record
from ..stored import RecordList, RecordStore
from . import terms as T
from .model import TERMS, RetrievalQuery, ScoreComponents, ScoredRecord
from .documents import CountedLines, DocumentCounter, bag_triples, csr
from .tokenize import tokenize

SEGMENT_RECORDS = 1 << 17  # bulk loads are cut into segments of this many records (bounds peak memory)
MERGE_FANOUT = 4  # merge the newest segments once this many of similar size have piled up
MERGE_MAX = 1 << 22  # postings: segments this big are never merged again (compaction aside)
DENSE_FRACTION = 4  # a term in ≥ 1/4 of the records is added as a dense vector, not scattered (or
# ≥ 1/8, see `_Contributions.dense_fraction`)
SAMPLE_STRIDE = 64  # `_Segment.counts_at` searches among every 64th posting first (1/8 byte a posting)
FEW_SLOTS = 4096  # exact values of up to this many slots are looked up, not scattered
WEIGHTINGS_KEPT = 8  # query shapes whose per-record weighting is kept (see `_weighting`)


def document_fields(record: Record) -> tuple[str, str, str, str]:
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


def _query_terms(text: str) -> list[str]:
    """The distinct terms of the query text, in first-seen order (so explanations read naturally)."""
    return list(dict.fromkeys(tokenize(text)))


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity (a cache key)
class _Segment:
    """Postings of one batch: for key id k, rows indptr[k]:indptr[k+1] of (slots, counts)."""

    indptr: np.ndarray
    slots: np.ndarray
    counts: np.ndarray
    first: int = field(init=False)  # the lowest and highest slot posted here: where a slot's
    last: int = field(init=False)  # postings may be
    sample: np.ndarray | None = field(init=False, repr=False)  # see `_sampled`

    def __post_init__(self) -> None:
        empty = not self.slots.size
        object.__setattr__(self, "first", 0 if empty else int(self.slots.min()))
        object.__setattr__(self, "last", -1 if empty else int(self.slots.max()))
        object.__setattr__(self, "sample", None)

    @property
    def size(self) -> int:
        return int(self.slots.size)

    def postings(self, key: int) -> tuple[np.ndarray, np.ndarray] | None:
        if key + 1 >= self.indptr.size:
            return None
        start, end = self.indptr[key], self.indptr[key + 1]
        return (self.slots[start:end], self.counts[start:end]) if end > start else None

    def counts_at(self, keys: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """tf[i, j] of key i at slot j (0 where absent), all pairs at once. Postings in (key, slot)
        order are in order of key·span + slot (span: past the last slot), so one search among every
        SAMPLE_STRIDE-th such value (`_sampled`) finds the window where a pair can be, and a few
        halving steps find it within its key's part of that window."""
        if not self.slots.size:
            return np.zeros((keys.size, slots.size), dtype=self.counts.dtype)
        known = keys + 1 < self.indptr.size
        start = np.where(known, self.indptr[np.minimum(keys, self.indptr.size - 2)], 0)[:, None]
        end = np.where(known, self.indptr[np.minimum(keys + 1, self.indptr.size - 1)], 0)[:, None]
        target = slots[None, :]
        window = np.searchsorted(self._sampled(), keys[:, None] * (self.last + 1) + target, side="right") - 1
        window = np.maximum(window, 0) * SAMPLE_STRIDE
        below = np.maximum(window, start) - 1  # the last position known < target
        end = np.minimum(window + SAMPLE_STRIDE, end)
        top = self.slots.size - 1
        step = 1 << int((end - below - 1).max(initial=0)).bit_length()
        while step:
            probe = below + step
            ahead = probe < end
            ahead &= self.slots[np.minimum(probe, top)] < target
            below = np.where(ahead, probe, below)
            step >>= 1
        at = np.minimum(below + 1, top)
        return np.where((below + 1 < end) & (self.slots[at] == target), self.counts[at], 0)

    def _sampled(self) -> np.ndarray:
        """key·span + slot of every SAMPLE_STRIDE-th posting (ascending), made at the first lookup."""
        if self.sample is None:
            positions = np.arange(0, self.slots.size, SAMPLE_STRIDE)
            keys = np.searchsorted(self.indptr, positions, side="right") - 1
            object.__setattr__(self, "sample", keys * (self.last + 1) + self.slots[positions])
        return self.sample

    @classmethod
    def build(cls, keys: np.ndarray, slots: np.ndarray, counts: np.ndarray, n_keys: int) -> "_Segment":
        """CSR by key from (key, slot, count) triples; (key, slot) pairs must be unique (slots stay
        ascending per key: `_bm25_at` bisects)."""
        return cls(*csr(keys, slots, counts, n_keys))

    @classmethod
    def merge(cls, segments: Sequence["_Segment"], n_keys: int, keep: np.ndarray) -> "_Segment":
        """One segment holding the postings of `segments` whose slots are still in `keep`."""
        keys = np.concatenate([np.repeat(np.arange(s.indptr.size - 1), np.diff(s.indptr)) for s in segments])
        slots = np.concatenate([s.slots for s in segments])
        counts = np.concatenate([s.counts for s in segments])
        live = keep[slots]
        return cls.build(keys[live], slots[live], counts[live], n_keys)


class _Postings:
    """Postings for one kind of key (terms, or architecture components): a vocabulary, document
    frequencies over live slots, and segments."""

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = {}
        self.doc_freq = np.zeros(0, dtype=np.int64)
        self.segments: list[_Segment] = []

    def export(self) -> tuple[dict[str, int], np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """Vocabulary (the committed keys only), document frequencies and segments, copied where mutable."""
        known = self.doc_freq.size
        vocabulary = {name: key for name, key in self.vocabulary.items() if key < known} \
            if len(self.vocabulary) > known else dict(self.vocabulary)
        return vocabulary, self.doc_freq.copy(), [(s.indptr, s.slots, s.counts) for s in self.segments]

    @classmethod
    def restored(cls, vocabulary: dict[str, int], doc_freq: np.ndarray,
                 segments: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> "_Postings":
        postings = cls()
        postings.vocabulary, postings.doc_freq = vocabulary, np.array(doc_freq, dtype=np.int64)
        postings.segments = [_Segment(*arrays) for arrays in segments]
        return postings

    @property
    def posted(self) -> int:
        """Postings held, over all segments."""
        return sum(segment.size for segment in self.segments)

    def keys_of(self, names: Sequence[str]) -> np.ndarray:
        """Each name's key among the committed postings' (a writer may have named newer ones), -1 for
        a name they do not know."""
        keys = np.fromiter(map(self.vocabulary.get, names, repeat(-1)), dtype=np.int64, count=len(names))
        keys[keys >= self.doc_freq.size] = -1
        return keys

    def prepare(self, per_record: Sequence[Mapping[str, float]]) -> "_Prepared":
        """Postings of a batch with slots 0..k-1, built off the read lock (keys are handed out here;
        readers ignore keys until `commit` makes them known)."""
        return _Prepared.of(_Segment.build(*bag_triples(per_record, self.vocabulary), len(self.vocabulary)))

    def commit(self, prepared: "_Prepared", first_slot: int) -> None:
        """Make a prepared batch visible, its slots starting at `first_slot`."""
        grow = prepared.doc_freq.size - self.doc_freq.size
        if grow > 0:
            self.doc_freq = np.concatenate([self.doc_freq, np.zeros(grow, np.int64)])
        self.doc_freq[: prepared.doc_freq.size] += prepared.doc_freq
        if prepared.segment is not None:
            s = prepared.segment
            self.segments.append(_Segment(s.indptr, s.slots + np.int32(first_slot), s.counts))

    def forget(self, doc_freq: np.ndarray) -> None:
        """Removed records no longer count in document frequencies (`doc_freq`: theirs, per key; keys
        past the committed ones — named by a writer, never posted — hold 0)."""
        n = min(doc_freq.size, self.doc_freq.size)
        self.doc_freq[:n] -= doc_freq[:n]

    def doc_freq_of(self, bags: Iterable[Mapping[str, float]]) -> np.ndarray:
        keys = np.fromiter((self.vocabulary[name] for bag in bags for name in bag), dtype=np.int64)
        return np.bincount(keys, minlength=self.doc_freq.size)

    def lookup(self, key: int) -> Iterator[tuple[_Segment, np.ndarray, np.ndarray]]:
        """(segment, slots, counts) of each segment that posts this key."""
        for segment in self.segments:
            found = segment.postings(key)
            if found is not None:
                yield segment, *found

    def tidied(self, keep: np.ndarray, compact: bool) -> list[_Segment]:
        """The segment list after merging the newest MERGE_FANOUT segments while the newer ones
        together outgrow the eldest of them — tiers, like a binary counter, so many small updates
        leave O(log) segments to visit — but never a segment of MERGE_MAX postings or more: bulk
        segments are final, so no merge rewrites (and doubles in memory) a large part of the pool.
        With `compact`, one segment without the postings of dead slots."""
        n_keys = len(self.vocabulary)
        segments = list(self.segments)
        if compact:
            return [_Segment.merge(segments, n_keys, keep)] if segments else []
        while len(segments) >= MERGE_FANOUT:
            tail = segments[-MERGE_FANOUT:]
            if max(seg.size for seg in tail) >= MERGE_MAX or sum(seg.size for seg in tail[1:]) <= tail[0].size:
                break
            segments[-MERGE_FANOUT:] = [_Segment.merge(tail, n_keys, keep)]
        return segments


@dataclass(frozen=True, slots=True)
class _Prepared:
    segment: _Segment | None  # None when the batch posts nothing
    doc_freq: np.ndarray

    @classmethod
    def of(cls, segment: _Segment) -> "_Prepared":
        return cls(segment if segment.size else None, np.diff(segment.indptr))


@dataclass(frozen=True, slots=True)
class _Batch:
    """Everything about a batch of new records that can be computed before taking the read lock."""

    records: list[Record]
    columns: dict[str, list]
    terms: _Prepared
    components: _Prepared
    ties: dict[str, list[str]]  # code path → ids of the batch's records tied to it


@dataclass(frozen=True, slots=True)
class IndexState:
    """A `LiveIndex` as plain values (see `LiveIndex.export`): per slot its record (a `Record`, a store
    position, or None once removed) and columns; ids → slots; each postings kind as (vocabulary,
    document frequencies, segments as (indptr, slots, counts)); `code` ties; the total document length."""

    records: list[Record | int | None]
    slot_of: dict[str, int]
    columns: dict[str, np.ndarray]
    terms: tuple[dict[str, int], np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    components: tuple[dict[str, int], np.ndarray, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    ties: dict[str, set[str]]
    total_dl: float
    dead_slots: int


class _Contributions:
    """Float32 BM25 contributions, idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)), for the
    approximate first pass of `rank`, kept while the index layout (and so N, n_t and avgdl) stands:
    per (segment, term) for most terms, and as one dense vector over all slots for a term in at least
    1/DENSE_FRACTION of the records (adding a dense vector costs far less than scattering that many
    postings). Least recently used entries go once `budget` bytes are held, each counted with what it
    holds: a term's slots are a view of its segment, or a native-integer copy where the whole layout so
    copied fits (`fits_wide`; at 1M such copies pushed the benchmark's working set past the budget, see
    docs/decisions.md). Used under the index's read lock."""

    def __init__(self, budget: int = 1 << 29) -> None:
        self.budget = budget
        self.layout = -1
        self.parts: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()  # key → (value, bytes held)
        self.held = 0

    def _lookup(self, layout: int, key: tuple) -> Any:
        if layout != self.layout:
            self.parts.clear()
            self.layout, self.held = layout, 0
        found = self.parts.get(key)
        if found is None:
            return None
        self.parts.move_to_end(key)
        return found[0]

    def _keep(self, key: tuple, value: Any, nbytes: int) -> Any:
        self.parts[key] = (value, nbytes)
        self.held += nbytes
        while self.held > self.budget and len(self.parts) > 1:
            _, (_, held) = self.parts.popitem(last=False)
            self.held -= held
        return value

    def sparse(self, layout: int, segment: _Segment, key: int, idf_t: float, norm: np.ndarray,
               wide: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """(slots, contributions) of this term in this segment, or None when it has no postings there.
        With `wide`, the slots are a native-integer copy (`np.add.at` scatters through them 1.3–2×
        faster), else a view of the segment's int32 slots."""
        found = self._lookup(layout, (segment, key))
        if found is not None:
            return found
        postings = segment.postings(key)
        if postings is None:
            return None
        slots, tf = postings
        part = _contribution(idf_t, tf, norm[slots]).astype(np.float32)
        if wide:
            slots = slots.astype(np.intp)
            return self._keep((segment, key), (slots, part), part.nbytes + slots.nbytes)
        return self._keep((segment, key), (slots, part), part.nbytes)

    def fits_wide(self, postings: int) -> bool:
        """Whether every sparse part of this many postings, with native-integer slots (12 bytes a
        posting), would fit in half the budget: then slots are copied wide (say 100k records), else
        (1M) they stay views, so that a query stream's working set is not pushed past the budget
        (docs/decisions.md)."""
        return 12 * postings <= self.budget // 2

    def dense_fraction(self, doc_freq: np.ndarray, n: int) -> int:
        """Terms in at least 1/fraction of the n records are added as dense vectors: 1/8 when the
        vectors of all such terms fit in half the budget, as the sparse parts do beside them
        (`fits_wide`; say 100k records: from a cold cache, scattering a term in 1/8–1/4 of them costs
        more than adding its vector), else 1/4 (1M: the vectors would push the working set past the
        budget, docs/decisions.md)."""
        twice = 2 * DENSE_FRACTION
        fits = 4 * n * int(np.count_nonzero(twice * doc_freq >= n)) <= self.budget // 2
        return twice if fits else DENSE_FRACTION

    def dense(self, layout: int, segments: Sequence[_Segment], key: int, idf_t: float,
              norm: np.ndarray) -> np.ndarray:
        """This term's contribution at every slot (0 where it does not occur)."""
        found = self._lookup(layout, ("dense", key))
        if found is not None:
            return found
        vector = np.zeros(norm.size, dtype=np.float32)
        for segment in segments:  # a slot's postings live in exactly one segment
            postings = segment.postings(key)
            if postings is not None:
                slots, tf = postings
                vector[slots] = _contribution(idf_t, tf, norm[slots])
        return self._keep(("dense", key), vector, vector.nbytes)


def _contribution(idf_t: float, tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """idf(t) · tf_part: one term's BM25 contribution per posting, in float64."""
    return idf_t * T.tf_part(tf.astype(np.float64), norm)


class _Columns:
    """Per-slot numpy columns that grow by doubling."""

    FIELDS = {"alive": bool, "dl": np.float64, "time": np.float64, "importance": np.float64,
              "arch_total": np.float64, "dead_end": bool}

    def __init__(self) -> None:
        self.size = 0
        for name, dtype in self.FIELDS.items():
            setattr(self, name, np.zeros(0, dtype=dtype))

    def grow(self, extra: int) -> np.ndarray:
        start, self.size = self.size, self.size + extra
        capacity = self.alive.size
        if self.size > capacity:
            new_capacity = max(self.size, 2 * capacity, 1024)
            for name in self.FIELDS:
                old = getattr(self, name)
                new = np.zeros(new_capacity, dtype=old.dtype)
                new[:capacity] = old
                setattr(self, name, new)
        return np.arange(start, self.size, dtype=np.int64)

    def view(self, name: str) -> np.ndarray:
        return getattr(self, name)[: self.size]


class LiveIndex:
    """A pool's records, ready to rank; `update` adds, replaces and removes records in place."""

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
        self.version = 0  # one step per update
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

    def records(self) -> list[Record]:
        """Every record, in id order."""
        with self._lock:
            return [self._slot_records[self._slot_of[i]] for i in sorted(self._slot_of)]

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
                batches = [self._prepare(group[i:i + SEGMENT_RECORDS], fetch)
                           for group, fetch in _by_counting(list(latest.values()), counted or {})
                           for i in range(0, len(group), SEGMENT_RECORDS)]
            with self._lock:
                self._remove(gone, *forgotten)
                for batch in batches:
                    self._commit(batch)
                self.version += 1
                self._layout += 1
            self._tidy()

    def export(self) -> "IndexState":
        """What `restore` needs to stand this index up again, copied (segments are immutable, shared)."""
        with self._write_lock, self._lock:
            columns = self._columns
            return IndexState(
                records=list(self._slot_records.items), slot_of=dict(self._slot_of),
                columns={name: columns.view(name).copy() for name in _Columns.FIELDS},
                terms=self._terms.export(), components=self._components.export(),
                ties={path: set(ids) for path, ids in self._ties.items()}, total_dl=self._total_dl,
                dead_slots=self._dead_slots)

    def restore(self, state: "IndexState", store: RecordStore | None) -> None:
        """Replace everything with an exported state whose int records are positions in `store`."""
        columns = _Columns()  # everything built first: a state that does not fit changes nothing
        columns.grow(len(state.records))
        for name in _Columns.FIELDS:
            columns.view(name)[:] = state.columns[name]
        terms, components = _Postings.restored(*state.terms), _Postings.restored(*state.components)
        with self._write_lock, self._lock:
            self._columns = columns
            self._slot_records = RecordList(state.records, store)
            self._slot_of = state.slot_of
            self._terms, self._components = terms, components
            self._documents = DocumentCounter(terms.vocabulary)
            self._ties, self._total_dl, self._dead_slots = state.ties, state.total_dl, state.dead_slots
            self.version += 1
            self._layout += 1

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
        columns["dl"] = np.bincount(slots, weights=counts, minlength=len(records))
        return _Batch(records, columns, _Prepared.of(_Segment(indptr, slots, counts)), components, ties)

    def _remove(self, records: list[Record], term_doc_freq: np.ndarray, component_doc_freq: np.ndarray) -> None:
        if not records:
            return
        slots = [self._slot_of.pop(r.id) for r in records]
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

    # -- ranking ------------------------------------------------------------------------------
    #
    # A ranked query needs every record's score only to find the top few. So `rank` first scores
    # every slot approximately, in float32 (BM25 from cached float32 contributions), with a proven
    # bound on the error, keeps the slots that could be in the top `limit` within that bound, and
    # computes their components and scores exactly (float64, the same arithmetic as the full pass
    # `limit=None` takes, so both agree to the last bit).

    def rank(self, query: RetrievalQuery, *, relevant_only: bool = False,
             min_score: float = 0.0) -> list[ScoredRecord]:
        """SPEC 2.6: best first, exact ties by id, cut at `query.limit`. `relevant_only` keeps only
        records with lexical > 0 or structural > 0 (SPEC 3's gate); `min_score` drops lower scores."""
        with self._lock:
            if query.limit == 0:
                return []
            q = self._resolve(query)
            if query.limit is None:  # every slot is scored exactly: no approximation needed
                slots, bm25 = np.flatnonzero(self._columns.view("alive")), None
            else:
                bm25 = self._approximate(q)
                slots = self._candidates(q, query.limit, relevant_only, bm25)
            exact = self._exact(q, slots, bm25)
            keep = np.ones(slots.size, dtype=bool)
            if relevant_only:
                keep &= (exact["lexical"] > 0) | (exact["structural"] > 0)
            if min_score > 0:
                keep &= exact["score"] >= min_score
            order = self._ordered(exact, np.flatnonzero(keep))
            return self._scored(exact, order[:query.limit], q)

    def score(self, query: RetrievalQuery, record_ids: Iterable[str]) -> list[ScoredRecord]:
        """The scores `rank` would give these records (unknown ids are skipped), in the order given."""
        with self._lock:
            slots = np.array([self._slot_of[i] for i in record_ids if i in self._slot_of], dtype=np.int64)
            if not slots.size:
                return []
            q = self._resolve(query)
            exact = self._exact(q, slots, self._approximate(q))
            return self._scored(exact, list(range(slots.size)), q)

    def _resolve(self, query: RetrievalQuery) -> "_Query":
        terms = _query_terms(query.text)
        found, df = self._terms.keys_of(terms), self._terms.doc_freq
        known = found >= 0
        known[known] = df[found[known]] > 0
        key_array, key_terms = found[known], list(compress(terms, known.tolist()))
        bag = T.component_bag(query.architecture)
        total = float(sum(bag.values()))
        return _Query(
            terms=terms, keys=key_array, key_terms=key_terms, idf=T.idf(len(self._slot_of), df[key_array]).tolist(),
            bag=bag, bag_total=total, now=None if query.now is None else T.epoch_seconds(query.now),
            half_life_days=query.half_life_days,
            weighting=self._weighting(query, bool(terms), total > 0))

    def _per_layout(self) -> dict[Any, Any]:
        """Query caches valid while the layout stands (slots, segments, N and avgdl unchanged)."""
        if self._cache_layout != self._layout:
            self._layout_cache = {}
            self._cache_layout = self._layout
        return self._layout_cache

    def _length_norm(self) -> np.ndarray:
        cache = self._per_layout()
        if "norm" not in cache:
            n = len(self._slot_of)
            avgdl = self._total_dl / n if n else 0.0
            dl = self._columns.view("dl")
            cache["norm"] = T.length_norm(dl, avgdl) if avgdl > 0 else np.full(dl.shape, T.K1)
        return cache["norm"]

    # exact --------------------------------------------------------------------------------------

    def _bm25_at(self, q: "_Query", slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact bm25 of these (sorted, distinct) slots, summed term by term in query order, and which
        query keys each slot's document holds (keys × slots): a few slots are looked up in the postings
        of the segments that may hold them, many are scattered from all postings — the same arithmetic
        either way."""
        norm = self._length_norm()
        matched = np.zeros((q.keys.size, slots.size), dtype=bool)
        if slots.size > FEW_SLOTS:
            bm25, posted_here = np.zeros(self._columns.size), np.zeros(self._columns.size, dtype=bool)
            for row, (key, idf_t) in enumerate(zip(q.keys.tolist(), q.idf)):
                posted_here[:] = False
                for _, posted, tf in self._terms.lookup(key):
                    bm25[posted] += _contribution(idf_t, tf, norm[posted])  # distinct within a segment
                    posted_here[posted] = True
                matched[row] = posted_here[slots]
            return bm25[slots], matched
        bm25 = np.zeros(slots.size)
        idf = np.asarray(q.idf)[:, None]
        for segment in self._terms.segments:  # a slot's postings are all in one segment
            start, end = np.searchsorted(slots, (segment.first, segment.last + 1)).tolist()
            if start == end:
                continue
            inside = slots[start:end]
            tf = segment.counts_at(q.keys, inside).astype(np.float64)
            matched[:, start:end] |= tf > 0
            # term by term (a running sum: `sum` may add pairwise); 0.0 where a term is absent
            bm25[start:end] += np.cumsum(idf * T.tf_part(tf, norm[inside]), axis=0)[-1]
        return bm25, matched

    def _shared_at(self, q: "_Query", slots: np.ndarray) -> np.ndarray:
        """Exact Σ_c min(q_c, r_c) of these slots, component by component in query order, with the
        counts as the postings hold them (float32): few slots from their records, many from postings."""
        if slots.size > FEW_SLOTS:
            return self._shared_everywhere(q, np.float64)[slots]
        shared = np.zeros(slots.size)
        for i, slot in enumerate(slots.tolist()):
            bag, total = T.component_bag(self._slot_records[slot].architecture), 0.0
            for name, q_count in q.bag.items():
                count = bag.get(name)
                if count is not None:
                    total += min(q_count, float(np.float32(count)))
            shared[i] = total
        return shared

    def _shared_everywhere(self, q: "_Query", dtype: type) -> np.ndarray:
        """Σ_c min(q_c, r_c) at every slot, scattered from the postings, component by component in
        query order, in `dtype` (float32 for the approximate pass)."""
        shared = np.zeros(self._columns.size, dtype=dtype)
        parts = self._per_layout().setdefault("components", {})  # (segment, key) → (least count, slots)
        wide = self._contributions.fits_wide(self._components.posted)
        for key, q_count in zip(self._components.keys_of(list(q.bag)).tolist(), q.bag.values()):
            if key < 0:
                continue
            for segment, slots, counts in self._components.lookup(key):
                found = parts.get((segment, key))
                if found is None:  # slots scattered through, as the contributions' (`fits_wide`)
                    found = parts[(segment, key)] = (float(counts.min()), slots.astype(np.intp) if wide else slots)
                floor, slots = found
                if floor >= q_count:  # the common case (a query counts each component once): one scalar
                    np.add.at(shared, slots, dtype(q_count))
                else:
                    np.add.at(shared, slots, np.minimum(counts.astype(dtype, copy=False), dtype(q_count)))
        return shared

    def _exact(self, q: "_Query", slots: np.ndarray, approximate: "_Approximate | None") -> dict[str, Any]:
        """Exact components and scores of these slots. The lexical max is exact too: it is looked up
        among the live slots that can hold it — with an approximation, only those within 2ε of its max."""
        bm25, max_bm25, matched = np.zeros(slots.size), 0.0, np.zeros((0, slots.size), dtype=bool)
        if q.keys.size:
            alive = self._columns.view("alive")
            if approximate is None:
                contenders = np.flatnonzero(alive)
            else:  # the true max's slot has approximate ≥ max·(1 − ε) ≥ (approximate max)·(1 − 2ε)
                contenders = np.flatnonzero(approximate.bm25 >= approximate.top * (1 - 2 * approximate.error))
                contenders = contenders[alive[contenders]]
            both = np.union1d(contenders, slots)
            exact, matched_both = self._bm25_at(q, both)
            at = np.searchsorted(both, slots)
            bm25, max_bm25, matched = exact[at], float(exact.max(initial=0.0)), matched_both[:, at]
        return {**self._components_of(q, slots, bm25, max_bm25), "matched": matched}

    def _components_of(self, q: "_Query", slots: np.ndarray, bm25: np.ndarray, max_bm25: float) -> dict[str, Any]:
        """Each slot's components and score, Σ w'_i·c_i summed term by term in SPEC order (a term
        that does not apply has w' = 0 and value 0, which adds exactly nothing)."""
        columns, w = self._columns, q.weighting
        e_lexical, e_structural, e_recency = (e[slots] for e in w["effective"])
        lexical = T.lexical(bm25, max_bm25)
        score = e_lexical * lexical
        structural = np.zeros(slots.size)
        structural_applies = w["structural_applies"][slots]
        if q.bag_total > 0:
            # Σ q + Σ r − Σ min ≥ Σ q > 0: every Jaccard is defined; records without an
            # architecture (the term does not apply) keep 0.
            shared = self._shared_at(q, slots)
            np.copyto(structural, T.structural(shared, q.bag_total, columns.arch_total[slots]),
                      where=structural_applies)
            score += e_structural * structural
        recency = None
        if q.now is not None:
            # straight from the age (not the approximate pass's base · factor, which over- or
            # underflows when a record lies far in the future of the others, say a year-9999 typo)
            age_days = np.nan_to_num((q.now - columns.time[slots]) / T.SECONDS_PER_DAY)
            recency = np.where(w["recency_applies"][slots], T.decay(age_days, q.half_life_days), 0.0)
            score += e_recency * recency
        score += w["importance"][slots]
        return {"slots": slots, "score": score, "lexical": lexical, "structural": structural,
                "recency": recency, "structural_applies": structural_applies,
                "recency_applies": w["recency_applies"][slots], "classes": w["classes"][slots]}

    # approximate --------------------------------------------------------------------------------

    def _approximate(self, q: "_Query") -> "_Approximate | None":
        """bm25 of every slot in float32 (None when no query term occurs in the pool).

        Each of the n contributions is rounded to float32 once and added once in float32, each step
        off by at most u = 2⁻²⁴ relative on sums of positive values, so (2n + 1)·u bounds the
        relative error; ε is twice that, for safety."""
        if not q.keys.size:
            return None
        norm, n = self._length_norm(), len(self._slot_of)
        dense = self._dense_fraction() * self._terms.doc_freq[q.keys] >= n
        vectors = [self._contributions.dense(self._layout, self._terms.segments, key, idf_t, norm)
                   for key, idf_t, is_dense in zip(q.keys.tolist(), q.idf, dense.tolist()) if is_dense]
        if len(vectors) >= 2:  # the error bound holds in any order of addition: dense terms first
            bm25 = vectors[0] + vectors[1]
        else:
            bm25 = vectors[0].copy() if vectors else np.zeros(self._columns.size, dtype=np.float32)
        for vector in vectors[2:]:
            bm25 += vector
        wide = self._contributions.fits_wide(self._terms.posted)
        for key, idf_t, is_dense in zip(q.keys.tolist(), q.idf, dense.tolist()):
            if is_dense:
                continue
            for segment in self._terms.segments:
                found = self._contributions.sparse(self._layout, segment, key, idf_t, norm, wide)
                if found is not None:
                    np.add.at(bm25, *found)
        top = float(bm25.max() if self._dead().size == 0 else
                    np.max(bm25, where=self._columns.view("alive"), initial=0.0))
        return _Approximate(bm25, top, 2 * (2 * q.keys.size + 1) * 2.0 ** -24)

    def _candidates(self, q: "_Query", limit: int, relevant_only: bool,
                    approximate: "_Approximate | None") -> np.ndarray:
        """Slots that may be among the top `limit` (sorted): every approximate score is within δ of
        the exact one, so a slot 2δ below the limit-th best approximate score cannot be.

        The approximate score is assembled in float32 (half the memory traffic of float64): a few
        roundings of values ≤ 1, each off by at most u = 2⁻²⁴, so 64·u bounds their sum's error, plus
        (2m + 8)·u for the structural term of a query with m components (its shared count is a float32
        sum of m values)."""
        columns, w = self._columns, q.weighting
        f32 = np.float32
        delta = 64 * 2.0 ** -24
        with np.errstate(over="ignore"):  # an infinite factor is handled below
            factor = T.decay_factor(w["t_ref"], q.now, q.half_life_days) if q.now is not None else 0.0
        if q.now is not None and factor < 2.0 ** 64:  # beyond, float32 could overflow: no recency here
            score = w["float32"]["recency_weighted"] * f32(factor)
            order, times = self._by_time()
            future = order[np.searchsorted(times, q.now):]  # recency 1.0, not the decayed value
            score[future] = w["float32"]["recency"][future]
            score += w["float32"]["importance"]
        else:
            score = w["float32"]["importance"].copy()
            if q.now is not None:  # recency ∈ [0, 1] is unknown here: widen the margin by its weight
                delta += float(w["float32"]["recency"].max(initial=0.0))
        if approximate is not None:
            lexical = w["float32"]["lexical"] * approximate.bm25
            lexical *= f32(1.0 / approximate.top)
            score += lexical
            delta += 3 * approximate.error  # a ratio of two values each within ε, times w' ≤ 1
        shared = self._shared_everywhere(q, np.float32) if q.bag_total > 0 else None
        if shared is not None:
            structural = shared / (f32(q.bag_total) + w["float32"]["arch_total"] - shared)
            structural *= w["float32"]["structural"]
            score += structural
            delta += (2 * len(q.bag) + 8) * 2.0 ** -24
        score[self._dead()] = -np.inf
        if relevant_only:
            relevant = (approximate.bm25 > 0) if approximate is not None else np.zeros(columns.size, bool)
            if shared is not None:
                relevant |= shared > 0
            score[~relevant] = -np.inf
        return _top_within(score, limit, 2 * delta)

    def _by_time(self) -> tuple[np.ndarray, np.ndarray]:
        """Timed slots in time order, and their times (per layout)."""
        cache = self._per_layout()
        if "by_time" not in cache:
            time = self._columns.view("time")
            order = np.argsort(time, kind="stable")
            order = order[~np.isnan(time[order])]
            cache["by_time"] = (order, time[order])
        return cache["by_time"]

    def _dense_fraction(self) -> int:
        cache = self._per_layout()
        if "dense_fraction" not in cache:
            cache["dense_fraction"] = self._contributions.dense_fraction(self._terms.doc_freq, len(self._slot_of))
        return cache["dense_fraction"]

    def _dead(self) -> np.ndarray:
        cache = self._per_layout()
        if "dead" not in cache:
            cache["dead"] = np.flatnonzero(~self._columns.view("alive"))
        return cache["dead"]

    def _weighting(self, query: RetrievalQuery, lexical_applies: bool, query_has_architecture: bool) -> dict:
        """What a query's score needs besides its lexical and structural values, per record: the
        effective weights (one row per applicability class), w'·importance and recency's per-record
        base. It depends only on the index layout and the query's shape, so it is kept between queries."""
        weightings = self._per_layout().setdefault("weightings", {})  # query shape → weighting
        key = (lexical_applies, query_has_architecture, query.now is not None, query.weights, query.half_life_days)
        if key in weightings:
            return weightings[key]
        columns = self._columns
        time = columns.view("time")
        has_time = ~np.isnan(time)
        structural_applies = (columns.view("arch_total") > 0) & query_has_architecture
        recency_applies = has_time & (query.now is not None)
        weights = np.asarray(query.weights.as_tuple())
        applies = np.array([[lexical_applies, s, r, True] for s in (False, True) for r in (False, True)])
        table = T.effective_weights(weights, applies)
        classes = structural_applies.astype(np.intp) * 2 + recency_applies
        t_ref = float(time[has_time].max()) if has_time.any() else 0.0
        effective = [table[:, term][classes] for term in range(3)]
        recency_base = np.where(has_time, T.decay_base(np.nan_to_num(time, nan=t_ref), t_ref,
                                                       query.half_life_days), 0.0)
        weighting = {
            "table": table, "classes": classes, "t_ref": t_ref,
            "structural_applies": structural_applies, "recency_applies": recency_applies,
            "effective": effective, "importance": table[:, 3][classes] * columns.view("importance"),
        }
        weighting["float32"] = {  # the same, rounded, for `_candidates`
            name: np.asarray(values, dtype=np.float32) for name, values in (
                ("lexical", effective[0]), ("structural", effective[1]), ("recency", effective[2]),
                ("importance", weighting["importance"]), ("recency_weighted", effective[2] * recency_base),
                ("arch_total", columns.view("arch_total")))}
        if len(weightings) >= WEIGHTINGS_KEPT:  # a handful of query shapes alternate (with or
            weightings.pop(next(iter(weightings)))  # without architecture, …): keep them all
        weightings[key] = weighting
        return weighting

    def _ordered(self, exact: Mapping[str, Any], rows: np.ndarray) -> list[int]:
        """Rows by score descending, then record id ascending."""
        records, slots, score = self._slot_records, exact["slots"], exact["score"]
        return sorted(rows.tolist(), key=lambda i: (-score[i], records[slots[i]].id))

    def _scored(self, exact: Mapping[str, Any], rows: list[int], q: "_Query") -> list[ScoredRecord]:
        """The results of these rows, their values taken out of numpy once for all of them."""
        if not rows:
            return []
        at = np.asarray(rows)
        slots = exact["slots"][at]
        score, lexical, structural = (exact[name][at].tolist() for name in ("score", "lexical", "structural"))
        recency = exact["recency"][at].tolist() if exact["recency"] is not None else [None] * at.size
        structural_applies = exact["structural_applies"][at].tolist()
        recency_applies = exact["recency_applies"][at].tolist()
        weights = q.weighting["table"][exact["classes"][at]].tolist()
        matched = exact["matched"][:, at].T.tolist()
        importance, dead_end = self._columns.importance[slots].tolist(), self._columns.dead_end[slots].tolist()
        query_components = set(q.bag)
        results = []
        for i, slot in enumerate(slots.tolist()):
            record = self._slot_records[slot]
            components = ScoreComponents(
                lexical=lexical[i] if q.terms else None,
                structural=structural[i] if structural_applies[i] else None,
                recency=recency[i] if recency_applies[i] else None,
                importance=importance[i],
                weights=dict(zip(TERMS, weights[i])),
                matched_terms=tuple(compress(q.key_terms, matched[i])),
                shared_components=tuple(sorted(query_components.intersection(T.component_bag(record.architecture)))),
            )
            results.append(ScoredRecord(record, score[i], components, dead_end=dead_end[i]))
        return results


@dataclass(frozen=True, slots=True)
class _Query:
    """A query resolved against the index: its terms, the keys, terms and idf of those the pool has, its
    architecture bag, `now` in epoch seconds, and its per-record weighting."""

    terms: list[str]
    keys: np.ndarray
    key_terms: list[str]  # the term of each key
    idf: list[float]
    bag: dict[str, float]
    bag_total: float
    now: float | None
    half_life_days: float
    weighting: dict


@dataclass(frozen=True, slots=True)
class _Approximate:
    """Every slot's bm25 in float32, within a relative `error` of the exact value; `top` is the
    largest over live slots."""

    bm25: np.ndarray
    top: float
    error: float


def _top_within(score: np.ndarray, limit: int, margin: float, blocks: int = 1024) -> np.ndarray:
    """Sorted indices whose score is within `margin` of the limit-th best finite score, or above it
    (all finite ones when there are at most `limit`).

    The limit-th best is at least the limit-th best of block maxima (limit blocks each hold a value
    that high), so one cheap pass over block maxima narrows the search before the exact partition."""
    n_blocks = max(limit, blocks)
    if score.size > 4 * n_blocks:
        floor = np.partition(np.maximum.reduceat(score, _block_starts(score.size, n_blocks)),
                             n_blocks - limit)[n_blocks - limit]
        pool = np.flatnonzero(score >= floor - margin if floor > -np.inf else score > -np.inf)
    else:
        pool = np.flatnonzero(score > -np.inf)
    if pool.size <= limit:
        return pool
    values = score[pool]
    kth = np.partition(values, pool.size - limit)[pool.size - limit]
    return pool[values >= kth - margin]


@lru_cache(maxsize=8)
def _block_starts(size: int, blocks: int) -> np.ndarray:
    """Where each of `blocks` nearly equal blocks of `size` values starts (per pool size, kept)."""
    starts = np.linspace(0, size, blocks, endpoint=False).astype(np.int64)
    starts.flags.writeable = False
    return starts
