"""A query's shared component counts at a few slots, read from bit planes: one word a slot, not a gather per component.

The pruned cut (`pruned`: a few hundred slots) and the exact step (`few`, `exact`: a dozen) need
Σ_c min(q_c, r_c) at scattered slots. Through the presence vectors that is a gather per component of the
bag, each at as many cold cache lines as slots, and a search of the postings of a component the query
counts more often than some record (`_shared_counts`): the structural term at the pruned cut's ≈ 270 slots
took 78 µs of a 3-term rank in a stream of queries at 100k records, 43 in a warm loop (docs/benchmarks.md
§ Retrieval, rank11). Here the common components' counts are kept
as bit planes: bit b of plane j at a slot is set when the record counts component b more than j times.
For whole counts min(q_c, r_c) = Σ_{j < q_c} [r_c > j], so Σ_c min(q_c, r_c) = Σ_j popcount(plane_j[slot]
& mask_j), mask_j the components the query counts more than j times: per plane one gather, an `and` and
a popcount.

Why the values are the same floats. Every min(q_c, r_c) is then a whole number, and so is every partial
sum, far below 2²⁴: float32 and float64 add whole numbers that small exactly, in any order, so the sum is
the one every other path computes (`_shared_counts` over every slot or at given ones, `few`). So planes are
used only when every known component of the bag has a bit (a common one, among the BITS most frequent,
whose every count is whole), q_c is whole and min(q_c, its largest count) ≤ PLANES; otherwise `_planes_shared`
answers None and the caller takes the presence vectors and postings. The planes see the postings of dead
slots too, as those do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import tuning
from .kept import kept

if TYPE_CHECKING:
    from .resolved import _Query

BITS = 64  # components a plane holds: one uint64 word a slot
_BIT = np.left_shift(np.uint64(1), np.arange(BITS, dtype=np.uint64))  # each bit's word
_UNHELD = object()  # a bag the planes do not hold


class _ComponentPlanes:
    """`_planes_shared` and the planes (a part of `LiveIndex`, on the state `live` holds)."""

    def _planes_shared(self, q: "_Query", slots: np.ndarray, dtype: type) -> np.ndarray | None:
        """Σ_c min(q_c, r_c) at these slots in `dtype` from the bit planes, or None when this layout has no
        planes or they do not hold the bag (the module's docstring says when, and why the floats are the same)."""
        cache = self._per_layout()
        if "planes" not in cache:  # (made by `warm` only: see `_planes`)
            return None
        masks = kept(cache.setdefault("plane_masks", {}), (tuple(q.bag_keys), tuple(q.bag.values())),
                     lambda: self._masks(q), tuning.BAGS_KEPT)
        if masks is _UNHELD:
            return None
        shared = None
        for plane, mask in masks:
            held = plane.take(slots)
            held &= mask
            counted = np.bitwise_count(held)
            shared = counted.astype(dtype) if shared is None else shared + counted
        return np.zeros(slots.size, dtype=dtype) if shared is None else shared

    def _masks(self, q: "_Query") -> list[tuple[np.ndarray, np.uint64]] | object:
        """The planes a bag reads and its mask in each (the components it counts more than j times in
        plane j), or `_UNHELD` when the planes do not hold it (kept as such: `kept` makes a None again);
        kept per layout with the planes, as a file's hovers ask with one bag."""
        planes, bits = self._planes()
        masks = [0] * len(planes)
        for key, q_count in zip(q.bag_keys, q.bag.values()):
            if key < 0:  # no record holds it: it adds nothing on any path
                continue
            found = bits.get(key)
            if found is None or not float(q_count).is_integer():
                return _UNHELD
            bit, top = found
            depth = min(int(q_count), top)
            if depth > len(planes):
                return _UNHELD
            for j in range(depth):
                masks[j] |= bit
        return [(plane, np.uint64(mask)) for plane, mask in zip(planes, masks) if mask]

    def _planes(self) -> tuple[list[np.ndarray], dict[int, tuple[int, int]]]:
        """The bit planes (up to PLANES of them, 8 bytes a slot each) and, per component holding a bit,
        its bit and its largest count; per layout. Built with one `add.at` per plane — each slot's bits
        are distinct (a slot's postings are in one segment, once per component), so their sum is their
        `or` (`add.at`: 30 ms for 6M random postings, where `bitwise_or.at` took 130 and a float64
        `bincount` per half-word 330). 15 ms at 100k records, 4 planes (the presence vectors: 3.5), 151 ms of
        CPU at 1M: so only `LiveIndex.warm` makes them (the end of a load, off the user's requests), never a
        query. A query saves ≈ 5% of a short rank with them (docs/benchmarks.md § Retrieval, rank11), and a
        layout that the next pool change ends would seldom see the hundreds of queries that repay a build
        made on its first query — at 1M that first query would wait 0.15 s. After a change the queries take
        the presence vectors and postings, as before the planes, until the next load."""
        cache = self._per_layout()
        if "planes" not in cache:
            cache["planes"] = self._made_planes()
        return cache["planes"]

    def _made_planes(self) -> tuple[list[np.ndarray], dict[int, tuple[int, int]]]:
        size, doc_freq = self._columns.size, self._components.doc_freq
        common = np.flatnonzero(doc_freq * tuning.PRESENCE_FRACTION >= size)
        bits: dict[int, tuple[int, int]] = {}
        posted, counts, at = [], [], []
        for key in common[np.argsort(-doc_freq[common], kind="stable")].tolist():
            if len(bits) == BITS:
                break
            parts = [(slots, found) for _, slots, found in self._components.lookup(key)]
            if not parts or any(not np.array_equal(found, np.floor(found)) for _, found in parts):
                continue  # a fractional count: this component's sums take the other paths
            bits[key] = (1 << len(bits), int(max(found.max() for _, found in parts)))
            for slots, found in parts:
                posted.append(slots)
                counts.append(found)
                at.append(np.full(slots.size, len(bits) - 1, dtype=np.uint8))
        planes: list[np.ndarray] = []
        if bits:
            posted_all, counts_all, at_all = np.concatenate(posted), np.concatenate(counts), np.concatenate(at)
            for j in range(min(tuning.PLANES, max(top for _, top in bits.values()))):
                if j:  # the postings counting their component more than j times (every one: more than 0)
                    more = np.flatnonzero(counts_all > j)  # (`take` at indices: a third of a mask's time)
                    posted_all, counts_all, at_all = posted_all.take(more), counts_all.take(more), at_all.take(more)
                plane = np.zeros(size, dtype=np.uint64)
                np.add.at(plane, posted_all, _BIT[at_all])  # distinct bits: their sum is their `or`
                planes.append(plane)
        return planes, bits
