"""The approximate step of ranking: every slot's score in float32, within a proven bound, and the
slots that can make the cut.

Exact, not approximately exact: float32 is used only to choose which slots to score; every score,
component and order `rank` returns is the float64 value of the exact step (`exact`).

Why the bound holds. Let u = 2⁻²⁴, float32's unit roundoff.
* bm25 (`_approximate`): each of a query's n contributions idf·tf_part is computed in float32
  arithmetic within a relative c·u of the exact value (c = APPROXIMATE_CONTRIBUTION_ULPS = 6: five
  roundings, `contributions._approximate_contribution`), and added once in float32 (u each). The
  values are all positive, so no cancellation can magnify an error: the float32 sum is within a
  relative (n − 1)·u + c·u + O(u²) < (2n + c)·u of the exact one, in any order of addition (so dense
  terms may go first). ε is twice that, for safety.
* lexical = bm25 / max bm25 is a ratio of two values each within ε: within 3ε, times w' ≤ 1.
* the rest of the score (`_candidates`): a few float32 roundings of values ≤ 1, each off by at most
  u: 64·u bounds their sum's error; plus (2m + 8)·u for the structural term of a query with m
  components (its shared count is a float32 sum of m values); plus, when recency cannot be formed in
  float32 (the decay factor would overflow), recency's whole weight, since recency ∈ [0, 1].
  Together: every approximate score is within δ of the exact one.
* the cut: a slot whose approximate score is more than 2δ below the limit-th best approximate score
  cannot be in the exact top `limit` (each side moves by at most δ), so only slots within 2δ of it
  are scored exactly (`_top_within`: through block maxima, then a partition) — usually about `limit`.
* the lexical max: the slot holding the true max has approximate ≥ max·(1 − ε) ≥ (approximate
  max)·(1 − 2ε), so the exact step looks for it only among slots within 2ε of the approximate max.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from .. import terms as T
from . import tuning
from .contributions import APPROXIMATE_CONTRIBUTION_ULPS
from .kept import kept

if TYPE_CHECKING:
    from .resolved import _Query


class _ApproximatePass:
    """The approximate step (a part of `LiveIndex`, on the state `live` holds; `ranking` calls it)."""

    def _approximate(self, q: "_Query") -> "_Approximate | None":
        """bm25 of every slot in float32 (None when no query term occurs in the pool), kept per layout
        for the last APPROXIMATIONS_KEPT term lists: the same words are ranked again with another limit
        or gate (a definition's lens and its hover) and scored (`score`, for its ties and tiers)."""
        if not q.keys.size:
            return None
        approximations = self._per_layout().setdefault("approximations", {})  # keys → bm25
        # (the keys fix the idf while the layout stands)
        return kept(approximations, q.keys.tobytes(), lambda: self._approximated(q), tuning.APPROXIMATIONS_KEPT)

    def _approximated(self, q: "_Query") -> "_Approximate":
        """Each of the n contributions is within c·u of its exact value (u = 2⁻²⁴, c =
        APPROXIMATE_CONTRIBUTION_ULPS) and added once in float32, off by at most u relative on sums of
        positive values, so (2n + c)·u bounds the relative error; ε is twice that, for safety."""
        norm = self._length_norm32()
        vectors = [self._contributions.dense(self._layout, self._terms.segments, key, idf_t, norm)
                   for key, idf_t, is_dense in zip(q.keys.tolist(), q.idf, q.dense) if is_dense]
        if len(vectors) >= 2:  # the error bound holds in any order of addition: dense terms first
            bm25 = vectors[0] + vectors[1]
        else:
            bm25 = vectors[0].copy() if vectors else np.zeros(self._columns.size, dtype=np.float32)
        for vector in vectors[2:]:
            bm25 += vector
        wide = self._contributions.fits_wide(self._terms.posted)
        sparse = [(key, idf_t) for key, idf_t, is_dense in zip(q.keys.tolist(), q.idf, q.dense) if not is_dense]
        for segment in self._terms.segments:  # segment by segment: its slots stay in the cache while
            for key, idf_t in sparse:  # every term adds to them (each slot still adds in query order)
                found = self._contributions.sparse(self._layout, segment, key, idf_t, norm, wide)
                if found is not None:
                    np.add.at(bm25, *found)
        alive = self._columns.view("alive")
        error = 2 * (2 * q.keys.size + APPROXIMATE_CONTRIBUTION_ULPS) * 2.0 ** -24
        # the true max's slot has approximate ≥ max·(1 − ε) ≥ (approximate max)·(1 − 2ε); found while
        # the vector is in the cache (the exact step, after the candidates' passes, took 4× as long)
        if self._dead().size == 0 and bm25.size >= tuning.BLOCKS_READ_ALONE:  # as `_top_within` reads
            # them: the max of block maxima, then the blocks near it alone, instead of a pass over all
            starts = _block_starts(bm25.size, max(1, min(1024, bm25.size // 4)))
            maxima = np.maximum.reduceat(bm25, starts)
            top = float(maxima.max())
            cut = top * (1 - 2 * error)
            contenders = _in_blocks(bm25, cut, starts, maxima)
        else:
            top = float(bm25.max() if self._dead().size == 0 else np.max(bm25, where=alive, initial=0.0))
            contenders = np.flatnonzero(bm25 >= top * (1 - 2 * error))
        bm25.flags.writeable = False  # kept, shared by the queries of these terms
        return _Approximate(bm25, top, error, contenders[alive[contenders]])

    def _candidates(self, q: "_Query", limit: int, relevant_only: bool,
                    approximate: "_Approximate | None") -> np.ndarray:
        """Slots that may be among the top `limit` (sorted): every approximate score is within δ of
        the exact one, so a slot 2δ below the limit-th best approximate score cannot be.

        The approximate score is assembled in float32 (half the memory traffic of float64): a few
        roundings of values ≤ 1, each off by at most u = 2⁻²⁴, so 64·u bounds their sum's error, plus
        (2m + 8)·u for the structural term of a query with m components (its shared count is a float32
        sum of m values). With a component bag the structural term is first computed only at the
        slots whose bound can reach the cut (`pruned`: the same slots, fewer passes over every slot).

        With `relevant_only`, spec §3.5's gate (lexical > 0 or structural > 0) is checked on the
        candidates only: they nearly always pass it (a record with no query word and no shared
        component scores its static part alone, far below the best), and then they are what masking
        every slot the gate drops would have given (the mask, written over 1M slots, was a quarter of
        this step). Else the mask is set and the cut taken again."""
        w = q.weighting
        static, delta = self._static_part(q)
        lexical = None
        if approximate is not None:  # w'·bm25 / max bm25
            lexical = np.multiply(w["float32"]["lexical"], approximate.bm25)
            lexical *= np.float32(1.0 / approximate.top)
            delta += 3 * approximate.error  # a ratio of two values each within ε, times w' ≤ 1
        if q.bag_total > 0:
            delta += (2 * len(q.bag) + 8) * 2.0 ** -24
            if not self._bag_again(q):  # the structural term at a few slots
                found = self._pruned(q, limit, lexical, static, delta)
                if found is not None and (not relevant_only or self._gated(q, approximate, found).all()):
                    return found
        if lexical is None:
            score = static.copy()
        else:  # + the static part: no copy of the latter
            score = lexical
            score += static
        if q.bag_total > 0:
            score += self._structural_part(q)
        score[self._dead()] = -np.inf
        found = _top_within(score, limit, 2 * delta)
        if relevant_only and not self._gated(q, approximate, found).all():
            score[~self._gated(q, approximate)] = -np.inf
            found = _top_within(score, limit, 2 * delta)
        return found

    def _gated(self, q: "_Query", approximate: "_Approximate | None", slots: np.ndarray | None = None) -> np.ndarray:
        """Whether spec §3.5's gate keeps these slots (None: every slot): a query term in the record's
        document (bm25 > 0) or a component shared with the query. Few slots take their shared count
        from their records, and only where bm25 does not already decide."""
        size = self._columns.size if slots is None else slots.size
        if approximate is None:
            relevant = np.zeros(size, dtype=bool)
        else:
            relevant = approximate.bm25 > 0 if slots is None else approximate.bm25[slots] > 0
        if q.bag_total > 0:
            if slots is None:
                relevant |= self._shared_counts(q, np.float32) > 0
            else:
                undecided = np.flatnonzero(~relevant)
                relevant[undecided] = self._shared_at(q, slots[undecided]) > 0
        return relevant

    def _structural_part(self, q: "_Query") -> np.ndarray:
        """w'·shared / (Σ q + Σ r − shared) per slot in float32, kept per weighting and component bag:
        it does not depend on the query's words, and a file's hovers share its architecture — one
        pass instead of a scatter of the components' postings and four passes over every slot."""
        bag = tuple(q.bag.items())  # in query order, the order `_shared_counts` adds in
        # (a fresh dict per weighting, so per layout too)
        return kept(q.weighting["structural"], bag, lambda: self._structural_term(q), tuning.STATIC_PARTS_KEPT)

    def _bag_again(self, q: "_Query") -> bool:
        """Whether this weighting's last few queries asked this component bag too. A file's hovers share
        its architecture: the second asks for its structural term at every slot, kept (`_structural_part`),
        and the next add it in one pass — less than the pruned cut costs (6% of a hover-like rank at
        100k records); a bag asked once is pruned (`pruned`)."""
        bag = tuple(q.bag.items())
        again = bag in q.weighting["structural"] or bag in q.weighting["bags"]
        kept(q.weighting["bags"], bag, lambda: True, tuning.STATIC_PARTS_KEPT)
        return again

    def _structural_term(self, q: "_Query", slots: np.ndarray | None = None) -> np.ndarray:
        """w'·shared / (Σ q + Σ r − shared) in float32 at every slot (or at these: the same floats)."""
        w = q.weighting["float32"]
        shared = self._shared_counts(q, np.float32, slots)
        if slots is None:
            found = np.subtract(self._denominators(q), shared)
            shared *= w["structural"]
        else:
            found = np.add(w["arch_total"][slots], np.float32(q.bag_total))
            found -= shared
            shared *= w["structural"][slots]
        np.divide(shared, found, out=found)
        found.flags.writeable = slots is not None
        return found

    def _denominators(self, q: "_Query") -> np.ndarray:
        """Σ q + Σ r per slot in float32, kept per weighting and Σ q: queries whose bags differ (and
        so their structural terms) mostly name as many components."""
        def denominators() -> np.ndarray:
            found = np.add(q.weighting["float32"]["arch_total"], np.float32(q.bag_total))
            found.flags.writeable = False
            return found

        return kept(q.weighting["denominators"], q.bag_total, denominators, tuning.STATIC_PARTS_KEPT)

    def _static_part(self, q: "_Query") -> tuple[np.ndarray, float]:
        """The query-independent part of the approximate score — w'·recency + w'·importance in float32 —
        and its error margin, kept per weighting and `now` (hovers round `now` to the minute, so a
        stream of queries shares it): one copy per query instead of a few passes over every slot."""
        # (a fresh dict per weighting, so per layout too)
        return kept(q.weighting["static"], q.now, lambda: self._assembled_static_part(q), tuning.STATIC_PARTS_KEPT)

    def _assembled_static_part(self, q: "_Query") -> tuple[np.ndarray, float]:
        """A few roundings of values ≤ 1, each off by at most u = 2⁻²⁴: 64·u bounds the whole
        approximate score's assembly (see `_candidates`); plus recency's whole weight when the decay
        factor would overflow float32 (then recency ∈ [0, 1] is left out)."""
        w = q.weighting["float32"]
        delta = 64 * 2.0 ** -24
        with np.errstate(over="ignore"):  # an infinite factor is handled below
            factor = T.decay_factor(q.weighting["t_ref"], q.now, q.half_life_days) if q.now is not None else 0.0
        if q.now is not None and factor < 2.0 ** 64:  # beyond, float32 could overflow: no recency here
            score = w["recency_weighted"] * np.float32(factor)
            # (one pass per `now`, kept with the part: a time order kept per layout cost the first query
            # after each load or pool change a sort of every slot, 0.1 s at 1M)
            future = np.flatnonzero(self._columns.view("time") >= q.now)  # recency 1.0, not the decayed value
            score[future] = w["recency"][future]
            score += w["importance"]
        else:
            score = w["importance"].copy()
            if q.now is not None:  # recency ∈ [0, 1] is unknown here: widen the margin by its weight
                delta += float(w["recency"].max(initial=0.0))
        score.flags.writeable = False
        return score, delta

    def _dense(self, keys: np.ndarray) -> np.ndarray:
        """Which of these terms are added as dense vectors (`contributions`' rule), not scattered."""
        return self._dense_fraction() * self._terms.doc_freq[keys] >= len(self._slot_of)

    def _made_ahead(self, key: int, idf_t: float) -> None:
        """Make this term's contributions as `_approximated` takes them from the cache, ahead of the
        query about to ask it (`warm`) — unless the cache holds 1/WARM_SHARE of its budget already."""
        if self._contributions.holding(self._layout) * tuning.WARM_SHARE >= self._contributions.budget:
            return
        norm = self._length_norm32()
        if self._dense(np.array([key]))[0]:
            self._contributions.dense(self._layout, self._terms.segments, key, idf_t, norm)
            return
        wide = self._contributions.fits_wide(self._terms.posted)
        for segment in self._terms.segments:
            self._contributions.sparse(self._layout, segment, key, idf_t, norm, wide)

    def _length_norm32(self) -> np.ndarray:
        """The length norms rounded to float32, for the approximate contributions (kept per layout:
        4 bytes a slot)."""
        cache = self._per_layout()
        if "norm32" not in cache:
            cache["norm32"] = self._length_norm().astype(np.float32)
        return cache["norm32"]

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


@dataclass(frozen=True, slots=True)
class _Approximate:
    """Every slot's bm25 in float32, within a relative `error` of the exact value; `top` is the
    largest over live slots, `contenders` the live slots that may hold the exact max."""

    bm25: np.ndarray
    top: float
    error: float
    contenders: np.ndarray


def _top_within(score: np.ndarray, limit: int, margin: float, blocks: int = 1024) -> np.ndarray:
    """Sorted indices whose score is within `margin` of the limit-th best finite score, or above it
    (all finite ones when there are at most `limit`).

    The limit-th best is at least the limit-th best of block maxima (limit blocks each hold a value
    that high), so one cheap pass over block maxima narrows the search before the exact partition;
    and a value that high lies in a block whose maximum is that high — about `limit` blocks, read
    alone instead of a second pass over every value (`_in_blocks`) from BLOCKS_READ_ALONE values on
    (at 100k slots the pass, on a vector still in the cache, costs less than the blocks' few calls)."""
    n_blocks = max(limit, blocks)
    if score.size > 4 * n_blocks:
        starts = _block_starts(score.size, n_blocks)
        maxima = np.maximum.reduceat(score, starts)
        floor = np.partition(maxima, n_blocks - limit)[n_blocks - limit]
        if floor == -np.inf:
            pool = np.flatnonzero(score > -np.inf)
        elif score.size < tuning.BLOCKS_READ_ALONE:
            pool = np.flatnonzero(score >= floor - margin)
        else:
            cut = floor - margin
            pool = _in_blocks(score, cut, starts, maxima)
    else:
        pool = np.flatnonzero(score > -np.inf)
    if pool.size <= limit:
        return pool
    values = score[pool]
    kth = np.partition(values, pool.size - limit)[pool.size - limit]
    return pool[values >= kth - margin]


def _in_blocks(score: np.ndarray, cut: float, starts: np.ndarray, maxima: np.ndarray) -> np.ndarray:
    """Sorted indices of the values ≥ `cut`, read only in the blocks (those `starts` begins, whose
    maxima are `maxima`) whose maximum reaches it, the rest of `score` unread; past a quarter of the
    blocks, one pass."""
    chosen = np.flatnonzero(maxima >= cut)
    if chosen.size * 4 > starts.size:
        return np.flatnonzero(score >= cut)
    lengths = np.append(starts, score.size)[chosen + 1] - starts[chosen]
    offsets = np.cumsum(lengths)
    at = np.arange(int(offsets[-1])) + np.repeat(starts[chosen] - (offsets - lengths), lengths)
    return at[score[at] >= cut]


@lru_cache(maxsize=8)
def _block_starts(size: int, blocks: int) -> np.ndarray:
    """Where each of `blocks` nearly equal blocks of `size` values starts (per pool size, kept)."""
    starts = np.linspace(0, size, blocks, endpoint=False).astype(np.int64)
    starts.flags.writeable = False
    return starts
