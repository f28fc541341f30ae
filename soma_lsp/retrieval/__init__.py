"""Ranked retrieval over the experiment pool (docs/spec.md §2): pure, deterministic, no clock, RNG or I/O.

score = 0.40·lexical + 0.25·structural + 0.15·recency + 0.20·importance, the weights of terms that
do not apply redistributed over those that do.
"""

from .documents import CountedLines, Counts, count_lines
from .index import IndexState, LiveIndex
from .model import (
    DEAD_END_IMPORTANCE_FLOOR,
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_WEIGHTS,
    TERMS,
    Embedder,
    RetrievalQuery,
    ScoreComponents,
    ScoredRecord,
    Weights,
    embedding_text,
)
from .rank import rank
from .terms import canonical_component, component_bag, dead_end_reason, importance, is_dead_end
from .tokenize import tokenize

__all__ = [
    "DEAD_END_IMPORTANCE_FLOOR", "DEFAULT_HALF_LIFE_DAYS", "DEFAULT_WEIGHTS", "TERMS", "CountedLines", "Counts",
    "Embedder", "IndexState", "LiveIndex", "RetrievalQuery", "ScoreComponents", "ScoredRecord", "Weights",
    "canonical_component", "component_bag", "count_lines", "dead_end_reason", "embedding_text", "importance",
    "is_dead_end", "rank", "tokenize",
]
