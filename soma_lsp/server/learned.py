"""A learned re-ordering of the shown gated ranking (lever `learned`, issue 20).

The hand-written levers (`evidence`) each move records by a constant fitted while reading one
workspace. This module orders the gated, arranged ranking once more by a linear score over what the
server already computed for every candidate — its place in today's order, the core's terms, the
standing, the tiers' labels, the named / hub / dead-end flags, the share of the cursor's line and
word it matches — with weights fitted by a pairwise logistic loss on the judged set's read
workspaces (`bench/learned_order.py` refits them and reports leave-one-workspace-out figures;
docs/benchmarks.md § Quality, tries 210–). It reads nothing the gate did not read: no I/O, no record
beyond the candidates, and it only re-orders what the gate passed (ties stay where they are).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..query import Hints
from ..retrieval import ScoredRecord, tokenize
from .evidence import name_stem, rarest_idf, strength

#: The features, in the order of `WEIGHTS`; each in [0, 1] or a score's units.
FEATURES = ("first", "position", "labelled", "same_setting", "same_knob", "sets", "sibling", "order", "score",
            "lexical", "structural", "recency", "dead_end", "named", "hub", "focus", "word", "scope",
            "strength", "matched", "name_matched", "name_focus", "name_word", "focus_idf", "word_idf",
            "scope_idf", "rarest", "crowd")

#: How many of the arranged ranking's first records are re-ordered: find-related's default list; the
#: weights are fitted on these, and a record further down stays there.
DEPTH = 20

#: Weights of `FEATURES` (score units per unit of feature): only `position` until refitted.
WEIGHTS = (0.0, 1.0) + (0.0,) * (len(FEATURES) - 2)


@dataclass(frozen=True, slots=True)
class Candidates:
    """What `related.find_related` knows of its gated ranking when it is arranged: the arranged order
    (`ranked`), the tiers' labels, the order key it sorted by, the named and hub records, the built
    query's words and hints, the pool's idf of the matched terms and its size."""

    ranked: Sequence[ScoredRecord]
    labels: Mapping[str, str]
    order: Callable[[ScoredRecord], float]
    named: frozenset[str]
    hubs: Mapping[str, float]
    asked: Sequence[str]
    hints: Hints
    idf: Mapping[str, float]
    n_records: int


def rows(candidates: Candidates) -> list[tuple[float, ...]]:
    """The feature vector (`FEATURES`) of each candidate, in the arranged order."""
    hints, asked = candidates.hints, set(candidates.asked)
    focus, word = set(hints.focus), set(hints.word)
    idf = candidates.idf
    unit = rarest_idf(candidates.n_records) or 1.0

    def weight(terms) -> float:
        return math.fsum(idf.get(t, 0.0) for t in terms)
    focus_w, word_w, asked_w = weight(focus), weight(word), weight(asked)
    stems: dict[str, int] = {}
    out = []
    for position, scored in enumerate(candidates.ranked):
        parts, rid = scored.components, scored.record.id
        own = set(parts.matched_terms)
        matched = set(own)
        for group in hints.aliases:  # one idea: naming it in other words matches the line's name of it
            if matched.intersection(group):
                matched.update(group)
        named = set(tokenize(scored.record.name)) & matched
        stem = name_stem(scored.record.name)
        crowd = stems.get(stem, 0)
        stems[stem] = crowd + 1
        label = candidates.labels.get(rid, "")
        out.append((
            float(position == 0), 1.0 / (1.0 + position), float(bool(label)),
            float(label.startswith("same setting")), float(label.startswith("same knob")),
            float(label.startswith("sets ")), float(label.startswith("sibling of")),
            candidates.order(scored), scored.score, parts.lexical or 0.0, parts.structural or 0.0,
            parts.recency or 0.0, float(scored.dead_end), float(rid in candidates.named),
            candidates.hubs.get(rid, 0.0),
            len(focus & matched) / len(focus) if focus else 0.0,
            len(word & matched) / len(word) if word else 0.0,
            len(asked & matched) / len(asked) if asked else 0.0,
            min(strength(scored, candidates.idf, hints.aliases) / unit, 10.0) / 10.0,
            min(len(parts.matched_terms), 10) / 10.0,
            len(named) / len(matched) if matched else 0.0,
            len(focus & named) / len(focus) if focus else 0.0,
            len(word & named) / len(word) if word else 0.0,
            weight(focus & matched) / focus_w if focus_w else 0.0,
            weight(word & matched) / word_w if word_w else 0.0,
            weight(asked & own) / asked_w if asked_w else 0.0,
            max((idf.get(t, 0.0) for t in own), default=0.0) / unit,
            min(crowd, 3) / 3.0,
        ))
    return out


def reorder(candidates: Candidates, weights: Sequence[float] = WEIGHTS) -> list[ScoredRecord]:
    """The first `DEPTH` candidates by the learned score, best first (equal scores keep the arranged
    order), then the rest as arranged."""
    head = replace(candidates, ranked=candidates.ranked[:DEPTH])
    scored = [sum(w * x for w, x in zip(weights, row)) for row in rows(head)]
    order = sorted(range(len(scored)), key=lambda i: (-scored[i], i))
    return [head.ranked[i] for i in order] + list(candidates.ranked[DEPTH:])


__all__ = ["DEPTH", "FEATURES", "WEIGHTS", "Candidates", "reorder", "rows"]
