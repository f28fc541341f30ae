"""Ranking: a query resolved against the index, scored in two steps, and its results.

A ranked query needs every record's score only to find the top few. So `rank` first scores every
slot approximately, in float32 (BM25 from cached float32 contributions), with a proven bound on the
error, keeps the slots that could be in the top `limit` within that bound (`approximate`), and
computes their components and scores exactly (`exact`: float64, the same arithmetic as the full pass
`limit=None` takes, so both agree to the last bit — the property tests check it).

What a query can reuse — per-record weightings per query shape, length norms, the approximate step's
float32 contributions (`contributions`), each query word's key and idf, each result's record's
components — is kept per *layout* (a counter that moves with every
update, merge or compaction) and dropped when it moves. So are the answers themselves, for the last
ANSWERS_KEPT (query, gate) pairs: an editor asks the same question again and again while the pool
stands — every identifier of one definition hovers with the definition's words — and at 1M records
a ranking costs 10–20 ms where a repeated one is a dictionary look-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress
from typing import Any

import numpy as np

from .. import terms as T
from ..model import TERMS, RetrievalQuery, ScoreComponents, ScoredRecord
from ..tokenize import tokenize
from .approximate import _ApproximatePass
from .exact import _ExactPass
from .pruned import _PrunedPass
from .resolved import _Query
from . import tuning
from .kept import kept


def _query_terms(text: str) -> list[str]:
    """The distinct terms of the query text, in first-seen order (so explanations read naturally)."""
    return list(dict.fromkeys(tokenize(text)))


class _Ranking(_ExactPass, _PrunedPass, _ApproximatePass):
    """`LiveIndex.rank` and `LiveIndex.score` (a part of `LiveIndex`, on the state `live` holds)."""

    def rank(self, query: RetrievalQuery, *, relevant_only: bool = False,
             min_score: float = 0.0) -> list[ScoredRecord]:
        """docs/spec.md §2.6: best first, exact ties by id, cut at `query.limit`. `relevant_only` keeps only
        records with lexical > 0 or structural > 0 (spec §3.5's gate); `min_score` drops lower scores."""
        with self._lock:
            if query.limit == 0:
                return []
            q = self._resolve(query)
            if query.limit is None:  # every record: nothing worth keeping
                return self._ranked(q, None, relevant_only, min_score)
            answers = self._per_layout().setdefault("answers", {})  # (query, gate) → results
            key = (tuple(q.terms), tuple(q.bag.items()), q.now, q.half_life_days, query.limit, query.weights,
                   relevant_only, min_score)
            return list(kept(answers, key, lambda: self._ranked(q, query.limit, relevant_only, min_score),
                             tuning.ANSWERS_KEPT))

    def _ranked(self, q: "_Query", limit: int | None, relevant_only: bool, min_score: float) -> list[ScoredRecord]:
        """`rank`'s results, computed: the approximate step's candidates (every slot for no limit),
        scored exactly, gated, ordered and cut."""
        if limit is None:  # every slot is scored exactly: no approximation needed
            slots, bm25 = np.flatnonzero(self._columns.view("alive")), None
        else:
            bm25 = self._approximate(q)
            slots = self._candidates(q, limit, relevant_only, bm25)
        exact = self._exact(q, slots, bm25)
        rows: Iterable[int] = range(slots.size)
        if relevant_only or min_score > 0:
            keep = np.ones(slots.size, dtype=bool)
            if relevant_only:
                keep &= (np.asarray(exact["lexical"]) > 0) | (np.asarray(exact["structural"]) > 0)
            if min_score > 0:
                keep &= np.asarray(exact["score"]) >= min_score
            rows = np.flatnonzero(keep).tolist()
        order = self._ordered(exact, rows)
        return self._scored(exact, order[:limit], q)

    def score(self, query: RetrievalQuery, record_ids: Iterable[str]) -> list[ScoredRecord]:
        """The scores `rank` would give these records (unknown ids are skipped), in the order given."""
        with self._lock:
            slots = np.array([self._slot_of[i] for i in record_ids if i in self._slot_of], dtype=np.int64)
            if not slots.size:
                return []
            q = self._resolve(query)
            exact = self._exact(q, slots, self._approximate(q))
            return self._scored(exact, list(range(slots.size)), q)

    def warm(self, queries: Iterable[RetrievalQuery], texts: Iterable[str] = ()) -> None:
        """Make now what the first query after a change of layout would make, for queries of these
        shapes (words or not, a component bag or not, `now`, weights, half-life): the length norms,
        the segments' posting samples, the presence vectors of the common components (a byte a slot
        each, ≈ 60 MB at 1M records: otherwise made by the structural term of the first bags that
        name them, 5–15 ms of a big scope's first hover) and their bit planes (`planes`), and each
        shape's per-record weighting and static part for its `now`; then the approximate step's contributions of the words of `texts`,
        in their order — the questions about to be asked (the server gives the hovers of the open
        documents' definitions): a word new to the layout costs a query ≈ 2.6 ns of CPU a posting, at
        1M records ≈ 25 ms of the first hover of a big definition after a load — until the cache
        holds 1/WARM_SHARE of its budget. The server calls it at the end of a load, before it says
        the load is over: at 1M records the first hover after a load paid ≈ 0.1 s of CPU for the
        first part alone (docs/benchmarks.md § 1M).
        Nothing is ranked or kept as an answer; one step per hold of the lock (a word's
        contributions are one), so a query arriving meanwhile waits for one step, not all; an update
        meanwhile ends it (the next query makes the rest, as it would have)."""
        with self._lock:
            layout = self._layout
            segments = [*self._terms.segments, *self._components.segments]
            common = np.flatnonzero(self._components.doc_freq * tuning.PRESENCE_FRACTION >= self._columns.size)
            keys, _, idf, _ = self._known(_query_terms(" ".join(texts)))
        shapes = [lambda query=query: self._static_part(self._resolve(query)) for query in queries]
        presence = [lambda key=key: self._presence(key) for key in common.tolist()]
        words = [lambda key=key, idf_t=idf_t: self._made_ahead(key, idf_t) for key, idf_t in zip(keys.tolist(), idf)]
        for step in (self._length_norm, self._length_norm32, self._dense_fraction, self._dead,
                     *(s._sampled for s in segments), *presence, self._planes, *shapes, *words):
            with self._lock:
                if self._layout != layout:
                    return
                step()

    def idf_of(self, terms: Iterable[str]) -> dict[str, float]:
        """spec §2.2's idf of each term over the records as they stand (0 for a term no record
        holds): how specific a matched word is, for the server's relevance gate, which needs a
        match's absolute strength where lexical is normalised to the best match."""
        names = list(dict.fromkeys(terms))
        with self._lock:
            found, df = self._terms.keys_of(names), self._terms.doc_freq
            out = {}
            for name, key in zip(names, found.tolist()):
                n_t = int(df[key]) if key >= 0 else 0
                out[name] = float(T.idf(len(self._slot_of), n_t)) if n_t > 0 else 0.0
            return out

    def _resolve(self, query: RetrievalQuery) -> "_Query":
        terms = _query_terms(query.text)
        key_array, key_terms, idf, dense = self._known(terms)
        bag, bag_keys, total = self._bag_of(query.architecture)
        return _Query(
            terms=terms, keys=key_array, key_terms=key_terms, idf=idf, dense=dense,
            bag=bag, bag_keys=bag_keys, bag_total=total, now=None if query.now is None else T.epoch_seconds(query.now),
            half_life_days=query.half_life_days,
            weighting=self._weighting(query, bool(terms), total > 0))

    def _bag_of(self, architecture: Any) -> tuple[dict[str, float], list[int], float]:
        """A query architecture's component bag, its components' keys (-1: none the pool knows) and its
        total, kept per layout for the last BAGS_KEPT architectures: a file's hovers ask with one, and its
        parse and look-up cost ≈ 6 µs of a short query's rank. (An architecture that cannot be a dict
        key is resolved each time.)"""
        def resolved() -> tuple[dict[str, float], list[int], float]:
            bag = T.component_bag(architecture)
            return bag, self._components.keys_of(list(bag)).tolist() if bag else [], float(sum(bag.values()))

        if not architecture:
            return {}, [], 0.0
        try:
            key = tuple(architecture.items()) if isinstance(architecture, Mapping) else tuple(architecture)
            hash(key)
        except TypeError:
            return resolved()
        return kept(self._per_layout().setdefault("architectures", {}), key, resolved, tuning.BAGS_KEPT)

    def _known(self, terms: list[str]) -> tuple[np.ndarray, list[str], list[float], list[bool]]:
        """The keys of the terms that live records hold, those terms, their idf and whether each is added
        as a dense vector (`_dense`). Each term's key, idf and density (None: no live record holds it) is
        kept while the layout stands, for TERMS_KEPT terms: a
        short query's look-up and idf in numpy, a dozen calls on three values, cost ≈ 12 µs of its
        rank, where the editor's questions keep coming back to the same words. The idf is the same
        float whichever terms it is computed with (`terms.idf` is elementwise)."""
        kept_terms = self._per_layout().setdefault("terms", {})  # term → (key, idf, dense), or None
        entries = {term: kept_terms[term] for term in terms if term in kept_terms}
        new = [term for term in dict.fromkeys(terms) if term not in entries]
        if new:
            found, df = self._terms.keys_of(new), self._terms.doc_freq
            known = found >= 0
            known[known] = df[found[known]] > 0
            keys = found[known]
            made = iter(zip(keys.tolist(), T.idf(len(self._slot_of), df[keys]).tolist(), self._dense(keys).tolist()))
            looked = {term: next(made) if k else None for term, k in zip(new, known.tolist())}
            entries.update(looked)
            if len(kept_terms) + len(looked) > tuning.TERMS_KEPT:
                kept_terms.clear()
            if len(looked) <= tuning.TERMS_KEPT:
                kept_terms.update(looked)
        pairs = [(term, found) for term in terms if (found := entries[term]) is not None]
        return (np.array([key for _, (key, _, _) in pairs], dtype=np.int64), [term for term, _ in pairs],
                [idf for _, (_, idf, _) in pairs], [dense for _, (_, _, dense) in pairs])

    def _per_layout(self) -> dict[Any, Any]:
        """Query caches valid while the layout stands (slots, segments, N and avgdl unchanged)."""
        if self._cache_layout != self._layout:
            self._layout_cache = {}
            self._cache_layout = self._layout
        return self._layout_cache

    def _length_norm(self) -> np.ndarray:
        cache = self._per_layout()
        if "norm" not in cache:
            n = len(self._slot_of)
            avgdl = self._total_dl / n if n else 0.0
            dl = self._columns.view("dl")
            cache["norm"] = T.length_norm(dl, avgdl) if avgdl > 0 else np.full(dl.shape, T.K1)
        return cache["norm"]

    def _weighting(self, query: RetrievalQuery, lexical_applies: bool, query_has_architecture: bool) -> dict:
        """What a query's score needs besides its lexical and structural values, per record: the
        effective weights (one row per applicability class), w'·importance and recency's per-record
        base. It depends only on the index layout and the query's shape, so it is kept between queries."""
        weightings = self._per_layout().setdefault("weightings", {})  # query shape → weighting
        key = (lexical_applies, query_has_architecture, query.now is not None, query.weights, query.half_life_days)
        # (a handful of query shapes alternate — with or without architecture, … —: keep them all)
        return kept(weightings, key, lambda: self._new_weighting(query, lexical_applies, query_has_architecture),
                    tuning.WEIGHTINGS_KEPT)

    def _new_weighting(self, query: RetrievalQuery, lexical_applies: bool, query_has_architecture: bool) -> dict:
        columns = self._columns
        time = columns.view("time")
        has_time = ~np.isnan(time)
        structural_applies = (columns.view("arch_total") > 0) & query_has_architecture
        recency_applies = has_time & (query.now is not None)
        weights = np.asarray(query.weights.as_tuple())
        applies = np.array([[lexical_applies, s, r, True] for s in (False, True) for r in (False, True)])
        table = T.effective_weights(weights, applies)
        classes = structural_applies.astype(np.intp) * 2 + recency_applies
        t_ref = float(time[has_time].max()) if has_time.any() else 0.0
        effective = [table[:, term][classes] for term in range(3)]
        recency_base = np.where(has_time, T.decay_base(np.nan_to_num(time, nan=t_ref), t_ref,
                                                       query.half_life_days), 0.0)
        weighting = {
            "table": table, "classes": classes, "t_ref": t_ref,
            "weights": [dict(zip(TERMS, row)) for row in table.tolist()],  # each class's, for a result to copy
            "structural_applies": structural_applies, "recency_applies": recency_applies,
            "effective": effective, "importance": table[:, 3][classes] * columns.view("importance"),
            "static": {},  # `now` → the approximate step's query-independent part (`_static_part`)
            "structural": {},  # component bag → the approximate step's structural term (`_structural_part`)
            "bags": {},  # the last component bags asked (`_bag_again`)
            "denominators": {},  # Σ q → Σ q + Σ r per slot, float32 (`_denominators`)
            "bounded": {},  # (`now`, Σ q) → a bound of the approximate score's static and structural part
        }
        weighting["float32"] = {  # the same, rounded, for `_candidates`
            name: np.asarray(values, dtype=np.float32) for name, values in (
                ("lexical", effective[0]), ("structural", effective[1]), ("recency", effective[2]),
                ("importance", weighting["importance"]), ("recency_weighted", effective[2] * recency_base),
                ("arch_total", columns.view("arch_total")))}
        return weighting

    def _ordered(self, exact: Mapping[str, Any], rows: Iterable[int]) -> list[int]:
        """Rows by score descending, then record id ascending."""
        records, slots, score = self._slot_records, exact["slots"], exact["score"]
        return sorted(rows, key=lambda i: (-score[i], records[slots[i]].id))

    def _scored(self, exact: Mapping[str, Any], rows: list[int], q: "_Query") -> list[ScoredRecord]:
        """The results of these rows, their values taken out of numpy once for all of them (the exact
        step's lists, for a few slots, are read as they are)."""
        if not rows:
            return []
        at = np.asarray(rows)

        def picked(values: Any) -> list:
            return values[at].tolist() if isinstance(values, np.ndarray) else [values[i] for i in rows]

        slots = picked(exact["slots"])
        score, lexical, structural, matched = (picked(exact[name]) for name in ("score", "lexical", "structural",
                                                                                 "matched"))
        recency = picked(exact["recency"]) if exact["recency"] is not None else [None] * at.size
        structural_applies, recency_applies = picked(exact["structural_applies"]), picked(exact["recency_applies"])
        classes, weights = picked(exact["classes"]), q.weighting["weights"]
        slots_at = np.asarray(slots, dtype=np.intp)  # (indexing with the list would convert it twice)
        importance, dead_end = self._columns.importance[slots_at].tolist(), self._columns.dead_end[slots_at].tolist()
        records, in_query = self._slot_records, q.bag.__contains__
        kept_components = self._per_layout().setdefault("record_components", {})  # slot → its components
        results = []
        for i, slot in enumerate(slots):
            record = records[slot]
            own = kept_components.get(slot)
            if own is None:
                own = kept_components[slot] = tuple(sorted(T.component_bag(record.architecture)))
            components = ScoreComponents(  # (positional, in the fields' order: a third less than by keyword)
                lexical[i] if q.terms else None, structural[i] if structural_applies[i] else None,
                recency[i] if recency_applies[i] else None, importance[i], weights[classes[i]].copy(),
                tuple(compress(q.key_terms, matched[i])), tuple(filter(in_query, own)))
            results.append(ScoredRecord(record, score[i], components, dead_end[i]))
        if len(kept_components) > tuning.RECORD_COMPONENTS_KEPT:
            kept_components.clear()
        return results
