"""`rank`: docs/spec.md §2.6's entry point, over a sequence of records or a prebuilt live index."""

from __future__ import annotations

from collections.abc import Iterable

from ..records import Record
from .index import LiveIndex
from .model import RetrievalQuery, ScoredRecord


def rank(records: Iterable[Record] | LiveIndex, query: RetrievalQuery) -> list[ScoredRecord]:
    """Rank records against query, best first: score descending, exact ties by id ascending,
    cut at `query.limit` (None = all). A live index is ranked as it stands, with no rebuild."""
    index = records if isinstance(records, LiveIndex) else LiveIndex(records)
    return index.rank(query)
