"""A ranked record's standing in the server's gate and order: old runs age less (levers `dead_ends`, `old_runs`).

The core's score gives recency a weight, so a year-old dead end scores up to that weight less than a
record of last week that matches as well — but a dead end is exactly what a researcher must see
however old it is (issue 20: "a year-old dead end is what must surface"). The server reads a dead
end's standing as its score with most (`DEAD_END_SHARE`) of the recency it lost given back —
`score + 0.75 · w_recency · (1 − recency)` with the effective weight the core used — for the relevance
gate (`hover.minScore`) and for the order of the gated ranking. Any other run gets back
`OLD_RUN_SHARE` of what it lost (lever `old_runs`): the run that set the current value two years ago
still answers "what have I tried here", if less pressingly than a dead end. The core's ranking
(docs/spec.md §2) is untouched: `soma-lsp query` still shows the score; only which records an editor
surface shows and their order move.
"""

from __future__ import annotations

from ..retrieval import ScoredRecord, Weights

#: The share of the recency it lost that a dead end gets back (lever `dead_ends`; tuned on the tune
#: probes with the first two fresh workspaces among them: 0.9 / 0.75 / 0.6 / 0.5 gave nDCG@5 / R@3
#: 0.832 / 0.868 · 0.834 / 0.868 · 0.831 / 0.871 · 0.822 / 0.854, held-out equal at 0.75, docs/benchmarks.md
#: § Quality tries 66 and 78): most of it — an old dead end still surfaces, behind a recent one that
#: matches as well, and less often above a better match on one shared generic word.
DEAD_END_SHARE = 0.75
#: The share of the recency it lost that a run which is no dead end gets back (lever `old_runs`;
#: tuned on the judged set's tune probes: 0.25 / 0.5 / 0.75 gave tune nDCG@5 0.826 / 0.822 / 0.812,
#: docs/benchmarks.md § Quality).
OLD_RUN_SHARE = 0.25


def lift(scored: ScoredRecord, dead_ends: bool = True, old_runs: bool = False) -> float:
    """What a record gets back of the recency weight it lost: `DEAD_END_SHARE` of it for a dead end
    (lever `dead_ends`), `OLD_RUN_SHARE` for any other run (lever `old_runs`), else 0."""
    parts = scored.components
    share = (DEAD_END_SHARE if dead_ends else 0.0) if scored.dead_end else (OLD_RUN_SHARE if old_runs else 0.0)
    if not share or parts.recency is None:
        return 0.0
    return share * parts.weights.get("recency", 0.0) * (1.0 - parts.recency)


def standing(scored: ScoredRecord, dead_ends: bool, old_runs: bool = False) -> float:
    """The score the server gates and orders by: the core's, lifted as the levers say."""
    return scored.score + lift(scored, dead_ends, old_runs)


def max_lift(weights: Weights) -> float:
    """The most a record the gate keeps (lexical or structural present) can be lifted under these
    weights — its recency's share when the other of lexical and structural is missing: how far below
    `hover.minScore` the core is read so that no lifted record is missed."""
    rest = weights.recency + weights.importance + min(weights.lexical, weights.structural)
    return weights.recency / rest if rest > 0 else 0.0


__all__ = ["DEAD_END_SHARE", "OLD_RUN_SHARE", "lift", "max_lift", "standing"]
