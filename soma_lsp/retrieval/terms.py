"""The scoring terms of docs/spec.md §2, one function each, written so they take numpy arrays and scalars alike.

The live index calls these on whole columns of the pool; the scalar public API calls them on one
record. Either way the formula lives here, once.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache

import numpy as np

from ..records import Record, Status
from .model import DEAD_END_IMPORTANCE_FLOOR

K1 = 1.2
B = 0.75
SECONDS_PER_DAY = 86400.0
EFFECT_SCALE = 0.10
_NOT_ALNUM = re.compile(r"[^\w]|_")
_DEAD_STATUSES = frozenset({Status.FAILED, Status.CRASHED, Status.REGRESSED})


# -- lexical ------------------------------------------------------------------------------------

def idf(n_records, doc_freq):
    """idf(t) = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))."""
    return np.log1p((n_records - doc_freq + 0.5) / (doc_freq + 0.5))


def length_norm(dl, avgdl):
    """The BM25 denominator's length part, k1·(1 − b + b·dl/avgdl)."""
    return K1 * (1.0 - B + B * dl / avgdl)


def tf_part(tf, norm):
    """BM25's saturated term frequency, tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)); a query term t
    contributes idf(t) times this to bm25(d) = Σ_t idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))."""
    return (tf * (K1 + 1.0)) / (tf + norm)


def lexical(bm25, max_bm25):
    """lexical = bm25 / max over the ranked records of bm25, or 0 when that max is 0."""
    return bm25 / max_bm25 if max_bm25 > 0 else np.zeros_like(bm25)


# -- recency ------------------------------------------------------------------------------------

def decay(age_days, half_life_days):
    """2 ** (−age_days / half_life_days); a record from the future (age ≤ 0) scores 1.0."""
    check_half_life(half_life_days)
    return np.where(age_days > 0, np.exp2(-np.maximum(age_days, 0.0) / half_life_days), 1.0)


def decay_base(time_s, t_ref_s, half_life_days):
    """2 ** ((time − t_ref) / half-life): with `decay_factor`, 2 ** (−age/half-life) =
    decay_base(time) · decay_factor(now), split so the per-record part outlives a query."""
    return np.exp2((time_s - t_ref_s) / (SECONDS_PER_DAY * half_life_days))


def decay_factor(t_ref_s, now_s, half_life_days):
    """2 ** ((t_ref − now) / half-life), the per-query part of `decay_base`'s identity."""
    return float(np.exp2((t_ref_s - now_s) / (SECONDS_PER_DAY * half_life_days)))


def check_half_life(half_life_days: float) -> None:
    if not half_life_days > 0:
        raise ValueError(f"half-life must be > 0 days, got {half_life_days!r}")


def epoch_seconds(when: datetime) -> float:
    """Seconds since the epoch; a naive datetime is UTC."""
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


# -- structural ---------------------------------------------------------------------------------

@lru_cache(maxsize=16384)
def canonical_component(name: str) -> str:
    """What follows the last `.`, lower-cased, letters and digits only: `torch.nn.LayerNorm` → `layernorm`."""
    return _NOT_ALNUM.sub("", name.rsplit(".", 1)[-1].lower())


def component_bag(architecture: Sequence[str] | Mapping[str, float] | Sequence[tuple[str, float]] | None,
                  ) -> dict[str, float]:
    """A canonical component → count bag: a list counts each occurrence once, a map gives the count,
    names that canonicalise alike add up; empty names and non-positive counts are dropped."""
    if not architecture:
        return {}
    bag: dict[str, float] = {}
    for item in architecture.items() if isinstance(architecture, Mapping) else architecture:
        name, count = (item, 1.0) if isinstance(item, str) else item
        key = canonical_component(name)
        if key and count > 0:
            bag[key] = bag.get(key, 0.0) + float(count)
    return bag


def structural(shared_min, query_total, record_total):
    """Weighted Jaccard Σ_c min(q_c, r_c) / Σ_c max(q_c, r_c), using Σ max = Σ q + Σ r − Σ min."""
    return shared_min / (query_total + record_total - shared_min)


# -- importance ---------------------------------------------------------------------------------

def is_dead_end(record: Record) -> bool:
    """Failed, crashed or regressed; or every metric with value, baseline and goal (at least one)
    moved strictly the wrong way — a non-finite value counts as the wrong way."""
    if record.status in _DEAD_STATUSES:
        return True
    verdicts = [verdict for m in record.metrics if (verdict := m.moved_wrong_way) is not None]
    return bool(verdicts) and all(verdicts)


def dead_end_reason(record: Record) -> str | None:
    """Why `is_dead_end` says so, in words a hover or warning can show (None: not a dead end):
    `status failed`, or each judged metric against its baseline and goal,
    `val_loss 3.10 vs 2.90 (min)` — the rule was applied, so the user is shown it."""
    if not is_dead_end(record):
        return None
    if record.status in _DEAD_STATUSES:
        return f"status {record.status.value}"
    judged = [m for m in record.metrics if m.moved_wrong_way is not None]
    moved = ", ".join(f"{m.name} {_figure(m.value)} vs {_figure(m.baseline)} ({m.goal})" for m in judged)
    return f"every metric moved the wrong way: {moved}"


def _figure(value: float | None) -> str:
    """A metric value as people write it: 2 decimals below 100, else up to 6 significant digits."""
    if value is None or not math.isfinite(value):
        return str(value)
    return f"{value:.2f}" if abs(value) < 100 else f"{value:.6g}"


def effect(record: Record) -> float:
    """min(1, max over metrics with value and baseline of |value − baseline| / max(|baseline|, 1e-12) / 0.10);
    0 with no such metric, 1 for a non-finite value or baseline."""
    best = 0.0
    for m in record.metrics:
        if m.baseline is None:
            continue
        if not (math.isfinite(m.value) and math.isfinite(m.baseline)):
            return 1.0
        best = max(best, abs(m.value - m.baseline) / max(abs(m.baseline), 1e-12) / EFFECT_SCALE)
    return min(1.0, best)


def importance(record: Record, dead_end: bool | None = None) -> float:
    """base = r.importance if given, else 0.5·[headline] + 0.2·[notes or details] + 0.3·effect;
    a dead end with a headline gets max(base, DEAD_END_IMPORTANCE_FLOOR). `dead_end`, when the caller
    knows it already, is `is_dead_end(record)`."""
    if record.importance is not None:
        base = record.importance
    else:
        base = (0.5 * bool(record.headline) + 0.2 * bool(record.notes or record.details)
                + 0.3 * effect(record))
    if record.headline and (is_dead_end(record) if dead_end is None else dead_end):
        return max(base, DEAD_END_IMPORTANCE_FLOOR)
    return base


# -- combination --------------------------------------------------------------------------------

def effective_weights(weights, applies):
    """w'_i = w_i / Σ_{j applies} w_j for the terms that apply, 0 for the rest (all 0 if that sum is 0).

    `weights` has the four terms on its last axis; `applies` is a boolean array of the same shape
    (or broadcastable), one row per record.
    """
    active = np.where(applies, weights, 0.0)
    total = active.sum(axis=-1, keepdims=True)
    return np.divide(active, total, out=np.zeros_like(active), where=total > 0)
