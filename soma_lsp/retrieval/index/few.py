"""The exact step for a few slots, in plain Python floats: the values `exact` computes, bit for bit.

A short query's cut leaves about `limit` slots, and the one or two that may hold the lexical max, to
score exactly. In numpy that is some forty calls on arrays of ten values, each costing a microsecond
of overhead where its arithmetic costs nanoseconds (0.25 ms of a 3-term rank at 100k records, rank6).
Here the query terms' counts come from `exact`'s own lookup (`_term_counts`: one call per segment), each
component's postings are searched once for all the slots (`_listed`), and the rest is arithmetic on
Python floats. For a long query (past `tuning.TERMS_IN_PYTHON` terms) the per-term Python arithmetic
costs more than numpy's, and `exact` keeps the numpy path.

Why the values are the same. A Python float operation is one IEEE float64 operation, rounded once, as
each element of a numpy float64 ufunc is (numpy's separate multiply and add are not fused). So the
same operations in the same order give the same bits: bm25 summed term by term in query order (an
absent term adds 0.0 there, nothing here: x + 0.0 = x for x ≥ 0), shared counts component by
component in query order, the score Σ w'_i·c_i in the order of docs/spec.md §2.6, the formulas taken
from `terms` (they take floats as well as arrays). Recency's 2^x stays numpy's (`terms.decay`'s
`exp2`, one call for the slots): Python has no 2^x of numpy's rounding; the ages it is given are
Python floats. The property tests compare this path with the numpy ones (`tuning.SLOTS_IN_PYTHON`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import terms as T

if TYPE_CHECKING:
    from .resolved import _Query
    from .segments import _Postings


class _FewSlotsPass:
    """`_exact` for a few slots (a part of `LiveIndex`, on the state `live` holds; `exact` calls it)."""

    def _exact_listed(self, q: "_Query", at: np.ndarray, contenders: list[int]) -> dict[str, Any]:
        """`_exact`'s values, as lists, for these slots (in the order given); the lexical max is
        looked up among them and the `contenders` (the slots that may hold it). The columns are read
        at the slots' array (`at`): indexing with a list converts it at every call (4 µs, not 1.7)."""
        w, columns, slots = q.weighting, self._columns, at.tolist()
        bm25 = dict(zip(slots, [0.0] * len(slots)))
        matched: dict[int, list[bool]] = {}
        max_bm25 = 0.0
        if q.keys.size:
            both = sorted(bm25.keys() | set(contenders))
            both_at = np.asarray(both, dtype=np.intp)
            norms = self._length_norm()[both_at].tolist()
            tfs = self._term_counts(q, both_at).tolist()
            for j, (slot, norm) in enumerate(zip(both, norms)):
                total = 0.0
                for idf_t, tf in zip(q.idf, tfs):  # query order, as `_bm25_at`'s running sum
                    if tf[j]:
                        total += idf_t * T.tf_part(tf[j], norm)
                bm25[slot] = total
                matched[slot] = [tf[j] > 0 for tf in tfs]
            max_bm25 = max(bm25.values())
        classes = w["classes"][at].tolist()
        table = w["table"].tolist()
        weights = [table[c] for c in classes]
        structural = [0.0] * len(slots)
        if q.bag_total > 0:
            arch_total = columns.arch_total[at].tolist()
            for j, shared in enumerate(self._shared_listed(q, at)):
                if classes[j] >= 2:  # structural applies (`_new_weighting`'s classes)
                    structural[j] = T.structural(shared, q.bag_total, arch_total[j])
        recency = _recency_listed(q, columns.time[at].tolist(), classes) if q.now is not None else None
        importance = columns.importance[at].tolist()
        lexical, score = [], []
        for j, slot in enumerate(slots):
            value = bm25[slot] / max_bm25 if max_bm25 > 0 else 0.0
            s = weights[j][0] * value
            if q.bag_total > 0:
                s += weights[j][1] * structural[j]
            if recency is not None:
                s += weights[j][2] * recency[j]
            lexical.append(value)
            score.append(s + weights[j][3] * importance[j])
        return {"slots": slots, "score": score, "lexical": lexical, "structural": structural, "recency": recency,
                "structural_applies": [c >= 2 for c in classes], "recency_applies": [c % 2 == 1 for c in classes],
                "classes": classes, "matched": [matched.get(slot, []) for slot in slots]}

    def _shared_listed(self, q: "_Query", slots: np.ndarray) -> list[float]:
        """`_shared_at`'s Σ_c min(q_c, r_c) of these slots, component by component in query order (or from
        the bit planes, `planes`, when they hold the bag: whole numbers, the same sums in any order)."""
        found = self._planes_shared(q, slots, np.float64)
        if found is not None:
            return found.tolist()
        shared = [0.0] * slots.size
        for key, q_count in zip(q.bag_keys, q.bag.values()):
            if key < 0:
                continue
            presence = self._presence(key)
            if presence is not None and presence[1] >= q_count:  # min(q_c, r_c) = q_c wherever present
                parts = [q_count if present else 0.0 for present in presence[0][slots].tolist()]
            else:
                parts = [min(count, q_count) for count in _listed(self._components, key, slots).tolist()]
            shared = [a + b for a, b in zip(shared, parts)]
        return shared


def _recency_listed(q: "_Query", times: list[float], classes: list[int]) -> list[float]:
    """`exact._recency` of slots of these times and weighting classes: the ages in Python floats (the
    same float64 operations, in the same order), 2^x from numpy (`terms.decay`'s) in one call for all
    of them — the numpy path's dozen calls on ten values cost 20 µs a query."""
    T.check_half_life(q.half_life_days)
    ages = [(q.now - time) / T.SECONDS_PER_DAY if c % 2 == 1 else 0.0 for time, c in zip(times, classes)]
    decayed = iter(np.exp2([-age / q.half_life_days for age in ages if age > 0]).tolist())
    return [(next(decayed) if age > 0 else 1.0) if c % 2 == 1 else 0.0 for age, c in zip(ages, classes)]


def _listed(postings: "_Postings", key: int, slots: list[int] | np.ndarray) -> np.ndarray:
    """The count of `key` at each slot (0.0 where absent; the slots in any order), its postings
    searched once per segment, in numpy: the pruned cut asks a few hundred slots, for which a loop
    in Python cost ≈ 30 µs."""
    found = np.zeros(len(slots))
    for _, posted, counts in postings.lookup(key):
        wanted = np.asarray(slots, dtype=posted.dtype)  # (else `searchsorted` converts all postings)
        at = posted.searchsorted(wanted)
        hit = posted.take(at, mode="clip") == wanted
        found[hit] = counts[at[hit]]
    return found
