"""The contribution cache: float32 BM25 contributions the approximate step reuses between queries.

Memory for speed, bounded. The cache holds at most 512 MiB (`budget`; least recently used first out;
dropped whenever the index layout moves). A pool of 1M records with a varied query stream fills it;
small pools never come close. What a query caches is kept small where it must be: a term's float32
contributions, with its slots as a view of the segment's int32 ones.

Native-integer slot copies scatter 1.3–2× faster (`np.add.at` converts int32 indices on every call),
but at 1M they — and cached per-component minima — grew the working set of the benchmark's 50-query
cycle past the budget, and an LRU cache under a cyclic stream larger than itself misses every time
(40-term full rank went from ~0.8× to 1.4–1.55× bm25s). So slots are copied wide only when *every*
posting of the layout, copied so, would fit in half the budget (12 bytes a posting: 100k records, not
1M), for term contributions and for components alike (`fits_wide`). Components keep their least count
per segment (a float), enough to add one scalar in the common case.

The dense-term rule is the same: terms are added as dense vectors (one float32 per slot) from ≥ 1/8 of
the records when the vectors of all such terms fit in half the budget (100k: 302 terms, 121 MB of
256), else from ≥ 1/4 (`dense_fraction`). From a cold cache, scattering a term in 1/8–1/4 of 100k
records cost more than adding its vector (−5 to −9% on the 40-term queries there); at 1M, 1/8 pushed
the working set past the budget (2.4× slower). Dense components were tried the same way and were
slower (not kept).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import terms as T
from .segments import _Segment
from . import tuning


class _Contributions:
    """Float32 BM25 contributions, idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)), for the
    approximate first pass of `rank`, kept while the index layout (and so N, n_t and avgdl) stands:
    per (segment, term) for most terms, and as one dense vector over all slots for a term in at least
    1/DENSE_FRACTION of the records (adding a dense vector costs far less than scattering that many
    postings). Least recently used entries go once `budget` bytes are held, each counted with what it
    holds: a term's slots are a view of its segment, or a native-integer copy where the whole layout so
    copied fits (`fits_wide`; at 1M such copies pushed the benchmark's working set past the budget, see
    above). Used under the index's read lock."""

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

    def holding(self, layout: int) -> int:
        """Bytes held for this layout (an older layout's parts go at the next look-up)."""
        return self.held if layout == self.layout else 0

    def sparse(self, layout: int, segment: _Segment, key: int, idf_t: float, norm32: np.ndarray,
               wide: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """(slots, contributions) of this term in this segment, or None when it has no postings there
        (`norm32`: the length norms in float32, see `_approximate_contribution`). With `wide`, the
        slots are a native-integer copy (`np.add.at` scatters through them 1.3–2× faster), else a view
        of the segment's int32 slots."""
        found = self._lookup(layout, (segment, key))
        if found is not None:
            return found
        postings = segment.postings(key)
        if postings is None:
            return None
        slots, tf = postings
        part = _approximate_contribution(idf_t, tf, norm32, slots)
        if wide:
            slots = slots.astype(np.intp)
            return self._keep((segment, key), (slots, part), part.nbytes + slots.nbytes)
        return self._keep((segment, key), (slots, part), part.nbytes)

    def fits_wide(self, postings: int) -> bool:
        """Whether every sparse part of this many postings, with native-integer slots (12 bytes a
        posting), would fit in half the budget: then slots are copied wide (say 100k records), else
        (1M) they stay views, so that a query stream's working set is not pushed past the budget
        (see above)."""
        return 12 * postings <= self.budget // 2

    def dense_fraction(self, doc_freq: np.ndarray, n: int) -> int:
        """Terms in at least 1/fraction of the n records are added as dense vectors: 1/8 when the
        vectors of all such terms fit in half the budget, as the sparse parts do beside them
        (`fits_wide`; say 100k records: from a cold cache, scattering a term in 1/8–1/4 of them costs
        more than adding its vector), else 1/4 (1M: the vectors would push the working set past the
        budget, see above)."""
        fraction = tuning.DENSE_FRACTION
        twice = 2 * fraction
        fits = 4 * n * int(np.count_nonzero(twice * doc_freq >= n)) <= self.budget // 2
        return twice if fits else fraction

    def dense(self, layout: int, segments: Sequence[_Segment], key: int, idf_t: float,
              norm32: np.ndarray) -> np.ndarray:
        """This term's contribution at every slot (0 where it does not occur)."""
        found = self._lookup(layout, ("dense", key))
        if found is not None:
            return found
        vector = np.zeros(norm32.size, dtype=np.float32)
        for segment in segments:  # a slot's postings live in exactly one segment
            postings = segment.postings(key)
            if postings is not None:
                slots, tf = postings
                vector[slots] = _approximate_contribution(idf_t, tf, norm32, slots)
        return self._keep(("dense", key), vector, vector.nbytes)

    def counts(self, layout: int, segments: Sequence[_Segment], key: int, size: int) -> np.ndarray | None:
        """This term's count at every slot as a byte (0 where it does not occur), or None when a
        count is not a whole number below 256: for a dense term (one whose contributions are a
        vector, `dense`), the exact step's few slots read their counts here, one gather, where a
        binary search of each slot in the term's postings (cold, up to a third of a megabyte at
        100k records) cost 10–15 µs a term. A quarter of the dense vector's bytes."""
        found = self._lookup(layout, ("counts", key))
        if found is not None:
            return found[0]
        vector: np.ndarray | None = np.zeros(size, dtype=np.uint8)
        for segment in segments:  # a slot's postings live in exactly one segment
            postings = segment.postings(key)
            if postings is not None:
                slots, tf = postings
                if tf.max() >= 256 or not np.array_equal(tf, np.floor(tf)):
                    vector = None
                    break
                vector[slots] = tf
        return self._keep(("counts", key), (vector,), 0 if vector is None else vector.nbytes)[0]


def _contribution(idf_t: float, tf: np.ndarray, norm: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """idf(t) · tf_part: one term's BM25 contribution at each posting (its count `tf`, its slot's
    length norm), in float64 — the exact step's arithmetic. The norms are gathered with `take`:
    indexing with the segments' int32 slots converts them first, and took as long as the arithmetic
    (≈ 40% more than `take` for a 30k-posting term)."""
    return np.multiply(idf_t, T.tf_part(tf.astype(np.float64), norm.take(slots)))


#: How far (relative) `_approximate_contribution` may be from `_contribution`, in units of float32's
#: roundoff u = 2⁻²⁴: five roundings, three in the numerator and two in the denominator of the
#: quotient, give (1 + u)³ / (1 − u)² − 1 < 5.0001·u; the float64 value itself is a few 2⁻⁵³ off
#: the real one. 6 covers both.
APPROXIMATE_CONTRIBUTION_ULPS = 6


def _approximate_contribution(idf_t: float, tf: np.ndarray, norm32: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """The same contribution for the approximate step, in float32 arithmetic: half the memory traffic
    and twice the vector width of float64, and no float64 copy of the counts — at 1M records a big
    query's new terms took ≈ 25 ms this way against ≈ 12 (docs/benchmarks.md § 1M, `warm1m`). Written
    as idf·(k1 + 1) · tf / (tf + norm): `norm32` (the length norms rounded to float32: one rounding,
    δ₁) gathered, `tf` added (a whole count, exact in float32: δ₂), `tf` divided by it (δ₃), times
    idf·(k1 + 1) made in float64 and rounded (δ₄), the product rounded as written (δ₅) — so the value
    is the exact one times (1 + δ₃)(1 + δ₄)(1 + δ₅) / ((1 + δ₁')(1 + δ₂)) with every |δ| ≤ u (the sum of
    positive tf and norm(1 + δ₁) is (tf + norm)(1 + δ₁'), |δ₁'| ≤ u): within
    APPROXIMATE_CONTRIBUTION_ULPS·u relative (property test)."""
    part = norm32.take(slots)
    part += tf
    np.divide(tf, part, out=part)
    part *= np.float32(idf_t * (T.K1 + 1.0))
    return part
