"""The value types of retrieval: what a query asks, and what a result says about itself (docs/spec.md §2.6-2.7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from ..records import Record

DEFAULT_HALF_LIFE_DAYS = 30.0
DEAD_END_IMPORTANCE_FLOOR = 0.8
TERMS = ("lexical", "structural", "recency", "importance")


@dataclass(frozen=True, slots=True)
class Weights:
    """Non-negative weights of the four terms, not all zero."""

    lexical: float = 0.40
    structural: float = 0.25
    recency: float = 0.15
    importance: float = 0.20

    def __post_init__(self) -> None:
        values = self.as_tuple()
        if any(not isinstance(v, int | float) or isinstance(v, bool) or not v >= 0 or v == float("inf")
               for v in values):
            raise ValueError(f"weights must be finite non-negative numbers, got {values}")
        if sum(values) <= 0:
            raise ValueError("weights must not all be zero")

    @classmethod
    def coerce(cls, value: "Weights | Mapping[str, float] | None") -> "Weights":
        """Accept a `Weights`, a mapping of term → weight (missing terms keep their default), or None."""
        if value is None:
            return DEFAULT_WEIGHTS
        if isinstance(value, Weights):
            return value
        unknown = set(value) - set(TERMS)
        if unknown:
            raise ValueError(f"unknown weight(s): {', '.join(sorted(unknown))}; expected {', '.join(TERMS)}")
        return cls(**{k: float(v) for k, v in value.items()})

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.lexical, self.structural, self.recency, self.importance)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(TERMS, self.as_tuple()))


DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """What to retrieve, and what to measure it against. `now` is a parameter: no clock is read.

    `architecture` takes the record forms: a list of component names or a map name → count.
    `limit=None` returns every record.
    """

    text: str = ""
    architecture: Sequence[str] | Mapping[str, float] | None = None
    now: datetime | None = None
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    limit: int | None = 10
    weights: Weights | Mapping[str, float] = DEFAULT_WEIGHTS

    def __post_init__(self) -> None:
        if not self.half_life_days > 0:
            raise ValueError(f"half_life_days must be > 0, got {self.half_life_days!r}")
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"limit must be >= 0 or None, got {self.limit!r}")
        object.__setattr__(self, "weights", Weights.coerce(self.weights))


@dataclass(frozen=True, slots=True)
class ScoreComponents:
    """The four terms behind a score (None where a term did not apply), the effective weights (term →
    weight after redistribution), the
    query terms the record's document contains and the canonical components both sides share."""

    lexical: float | None
    structural: float | None
    recency: float | None
    importance: float
    weights: Mapping[str, float]
    matched_terms: tuple[str, ...] = ()
    shared_components: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoredRecord:
    """A record and why it came back."""

    record: Record
    score: float
    components: ScoreComponents
    dead_end: bool = field(default=False)


class Embedder(Protocol):
    """Turns texts into vectors. soma-lsp ships none: the seam lets a model be plugged in from outside."""

    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]: ...


def embedding_text(record: Record) -> str:
    """The text an embedder is given: name, headline, notes and details, once each, newline-joined."""
    return "\n".join(t for t in (record.name, record.headline, record.notes, record.details) if t)
