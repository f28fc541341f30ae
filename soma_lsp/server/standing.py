"""A ranked record's standing in the server's gate and order: a dead end does not age (lever `dead_ends`).

The core's score gives recency a weight, so a year-old dead end scores up to that weight less than a
record of last week that matches as well — but a dead end is exactly what a researcher must see
however old it is (issue 20: "a year-old dead end is what must surface"). The server reads a dead
end's standing as its score with the recency it lost given back — `score + w_recency · (1 − recency)`
with the effective weight the core used — for the relevance gate (`hover.minScore`) and for the
order of the gated ranking. The core's ranking (docs/spec.md §2) is untouched: `soma-lsp query`
still shows the score; only which records an editor surface shows and their order move.
"""

from __future__ import annotations

from ..retrieval import ScoredRecord, Weights


def lift(scored: ScoredRecord) -> float:
    """What a dead end gets back of the recency weight it lost (0 for any other record)."""
    parts = scored.components
    if not scored.dead_end or parts.recency is None:
        return 0.0
    return parts.weights.get("recency", 0.0) * (1.0 - parts.recency)


def standing(scored: ScoredRecord, dead_ends: bool) -> float:
    """The score the server gates and orders by: the core's, a dead end's lifted (lever on)."""
    return scored.score + lift(scored) if dead_ends else scored.score


def max_lift(weights: Weights) -> float:
    """The most a record the gate keeps (lexical or structural present) can be lifted under these
    weights — its recency's share when the other of lexical and structural is missing: how far below
    `hover.minScore` the core is read so that no lifted dead end is missed."""
    rest = weights.recency + weights.importance + min(weights.lexical, weights.structural)
    return weights.recency / rest if rest > 0 else 0.0


__all__ = ["lift", "max_lift", "standing"]
