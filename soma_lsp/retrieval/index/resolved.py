"""A query resolved against the index: what `ranking` hands the `approximate` and `exact` steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class _Query:
    """A query resolved against the index: its terms, the keys, terms, idf and density of those the pool has, its
    architecture bag and its components' keys, `now` in epoch seconds, and its per-record weighting."""

    terms: list[str]
    keys: np.ndarray
    key_terms: list[str]  # the term of each key
    idf: list[float]
    dense: list[bool]  # whether each key's contributions are a dense vector (`approximate._dense`)
    bag: dict[str, float]
    bag_keys: list[int]  # the key of each component of the bag, in its order (-1: none the pool knows)
    bag_total: float
    now: float | None
    half_life_days: float
    weighting: dict
