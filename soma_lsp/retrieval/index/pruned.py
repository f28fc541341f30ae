"""The approximate step's cut with the structural term computed at a few hundred slots, not at every one.

A query's structural term depends on its component bag, and a new bag costs a pass over every slot
(its shared counts, then three passes: ≈ 0.12 ms at 100k records, 2 ms at 1M) although only the
slots that can make the top `limit` need it. Its value is bounded without the bag: a weighted
Jaccard Σ min / (Σq + Σr − Σ min) grows with Σ min ≤ min(Σq, Σr), so it is at most
min(Σq, Σr) / max(Σq, Σr) — a function of the record's component total alone. So, per weighting,
`now` and Σq (kept: a stream of queries shares them), every slot's static part plus w'·that bound
is an upper bound of its approximate score less the lexical part (`_bounded_rest`); with the lexical
part added, of the whole approximate score (`_pruned`).

The cut then needs a threshold θ no higher than the limit-th best approximate score: the slots at or
above the PRUNED_FIRST·limit-th best of the bound's block maxima (`_interleaved_maxima`) are scored
(their structural term computed at them alone), and the limit-th best of these is such a θ. Only a slot whose bound reaches
θ − 2δ − η can be within 2δ of the limit-th best approximate score; on the bench's pools that is
about a hundred slots (docs/benchmarks.md § Retrieval, rank9). Blocks alone would not do: the bound's
maxima over blocks of 64 contiguous slots still reach θ in 60–75% of the blocks (recency and
importance vary slot by slot), while the slots that reach it are ≈ 0.1%.

Why the bound holds, in floats. Let u = 2⁻²⁴ and m the bag's number of components. Every value is
≤ 1 (plus δ). The approximate score A = fl(fl(L + s) + S) (lexical, static, structural, as
`approximate._candidates` adds them) is at most L + s + S + 2u; S is within (2m + 8)·u of
w'·J ≤ w'·ρ (ρ = min/max); the bound U = fl(L + R) with R = fl(s + fl(w'·ρ)) is at least
L + s + w'·ρ − 3u; the threshold's rounding to float32 moves it by u. So A ≤ U + η with
η = (2m + 16)·u, and the slots whose bound reaches θ − 2δ − η hold every slot the full cut keeps;
their scores are the same floats (the same operations on the same values, `_structural_term` at
given slots), so the cut is the same set of slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import tuning
from .kept import kept

if TYPE_CHECKING:
    from .resolved import _Query


class _PrunedPass:
    """`_pruned` (a part of `LiveIndex`, on the state `live` holds; `approximate._candidates` calls it)."""

    def _pruned(self, q: "_Query", limit: int, lexical: np.ndarray | None, static: np.ndarray,
                delta: float) -> np.ndarray | None:
        """`_candidates`' slots for a query with a component bag, the structural term computed at a few
        slots (the module's docstring says why it is the same set); None when the bound does not narrow
        the cut enough (a small pool, more than FEW_SLOTS slots left): then every slot is scored."""
        first = tuning.PRUNED_FIRST * limit
        blocks = max(tuning.PRUNED_BLOCKS, 2 * first)
        size = self._columns.size
        if size < 4 * blocks:
            return None
        rest = self._bounded_rest(q)
        bound = rest if lexical is None else np.add(lexical, rest)
        maxima = _interleaved_maxima(bound, blocks)
        floor = np.partition(maxima, blocks - first)[blocks - first]
        if floor == -np.inf:
            return None
        slots = np.flatnonzero(bound >= floor)
        if slots.size > tuning.FEW_SLOTS:  # many slots share the floor's bound (records alike): no narrowing
            return None
        score = self._assembled_at(q, slots, lexical, static)
        theta = _limit_th(score, limit)
        cut = np.float32(float(theta) - 2 * delta - (2 * len(q.bag) + 16) * 2.0 ** -24)
        if cut < floor:  # slots below the first ones' floor may reach the cut: read them too, the first
            # ones again (scoring only the new ones and merging cost as much, measured); on the bench's
            # pools the first read holds the cut (rank11 counted 50 of 50 queries)
            slots = np.flatnonzero(bound >= cut)
            if slots.size > tuning.FEW_SLOTS:
                return None
            score = self._assembled_at(q, slots, lexical, static)
            theta = _limit_th(score, limit)
        # `_top_within`'s cut, its limit-th best already known: every score here is finite (a dead slot's
        # bound is −inf), and there are at least `limit` of them (`first` blocks reach the floor); the
        # margin taken from the float32 limit-th best in float32, as there
        return slots[score >= theta - 2 * delta]

    def _assembled_at(self, q: "_Query", slots: np.ndarray, lexical: np.ndarray | None,
                      static: np.ndarray) -> np.ndarray:
        """The approximate score at these slots: the floats `_candidates` adds up at every slot, in its
        order (lexical + static + structural)."""
        score = static[slots] if lexical is None else lexical[slots] + static[slots]
        score += self._structural_term(q, slots)
        return score

    def _bounded_rest(self, q: "_Query") -> np.ndarray:
        """static part + w'·min(Σq, Σr) / max(Σq, Σr) per slot in float32, −inf at dead slots: a bound
        of the approximate score less its lexical part, kept per weighting, `now` and Σq."""
        def bounded() -> np.ndarray:
            static, _ = self._static_part(q)
            arch_total = self._columns.view("arch_total")
            ratio = np.minimum(arch_total, q.bag_total) / np.maximum(arch_total, q.bag_total)  # Σq > 0
            rest = static + (q.weighting["effective"][1] * ratio).astype(np.float32)
            rest[self._dead()] = -np.inf
            rest.flags.writeable = False
            return rest

        return kept(q.weighting["bounded"], (q.now, q.bag_total), bounded, tuning.STATIC_PARTS_KEPT)


def _limit_th(score: np.ndarray, limit: int) -> np.float32:
    """The limit-th best of these scores (a float32 scalar, as `_top_within` finds it)."""
    return np.partition(score, score.size - limit)[score.size - limit]


def _interleaved_maxima(values: np.ndarray, blocks: int) -> np.ndarray:
    """The maxima of `blocks` blocks of at least one value each, block k holding the values at k, k + blocks,
    k + 2·blocks… (any partition gives a floor: the j-th best maximum is at most the j-th best value):
    a reduction over rows, 17 µs at 100k float32 values where `maximum.reduceat` over contiguous
    blocks took 28."""
    whole = values.size - values.size % blocks
    maxima = values[:whole].reshape(-1, blocks).max(axis=0)
    tail = values.size - whole
    np.maximum(maxima[:tail], values[whole:], out=maxima[:tail])
    return maxima
