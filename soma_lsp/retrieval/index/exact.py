"""The exact step of ranking: the components and score of chosen slots, in float64.

Every value `rank` returns comes from here, by the same arithmetic whichever way the slots were
chosen (all live slots for `limit=None`; the approximate step's candidates otherwise): bm25 summed term
by term in query order, the structural term component by component in query order, the score as
Σ w'_i·c_i term by term in spec order. So a cut ranking equals the full ranking cut, bit for bit.
Few slots are looked up in the postings (`_Segment.counts_at`), many are scattered from all postings
(past FEW_SLOTS) — the same arithmetic either way.
"""

from __future__ import annotations

from itertools import compress
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import terms as T
from .contributions import _contribution
from .few import _FewSlotsPass, _listed
from .planes import _ComponentPlanes
from . import tuning

if TYPE_CHECKING:
    from .approximate import _Approximate
    from .resolved import _Query


class _ExactPass(_FewSlotsPass, _ComponentPlanes):
    """The exact step (a part of `LiveIndex`, on the state `live` holds; `ranking` calls it)."""

    def _bm25_at(self, q: "_Query", slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact bm25 of these (sorted, distinct) slots, summed term by term in query order, and which
        query keys each slot's document holds (keys × slots): a few slots are looked up in the postings
        of the segments that may hold them, many are scattered from all postings — the same arithmetic
        either way."""
        norm = self._length_norm()
        if slots.size > tuning.FEW_SLOTS:
            matched = np.zeros((q.keys.size, slots.size), dtype=bool)
            bm25, posted_here = np.zeros(self._columns.size), np.zeros(self._columns.size, dtype=bool)
            for row, (key, idf_t) in enumerate(zip(q.keys.tolist(), q.idf)):
                posted_here[:] = False
                for _, posted, tf in self._terms.lookup(key):
                    bm25[posted] += _contribution(idf_t, tf, norm, posted)  # distinct within a segment
                    posted_here[posted] = True
                matched[row] = posted_here[slots]
            return bm25[slots], matched
        tf = self._term_counts(q, slots)
        # term by term (a running sum: `sum` may add pairwise); 0.0 where a term is absent
        return np.cumsum(np.asarray(q.idf)[:, None] * T.tf_part(tf, norm[slots]), axis=0)[-1], tf > 0

    def _term_counts(self, q: "_Query", slots: np.ndarray) -> np.ndarray:
        """tf of each query key at each of these (sorted, distinct) slots (keys × slots, 0.0 where
        absent), looked up in the postings of the segments that may hold them — or, for a short
        query's dense terms (up to KEYS_ONE_BY_ONE keys, which `counts_at` searches one by one),
        read from their counts as bytes (`_Contributions.counts`); past it, one search for all keys
        costs less than a look-up per key."""
        tf = np.zeros((q.keys.size, slots.size))
        keys, rows = q.keys, slice(None)
        if q.keys.size <= tuning.KEYS_ONE_BY_ONE:
            searched = []
            for row, (key, is_dense) in enumerate(zip(q.keys.tolist(), q.dense)):
                counts = self._contributions.counts(self._layout, self._terms.segments, key,
                                                    self._columns.size) if is_dense else None
                if counts is None:
                    searched.append(row)
                else:
                    tf[row] = counts[slots]
            if not searched:
                return tf
            keys, rows = q.keys[searched], searched
        for segment in self._terms.segments:  # a slot's postings are all in one segment
            start, end = np.searchsorted(slots, (segment.first, segment.last + 1)).tolist()
            if start < end:
                tf[rows, start:end] = segment.counts_at(keys, slots[start:end])
        return tf

    def _shared_at(self, q: "_Query", slots: np.ndarray) -> np.ndarray:
        """Exact Σ_c min(q_c, r_c) of these slots, in float64 (`_shared_counts`: few slots looked up,
        many taken from a pass over every slot)."""
        if slots.size > tuning.FEW_SLOTS:
            return self._shared_counts(q, np.float64)[slots]
        return self._shared_counts(q, np.float64, slots)

    def _shared_counts(self, q: "_Query", dtype: type, slots: np.ndarray | None = None) -> np.ndarray:
        """Σ_c min(q_c, r_c) at every slot (or at these sorted, distinct `slots`), component by
        component in query order, in `dtype` (float32 for the approximate step). A component in many
        slots, each counting at least q_c, adds q_c through its presence vector (`_presence`: one pass
        over the slots, where scattering that many costs 5–10× more); the others are scattered from
        the postings (or, at given slots, searched for in them).

        Whole q_c added through presence vectors are summed in small integers first (`_counted`) and
        turned into `dtype` once: a float pass per component costs more than the byte pass. Whole
        numbers add up exactly in any order, and the float32 approximation's error bound holds in any
        order (sums of positive values), so there the other components are added after them; the
        float64 sum takes that route only when every component is such a whole q_c. At given slots
        each slot adds the same values in the same order as at every slot: the same floats — or, when
        the bit planes hold the bag (`planes`: whole counts, whose sums are the same in any order), they
        give the sums at given slots in one gather a plane."""
        if slots is not None:
            found = self._planes_shared(q, slots, dtype)
            if found is not None:
                return found
        plan = [(key, q_count, self._presence(key))
                for key, q_count in zip(q.bag_keys, q.bag.values()) if key >= 0]
        whole = [_whole(presence, q_count) for _, q_count, presence in plan]
        size = self._columns.size if slots is None else slots.size

        def present(presence: tuple[np.ndarray, float]) -> np.ndarray:
            return presence[0] if slots is None else presence[0][slots]

        if dtype is np.float32 or all(whole):
            shared = _counted([(present(presence), int(q_count)) for (_, q_count, presence), w in zip(plan, whole) if w],
                              size, dtype)
            plan = list(compress(plan, [not w for w in whole]))
        else:
            shared = np.zeros(size, dtype=dtype)
        parts = self._per_layout().setdefault("components", {})  # (segment, key) → (least count, slots)
        wide = self._contributions.fits_wide(self._components.posted)
        for key, q_count, presence in plan:
            if presence is not None and presence[1] >= q_count:  # min(q_c, r_c) = q_c wherever present
                shared += present(presence) if q_count == 1 else present(presence) * dtype(q_count)
                continue
            if slots is not None:  # 0.0 where absent, which adds nothing
                shared += np.minimum(_listed(self._components, key, slots).astype(dtype, copy=False), dtype(q_count))
                continue
            for segment, posted, counts in self._components.lookup(key):
                found = parts.get((segment, key))
                if found is None:  # slots scattered through, as the contributions' (`fits_wide`)
                    found = parts[(segment, key)] = (float(counts.min()), posted.astype(np.intp) if wide else posted)
                floor, posted = found
                if floor >= q_count:  # the common case (a query counts each component once): one scalar
                    np.add.at(shared, posted, dtype(q_count))
                else:
                    np.add.at(shared, posted, np.minimum(counts.astype(dtype, copy=False), dtype(q_count)))
        return shared

    def _presence(self, key: int) -> tuple[np.ndarray, float] | None:
        """Which slots post this component (a boolean per slot) and its least count there, for a
        component in at least 1/PRESENCE_FRACTION of the slots (None for the others); per layout.
        Adding a boolean vector costs a fixed pass (17 µs at 100k slots) where a scatter costs per
        slot (100 µs for 35% of them); a byte per slot keeps the vectors of every common component small."""
        kept = self._per_layout().setdefault("presence", {})
        if key not in kept:
            size = self._columns.size
            if self._components.doc_freq[key] * tuning.PRESENCE_FRACTION < size:
                kept[key] = None
            else:
                present, floor = np.zeros(size, dtype=bool), np.inf
                for _, slots, counts in self._components.lookup(key):
                    present[slots] = True
                    floor = min(floor, float(counts.min()))
                kept[key] = (present, floor)
        return kept[key]

    def _exact(self, q: "_Query", slots: np.ndarray, approximate: "_Approximate | None") -> dict[str, Any]:
        """Exact components and scores of these slots (as lists for a few slots: `few`). The lexical
        max is exact too: it is looked up among the live slots that can hold it — with an
        approximation, only those within 2ε of its max."""
        if not q.keys.size:
            contenders = np.zeros(0, dtype=np.intp)
        else:  # the live slots that can hold the exact lexical max: every one without an approximation
            contenders = np.flatnonzero(self._columns.view("alive")) if approximate is None else approximate.contenders
        if slots.size + contenders.size <= min(tuning.SLOTS_IN_PYTHON, tuning.FEW_SLOTS) and \
                q.keys.size <= tuning.TERMS_IN_PYTHON:
            return self._exact_listed(q, slots, contenders.tolist())
        bm25, max_bm25, matched = np.zeros(slots.size), 0.0, np.zeros((slots.size, 0), dtype=bool)
        if q.keys.size:
            both = _union(contenders, slots)
            exact, matched_both = self._bm25_at(q, both)
            at = np.searchsorted(both, slots)
            bm25, max_bm25, matched = exact[at], float(exact.max(initial=0.0)), matched_both[:, at].T
        return {**self._components_of(q, slots, bm25, max_bm25), "matched": matched}

    def _components_of(self, q: "_Query", slots: np.ndarray, bm25: np.ndarray, max_bm25: float) -> dict[str, Any]:
        """Each slot's components and score, Σ w'_i·c_i summed term by term in the order of docs/spec.md §2.6 (a term
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
            recency = self._recency(q, slots)
            score += e_recency * recency
        score += w["importance"][slots]
        return {"slots": slots, "score": score, "lexical": lexical, "structural": structural,
                "recency": recency, "structural_applies": structural_applies,
                "recency_applies": w["recency_applies"][slots], "classes": w["classes"][slots]}

    def _recency(self, q: "_Query", slots: np.ndarray) -> np.ndarray:
        """Recency of these slots (0 where it does not apply), straight from the age (not the
        approximate pass's base · factor, which over- or underflows when a record lies far in the
        future of the others, say a year-9999 typo)."""
        age_days = np.nan_to_num((q.now - self._columns.time[slots]) / T.SECONDS_PER_DAY)
        return np.where(q.weighting["recency_applies"][slots], T.decay(age_days, q.half_life_days), 0.0)


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted union of two sorted arrays of distinct slots — `np.union1d`'s result without its
    `np.unique`, whose first call in a process imports `numpy.ma` (≈ 25 ms, paid by the first hover
    after a server's load, docs/benchmarks.md § 1M)."""
    both = np.concatenate((a, b))
    both.sort(kind="stable")
    keep = np.ones(both.size, dtype=bool)
    np.not_equal(both[1:], both[:-1], out=keep[1:])
    return both[keep]


def _whole(presence: tuple[np.ndarray, float] | None, q_count: float) -> bool:
    """Whether a component adds a whole q_c wherever its presence vector says it is posted."""
    return presence is not None and presence[1] >= q_count and float(q_count).is_integer()


def _counted(parts: list[tuple[np.ndarray, int]], size: int, dtype: type) -> np.ndarray:
    """Σ q_c·present_c over (presence vector, whole q_c) pairs, in `dtype`: summed in the smallest
    unsigned integer that holds Σ q_c (a byte per slot for any usual query), then converted once."""
    total = sum(q_count for _, q_count in parts)
    small = np.uint8 if total < 1 << 8 else np.uint16 if total < 1 << 16 else dtype
    counts = np.zeros(size, dtype=small)
    for present, q_count in parts:
        counts += present.view(np.uint8) if q_count == 1 and small is np.uint8 else present * small(q_count)
    return counts if small is dtype else counts.astype(dtype)
