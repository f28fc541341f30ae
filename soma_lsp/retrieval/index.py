"""The live index: a pool's records as columns and postings, updated in place, ranked in numpy.

Each record lives in a slot. Per-slot columns (document length, time, importance, architecture size)
are numpy arrays; terms and components have postings stored in immutable *segments* (CSR arrays, one
per update batch, small ones merged as they pile up). Removing a record clears its slot's `alive` bit
and its document frequencies; its postings stay until a compaction drops them. So an update costs what
its records cost, and a query costs the postings of its terms plus a few passes of vector arithmetic.

One lock makes `update` atomic for queries: a query sees the pool before or after a batch, never half.
Writers tokenize and build a batch's postings before taking it, so queries wait only for the commit.
What a query can reuse — BM25 contributions per (segment, term), per-record weightings per query
shape, length norms — is kept per *layout* (a counter that moves with every update, merge or
compaction) and dropped when it moves.
"""

from __future__ import annotations

import threading
from array import array
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import count, filterfalse
from typing import Any

import numpy as np

from ..gcpause import collector_paused
from ..records import Record
from . import terms as T
from .model import TERMS, RetrievalQuery, ScoreComponents, ScoredRecord
from .tokenize import document_terms, tokenize

SEGMENT_RECORDS = 1 << 17  # bulk loads are cut into segments of this many records (bounds peak memory)
MERGE_FANOUT = 4  # merge the newest segments once this many of similar size have piled up
MERGE_MAX = 1 << 22  # postings: segments this big are never merged again (compaction aside)
WEIGHTINGS_KEPT = 8  # query shapes whose per-record weighting is kept (see `_weighting`)


def document_fields(record: Record) -> tuple[str, str, str, str]:
    return (record.name, record.headline or "", record.notes or "", record.details or "")


def term_counts(record: Record) -> Counter:
    """The record's document as term → tf: name ×3, headline ×2, notes and details once (SPEC 2.2)."""
    name, headline, notes, details = document_fields(record)
    return Counter(document_terms(name) * 3 + document_terms(headline) * 2 + document_terms(notes)
                   + document_terms(details))


@lru_cache(maxsize=4096)
def _document_terms(record: Record) -> frozenset[str]:
    return frozenset(t for text in document_fields(record) for t in document_terms(text))


def _query_terms(text: str) -> list[str]:
    """The distinct terms of the query text, in first-seen order (so explanations read naturally)."""
    return list(dict.fromkeys(tokenize(text)))


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity (a cache key)
class _Segment:
    """Postings of one batch: for key id k, rows indptr[k]:indptr[k+1] of (slots, counts)."""

    indptr: np.ndarray
    slots: np.ndarray
    counts: np.ndarray

    @property
    def size(self) -> int:
        return int(self.slots.size)

    def postings(self, key: int) -> tuple[np.ndarray, np.ndarray] | None:
        if key + 1 >= self.indptr.size:
            return None
        start, end = self.indptr[key], self.indptr[key + 1]
        return (self.slots[start:end], self.counts[start:end]) if end > start else None

    @classmethod
    def build(cls, keys: np.ndarray, slots: np.ndarray, counts: np.ndarray, n_keys: int) -> "_Segment":
        """CSR by key from (key, slot, count) triples; (key, slot) pairs must be unique."""
        order = np.argsort(keys)
        indptr = np.zeros(n_keys + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=n_keys), out=indptr[1:])
        return cls(indptr, slots[order].astype(np.int32), counts[order].astype(np.float32))

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

    def key(self, name: str) -> int | None:
        """The key of a name the committed postings know (a writer may have named newer ones)."""
        key = self.vocabulary.get(name)
        return key if key is not None and key < self.doc_freq.size else None

    def prepare(self, per_record: Sequence[Mapping[str, float]]) -> "_Prepared":
        """Postings of a batch with slots 0..k-1, built off the read lock (keys are handed out here;
        readers ignore keys until `commit` makes them known)."""
        vocabulary = self.vocabulary
        keys, counts = array("q"), array("d")  # packed machine values: 8 bytes each, not a Python object
        lengths = []
        for bag in per_record:
            vocabulary.update(zip(filterfalse(vocabulary.__contains__, bag), count(len(vocabulary))))
            keys.extend(map(vocabulary.__getitem__, bag))
            counts.extend(bag.values())
            lengths.append(len(bag))
        n_keys = len(vocabulary)
        key_array = np.frombuffer(keys, dtype=np.int64)
        slots = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        segment = _Segment.build(key_array, slots, np.frombuffer(counts, dtype=np.float64), n_keys) if keys else None
        return _Prepared(segment, np.bincount(key_array, minlength=n_keys))

    def commit(self, prepared: "_Prepared", first_slot: int) -> None:
        """Make a prepared batch visible, its slots starting at `first_slot`."""
        grow = prepared.doc_freq.size - self.doc_freq.size
        if grow > 0:
            self.doc_freq = np.concatenate([self.doc_freq, np.zeros(grow, np.int64)])
        self.doc_freq[: prepared.doc_freq.size] += prepared.doc_freq
        if prepared.segment is not None:
            s = prepared.segment
            self.segments.append(_Segment(s.indptr, s.slots + np.int32(first_slot), s.counts))

    def forget(self, bags: Iterable[Mapping[str, float]]) -> None:
        """Removed records no longer count in document frequencies."""
        for bag in bags:
            for name in bag:
                self.doc_freq[self.vocabulary[name]] -= 1

    def lookup(self, key: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for segment in self.segments:
            found = segment.postings(key)
            if found is not None:
                yield found

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
    segment: _Segment | None
    doc_freq: np.ndarray


@dataclass(frozen=True, slots=True)
class _Batch:
    """Everything about a batch of new records that can be computed before taking the read lock."""

    records: list[Record]
    columns: dict[str, list]
    terms: _Prepared
    components: _Prepared


class _Contributions:
    """A query term's BM25 contribution per posting, idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)),
    kept per (segment, term) while the index layout (and so N, n_t and avgdl) stands: a term asked
    again costs one scatter-add instead of gathering every posting's length norm. Least recently
    used pairs go once `budget` postings are held. Used under the index's read lock."""

    def __init__(self, budget: int = 1 << 25) -> None:
        self.budget = budget
        self.layout = -1
        self.parts: OrderedDict[tuple[_Segment, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.held = 0

    def get(self, layout: int, segment: _Segment, key: int, idf_t: float,
            norm: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(slots, contributions) of this term in this segment, or None when it has no postings there."""
        if layout != self.layout:
            self.parts.clear()
            self.layout, self.held = layout, 0
        found = self.parts.get((segment, key))
        if found is not None:
            self.parts.move_to_end((segment, key))
            return found
        postings = segment.postings(key)
        if postings is None:
            return None
        slots, tf = postings
        found = self.parts[(segment, key)] = (slots, idf_t * T.tf_part(tf.astype(np.float64), norm[slots]))
        self.held += slots.size
        while self.held > self.budget:
            self.held -= self.parts.popitem(last=False)[1][0].size
        return found


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
        self._slot_records: list[Record | None] = []
        self._slot_of: dict[str, int] = {}
        self._terms = _Postings()
        self._components = _Postings()
        self._ties: dict[str, set[str]] = {}
        self._total_dl = 0.0
        self._dead_slots = 0
        self._norm_cache: tuple[int, np.ndarray] | None = None
        self._weightings: dict[tuple, dict] = {}  # query shape → `_weighting` result, for one layout
        self._weightings_layout = -1
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

    def update(self, add: Iterable[Record] = (), remove: Iterable[str] = ()) -> None:
        """Remove the `remove` ids, then add `add` (a present id is replaced), as one atomic step.

        The costly part (tokenizing, postings) runs before the read lock is taken, so queries keep
        being answered from the previous state meanwhile; writers queue on their own lock.
        """
        with self._write_lock:
            latest = {r.id: r for r in add}  # within a batch, the last record of an id wins
            gone = [self._slot_records[self._slot_of[i]]
                    for i in dict.fromkeys([*remove, *latest]) if i in self._slot_of]
            with collector_paused():
                forgotten = ([term_counts(r) for r in gone], [T.component_bag(r.architecture) for r in gone])
                new = list(latest.values())
                batches = [self._prepare(new[i:i + SEGMENT_RECORDS]) for i in range(0, len(new), SEGMENT_RECORDS)]
            with self._lock:
                self._remove(gone, *forgotten)
                for batch in batches:
                    self._commit(batch)
                self._norm_cache = None
                self.version += 1
                self._layout += 1
            self._tidy()

    def _prepare(self, records: list[Record]) -> _Batch:
        term_bags = [term_counts(r) for r in records]
        component_bags = [T.component_bag(r.architecture) for r in records]
        columns = {
            "dl": [bag.total() for bag in term_bags],
            "time": [T.epoch_seconds(r.time) if r.time else np.nan for r in records],
            "importance": [T.importance(r) for r in records],
            "arch_total": [sum(bag.values()) for bag in component_bags],
            "dead_end": [T.is_dead_end(r) for r in records],
        }
        return _Batch(records, columns, self._terms.prepare(term_bags), self._components.prepare(component_bags))

    def _remove(self, records: list[Record], term_bags: list[Counter], component_bags: list[dict]) -> None:
        if not records:
            return
        slots = [self._slot_of.pop(r.id) for r in records]
        self._terms.forget(term_bags)
        self._components.forget(component_bags)
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
        for record in batch.records:
            for tie in record.code:
                self._ties.setdefault(tie.path, set()).add(record.id)
        columns = self._columns
        columns.alive[slots] = True
        for name, values in batch.columns.items():
            getattr(columns, name)[slots] = values
        self._total_dl += float(sum(batch.columns["dl"]))
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
            self._norm_cache = None  # slots may be renumbered; cached contributions name old segments
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
        self._slot_records = [self._slot_records[s] for s in live_slots.tolist()]
        self._slot_of = {r.id: i for i, r in enumerate(self._slot_records)}
        for postings in (self._terms, self._components):
            postings.segments = [_Segment(s.indptr, new_of_old[s.slots].astype(np.int32), s.counts)
                                 for s in postings.segments]
        self._dead_slots = 0

    # -- ranking ------------------------------------------------------------------------------

    def rank(self, query: RetrievalQuery, *, relevant_only: bool = False,
             min_score: float = 0.0) -> list[ScoredRecord]:
        """SPEC 2.6: best first, exact ties by id, cut at `query.limit`. `relevant_only` keeps only
        records with lexical > 0 or structural > 0 (SPEC 3's gate); `min_score` drops lower scores."""
        with self._lock:
            columns = self._scores(query)
            score = columns["score"]
            keep = self._columns.view("alive").copy()
            if relevant_only:
                keep &= (columns["lexical"] > 0) | (columns["structural"] > 0)
            if min_score > 0:
                keep &= score >= min_score
            slots = self._top(score, np.flatnonzero(keep), query.limit)
            return [self._scored(slot, columns, query) for slot in slots]

    def score(self, query: RetrievalQuery, record_ids: Iterable[str]) -> list[ScoredRecord]:
        """The scores `rank` would give these records (unknown ids are skipped), in the order given."""
        with self._lock:
            slots = [self._slot_of[i] for i in record_ids if i in self._slot_of]
            if not slots:
                return []
            columns = self._scores(query)
            return [self._scored(slot, columns, query) for slot in slots]

    def _length_norm(self) -> np.ndarray:
        n = len(self._slot_of)
        if self._norm_cache is None or self._norm_cache[0] != self._layout:
            avgdl = self._total_dl / n if n else 0.0
            dl = self._columns.view("dl")
            norm = T.length_norm(dl, avgdl) if avgdl > 0 else np.full(dl.shape, T.K1)
            self._norm_cache = (self._layout, norm)
        return self._norm_cache[1]

    def _bm25(self, query_terms: Sequence[str]) -> np.ndarray:
        n = len(self._slot_of)
        norm = self._length_norm()
        bm25 = np.zeros(self._columns.size)
        for term in query_terms:
            key = self._terms.key(term)
            if key is None or self._terms.doc_freq[key] == 0:
                continue
            idf_t = T.idf(n, self._terms.doc_freq[key])
            for segment in self._terms.segments:
                found = self._contributions.get(self._layout, segment, key, idf_t, norm)
                if found is not None:
                    np.add.at(bm25, *found)  # slots are distinct within a segment's postings
        return bm25

    def _shared_components(self, query_bag: Mapping[str, float]) -> np.ndarray:
        shared = np.zeros(self._columns.size)
        for name, q_count in query_bag.items():
            key = self._components.key(name)
            if key is None:
                continue
            for slots, counts in self._components.lookup(key):
                shared[slots] += np.minimum(q_count, counts.astype(np.float64))
        return shared

    def _weighting(self, query: RetrievalQuery, lexical_applies: bool, query_has_architecture: bool) -> dict:
        """What a query's score needs besides its lexical and structural values, per record: the
        effective weights (one row per applicability class), w'·importance and recency's per-record
        base. It depends only on the index layout and the query's shape, so it is kept between queries."""
        if self._weightings_layout != self._layout:
            self._weightings.clear()
            self._weightings_layout = self._layout
        key = (lexical_applies, query_has_architecture, query.now is not None, query.weights, query.half_life_days)
        if key in self._weightings:
            return self._weightings[key]
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
        weighting = {
            "table": table, "classes": classes, "t_ref": t_ref,
            "structural_applies": structural_applies, "recency_applies": recency_applies,
            "effective": [table[:, term][classes] for term in range(3)],
            "importance": table[:, 3][classes] * columns.view("importance"),
            "recency_base": np.where(has_time, T.decay_base(np.nan_to_num(time, nan=t_ref), t_ref,
                                                            query.half_life_days), 0.0),
        }
        if len(self._weightings) >= WEIGHTINGS_KEPT:  # a handful of query shapes alternate (with or
            self._weightings.pop(next(iter(self._weightings)))  # without architecture, …): keep them all
        self._weightings[key] = weighting
        return weighting

    def _scores(self, query: RetrievalQuery) -> dict[str, Any]:
        """Every slot's components and score for this query (dead slots hold garbage).

        The score is the spec's Σ w'_i·c_i, summed term by term in SPEC order; a term that does not
        apply to a record has w' = 0 and value 0 there, which adds exactly nothing."""
        columns = self._columns
        query_terms = _query_terms(query.text)
        query_bag = T.component_bag(query.architecture)
        query_total = float(sum(query_bag.values()))
        lexical_applies = bool(query_terms)
        w = self._weighting(query, lexical_applies, query_total > 0)
        e_lexical, e_structural, e_recency = w["effective"]

        bm25 = self._bm25(query_terms)
        lexical = T.lexical(bm25, float(np.max(bm25, where=columns.view("alive"), initial=0.0)))
        score = e_lexical * lexical

        structural = np.zeros(columns.size)
        if query_total > 0:
            shared = self._shared_components(query_bag)
            # Σ q + Σ r − Σ min ≥ Σ q > 0: every record's Jaccard is defined; those without an
            # architecture (the term does not apply) keep 0.
            np.copyto(structural, T.structural(shared, query_total, columns.view("arch_total")),
                      where=w["structural_applies"])
            score += e_structural * structural

        recency = None
        if query.now is not None:
            now = T.epoch_seconds(query.now)
            recency = w["recency_base"] * T.decay_factor(w["t_ref"], now, query.half_life_days)
            np.copyto(recency, 1.0, where=columns.view("time") >= now)  # from the future: 1.0
            score += e_recency * recency
        score += w["importance"]
        return {"score": score, "lexical": lexical, "structural": structural, "recency": recency,
                "lexical_applies": lexical_applies, "query_terms": query_terms, "query_bag": query_bag, **w}

    def _top(self, score: np.ndarray, candidates: np.ndarray, limit: int | None) -> list[int]:
        """Candidate slots by score descending, then id ascending, the first `limit` of them."""
        if limit is not None and candidates.size > limit:
            if limit == 0:
                return []
            kth = np.partition(score[candidates], candidates.size - limit)[candidates.size - limit]
            candidates = candidates[score[candidates] >= kth]
        records = self._slot_records
        ordered = sorted(zip((-score[candidates]).tolist(), candidates.tolist()),
                         key=lambda pair: (pair[0], records[pair[1]].id))
        return [slot for _, slot in (ordered if limit is None else ordered[:limit])]

    def _scored(self, slot: int, columns: Mapping, query: RetrievalQuery) -> ScoredRecord:
        record = self._slot_records[slot]
        effective = columns["table"][columns["classes"][slot]]
        structural_applies = bool(columns["structural_applies"][slot])
        document = _document_terms(record)
        record_bag = T.component_bag(record.architecture)
        components = ScoreComponents(
            lexical=float(columns["lexical"][slot]) if columns["lexical_applies"] else None,
            structural=float(columns["structural"][slot]) if structural_applies else None,
            recency=float(columns["recency"][slot]) if columns["recency_applies"][slot] else None,
            importance=float(self._columns.importance[slot]),
            weights=dict(zip(TERMS, effective.tolist())),
            matched_terms=tuple(t for t in columns["query_terms"] if t in document),
            shared_components=tuple(sorted(set(columns["query_bag"]) & set(record_bag))),
        )
        return ScoredRecord(record, float(columns["score"][slot]), components,
                            dead_end=bool(self._columns.dead_end[slot]))
