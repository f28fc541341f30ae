"""CSR postings: for each kind of key (terms, architecture components) a vocabulary, document
frequencies over live slots, and immutable segments of (slot, count) rows by key.

A batch of records becomes one segment (`_Postings.prepare` off the read lock, `commit` under it).
Removal leaves a dead slot's postings in place (only document frequencies change) until a compaction
drops them; segments pile up and are merged in tiers (`_Postings.tidied`), so a query visits O(log)
of them. Segments are compared and hashed by identity: the contribution cache keys on them.

Looking up a few slots' counts (`_Segment.counts_at`, for the exact step) needs no scatter of whole
postings: for all (term, slot) pairs at once, one `searchsorted` among every 64th posting's
key·span + slot (`SAMPLE_STRIDE`), which is ascending over a whole segment, then a vectorised binary
search within that window.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from ..documents import bag_triples, csr, kept_per_run
from . import tuning


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
        halving steps find it within its key's part of that window. For a few keys (a short query),
        one `searchsorted` per key among its own postings costs less (17 against 56 µs for 3 keys at
        100k records: the window search is a dozen numpy calls whatever the number of keys)."""
        if not self.slots.size:
            return np.zeros((keys.size, slots.size), dtype=self.counts.dtype)
        if keys.size <= tuning.KEYS_ONE_BY_ONE:
            return self._counts_key_by_key(keys, slots)
        known = keys + 1 < self.indptr.size
        start = np.where(known, self.indptr[np.minimum(keys, self.indptr.size - 2)], 0)[:, None]
        end = np.where(known, self.indptr[np.minimum(keys + 1, self.indptr.size - 1)], 0)[:, None]
        target = slots[None, :]
        window = np.searchsorted(self._sampled(), keys[:, None] * (self.last + 1) + target, side="right") - 1
        window = np.maximum(window, 0) * tuning.SAMPLE_STRIDE
        below = np.maximum(window, start) - 1  # the last position known < target
        end = np.minimum(window + tuning.SAMPLE_STRIDE, end)
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

    def _counts_key_by_key(self, keys: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """`counts_at`, searching each key's postings (ascending slots) on their own; the slots in the
        postings' integer type (else `searchsorted` converts the whole postings at every call: 20 µs
        for a common term at 100k records, where the search itself takes 1)."""
        found = np.zeros((keys.size, slots.size), dtype=self.counts.dtype)
        slots = slots.astype(self.slots.dtype, copy=False)
        for row, key in enumerate(keys.tolist()):
            if key + 1 >= self.indptr.size:
                continue
            start, end = self.indptr[key:key + 2].tolist()
            if start == end:
                continue
            posted = self.slots[start:end]
            at = np.minimum(np.searchsorted(posted, slots), end - start - 1)
            found[row] = np.where(posted[at] == slots, self.counts[start:end][at], 0)
        return found

    def _sampled(self) -> np.ndarray:
        """key·span + slot of every SAMPLE_STRIDE-th posting (ascending), made at the first lookup."""
        if self.sample is None:
            # key k holds the samples j with indptr[k] ≤ j·stride < indptr[k + 1]: ⌈indptr[k + 1]/stride⌉ −
            # ⌈indptr[k]/stride⌉ of them (a repeat, not a search per sample: 3× less at 1M's first query)
            stride = tuning.SAMPLE_STRIDE
            per_key = np.diff(-(-self.indptr // stride))
            keys = np.repeat(np.arange(per_key.size, dtype=np.int64), per_key)
            object.__setattr__(self, "sample", keys * (self.last + 1) + self.slots[::stride])
        return self.sample

    @classmethod
    def build(cls, keys: np.ndarray, slots: np.ndarray, counts: np.ndarray, n_keys: int) -> "_Segment":
        """CSR by key from (key, slot, count) triples; (key, slot) pairs must be unique (slots stay
        ascending per key: `_bm25_at` bisects)."""
        return cls(*csr(keys, slots, counts, n_keys))

    @classmethod
    def merge(cls, segments: Sequence["_Segment"], n_keys: int, keep: np.ndarray) -> "_Segment":
        """One segment holding the postings of `segments` whose slots are still in `keep`: each key's
        postings of the first segment, then of the next, … (so slots stay ascending per key). Placed
        one segment at a time into the result (a counting sort), never all of them as (key, slot,
        count) triples at once: merging four 20k-record segments that way took a transient 160 MB,
        the peak of a 100k-file first load."""
        live = [keep[s.slots] for s in segments]
        kept_per_key = [kept_per_run(s.indptr, kept) for s, kept in zip(segments, live)]
        sizes = np.zeros(n_keys, dtype=np.int64)
        for per_key in kept_per_key:
            sizes[:per_key.size] += per_key
        indptr = np.zeros(n_keys + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        slots, counts = np.empty(indptr[-1], dtype=np.int32), np.empty(indptr[-1], dtype=np.float32)
        cursor = indptr[:-1].copy()
        for s, kept, per_key in zip(segments, live, kept_per_key):
            # a key's kept postings here are one run (postings are in key order): each run moves by
            # the distance from where it starts among the kept to where the key's cursor stands
            at = np.arange(int(per_key.sum()), dtype=np.int64)
            at += np.repeat(cursor[:per_key.size] - (np.cumsum(per_key) - per_key), per_key)
            slots[at], counts[at] = s.slots[kept], s.counts[kept]
            cursor[:per_key.size] += per_key
        return cls(indptr, slots, counts)


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
        fanout = tuning.MERGE_FANOUT
        while len(segments) >= fanout:
            tail = segments[-fanout:]
            if max(seg.size for seg in tail) >= tuning.MERGE_MAX or sum(seg.size for seg in tail[1:]) <= tail[0].size:
                break
            segments[-fanout:] = [_Segment.merge(tail, n_keys, keep)]
        return segments


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A batch's postings (slots from 0) and document frequencies, made before the commit."""

    segment: _Segment | None  # None when the batch posts nothing
    doc_freq: np.ndarray

    @classmethod
    def of(cls, segment: _Segment) -> "_Prepared":
        return cls(segment if segment.size else None, np.diff(segment.indptr))
