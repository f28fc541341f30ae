"""What every feature asks: the records related to a scope — ties first, then the gated ranking (docs/spec.md §3).

Pure over its inputs (an index, a retrieval query, the scope's definitions), so hover, lenses, the
commands and `soma-lsp explain` all go through the same code. It stays in the server layer, as a
shared module that is no feature, because both rules are product policy for what the editor shows
(the gate's thresholds are settings, the tie rules follow the LSP scopes), not retrieval: the core
ranks and scores any query, the query builder says what a scope is, and this module decides which
of those records an editor surface may show and in what order. It uses only the core and the query
builder, never a feature or the session.

* **Relevance gate**: ranked records need lexical > 0 or structural > 0 and score ≥ `hover.minScore`;
  for code scopes (hover, lenses, find-related on a document) also *evidence*: at least
  `MIN_MATCHED_TERMS` distinct query terms in the record's text, or a shared component. The core's
  lexical term is normalised by the best match of the query, so the best lexical match always has
  lexical = 1 however weak it is in absolute terms (one shared word such as `load` or `torch`);
  the evidence rule keeps such single-word coincidences out of hovers and lenses. A text given
  explicitly (the command's `text` alone) needs one matched term, as the core's gate says.
* **Reach** (lever `reach`): what is asked on a document — find-related, and the lens's count, which is
  the length of that list — lets a ranked record standing up to `REACH` under `hover.minScore` through
  when it is strong (`evidence.strong`, the strength gate's summed idf): a record matching several rare
  words of the scope at 0.4–0.5 (an old run, a terse note) is still about this code, and the user asked;
  one matching a word or two that many records hold is not. What is shown unasked stays as it was: a
  hover does not reach, and a lens shows only when a tie or a record at `hover.minScore` is strong
  (`worth_a_lens` skips `Related.reached`). The evidence rule is not relaxed: one shared word, however
  rare, let in more coincidences than must-see records (docs/benchmarks.md § Quality, 250–255).
* **Ties**: records whose `code` ties name this file and point at the scope — the definition itself,
  one it encloses or that encloses it (`Class` for `Class.method`) — and records tied to such a
  definition through the commit they ran at (`pool.commit_ties`; a written `code` tie wins when a
  record has both). A tie to the file as a whole (a path without a symbol) points at the file, not
  at each definition in it: only the whole-file scopes take it (a hover outside every definition,
  "find related experiments" on the whole file, the file-level lens), and inside a definition the
  record has to pass the gate like any other. The whole-file scope of "find related experiments"
  takes every tie in the file. Ties pass the gate whatever their score, come first, dead ends first
  among them, then by score — except, with lever `tie_focus`, a tie off the line of a body the
  cursor is on, which comes right after the first ranked record (`late_ties`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..pool.commit_ties import CommitTie
from ..query import ALL_ON, NO_HINTS, Definition, Hints, Levers, find_definition, related as symbols_related
from ..records import Record
from ..retrieval import LiveIndex, RetrievalQuery, ScoredRecord, tokenize
from . import evidence
from .embedder import Similarity
from .standing import max_lift, standing

#: Distinct matched query terms a ranked record needs in a code scope (or a shared component).
MIN_MATCHED_TERMS = 2

#: How far the gated ranking is read to count lenses and find-related lists (beyond it: "N+").
COUNT_CAP = 200
#: … and a hover's "N more related" (a hover is latency-bound: every result read is built).
HOVER_COUNT_CAP = 50
#: How far under `hover.minScore` a strong record passes the gate of an asked list (lever `reach`; on the
#: eleven read workspaces 0.10 / 0.20 lifted R@3 by 1.83 / 1.33 probes, 0.20 one down; without the strength
#: condition 0.10 / 0.15 lifted it as much but listed 22 / 25 more records at the 31 quiet probes, against
#: 5 with it; docs/benchmarks.md § Quality, 251 and 254).
REACH = 0.10


@dataclass(frozen=True, slots=True)
class Related:
    """Tied records (marked), then ranked ones — the ties in `late` (off the cursor's line, lever
    `tie_focus`) right after the first ranked one; `total` counts all up to COUNT_CAP (`capped`)."""

    tied: tuple[ScoredRecord, ...]
    ranked: tuple[ScoredRecord, ...]
    total: int
    capped: bool
    commits: Mapping[str, CommitTie] = field(default_factory=dict)  # record id → its tie through a commit
    labels: tuple[tuple[str, str], ...] = ()  # (record id, why it is shown) from `evidence`
    late: tuple[ScoredRecord, ...] = ()  # tied records shown after the first ranked one
    reached: frozenset[str] = frozenset()  # ranked record ids standing under `hover.minScore` (lever `reach`)

    def shown(self, limit: int | None = None) -> list[tuple[ScoredRecord, bool]]:
        """The first `limit` results (None: all) as (scored, tied)."""
        items = ([(s, True) for s in self.tied] + [(s, False) for s in self.ranked[:1]]
                 + [(s, True) for s in self.late] + [(s, False) for s in self.ranked[1:]])
        return items if limit is None else items[:limit]

    def more(self, limit: int) -> int:
        return max(0, self.total - min(limit, len(self.tied) + len(self.late) + len(self.ranked)))

    @property
    def dead_ends(self) -> int:
        return sum(s.dead_end for s in (*self.tied, *self.late, *self.ranked))

    def __bool__(self) -> bool:
        return bool(self.tied or self.late or self.ranked)


def tie_points_at(symbol: str | None, scope: Definition | None, defs: Sequence[Definition], *,
                  file_scope_takes_all: bool) -> bool:
    """Whether a tie (`symbol` None = the whole file) points at the scope (None = the whole file)."""
    if symbol is None:
        return scope is None
    if scope is None:
        return file_scope_takes_all
    target = find_definition(list(defs), symbol)
    return symbols_related(target.qualname if target is not None else symbol, scope)


@dataclass(frozen=True, slots=True)
class Tied:
    """A record tied to the scope: by its `code` (`commit` None) or through the commit it ran at."""

    record: Record
    commit: CommitTie | None = None


def tied_records(index: LiveIndex, relpath: str | None, scope: Definition | None,
                 defs: Sequence[Definition], *, file_scope_takes_all: bool,
                 commit_ties: Iterable[CommitTie] = ()) -> list[Tied]:
    """Records with a tie on this file pointing at the scope: written ties in id order, then those
    tied through a commit (`commit_ties`: the file's, from `pool.commit_ties`) in id order."""
    out: list[Tied] = []
    if relpath:
        for record in index.tied_to(relpath):
            if any(tie.path == relpath and tie_points_at(tie.symbol, scope, defs,
                                                         file_scope_takes_all=file_scope_takes_all)
                   for tie in record.code):
                out.append(Tied(record))
    seen = {t.record.id for t in out}
    for tie in sorted(commit_ties, key=lambda t: (t.record_id, t.qualname)):
        if tie.record_id in seen or not tie_points_at(tie.qualname, scope, defs,
                                                       file_scope_takes_all=file_scope_takes_all):
            continue
        record = index.get(tie.record_id)
        if record is not None:
            seen.add(tie.record_id)
            out.append(Tied(record, tie))
    return out


def _tie_order(scored: ScoredRecord) -> tuple:
    return (not scored.dead_end, -scored.score, scored.record.id)


def has_evidence(scored: ScoredRecord, min_terms: int, pointed: Sequence[str] = ()) -> bool:
    """`min_terms` matched terms or a shared component — or, asked for (find-related, not a hover),
    a term of the word under the cursor (`pointed`): the word the user points at is no coincidence."""
    parts = scored.components
    return (len(parts.matched_terms) >= min_terms or bool(parts.structural)
            or not set(pointed).isdisjoint(parts.matched_terms))


def reach_below(levers: Levers) -> float:
    """How far under `hover.minScore` a strong record passes in a list asked on a document (find-related,
    a lens's count): `REACH` with lever `reach`, else 0."""
    return REACH if levers.reach else 0.0


def ranked_query(index: LiveIndex, query: RetrievalQuery, hints: Hints, levers: Levers) -> RetrievalQuery:
    """The query `find_related` ranks with: with lever `forms`, the built query plus the pool's
    spellings of the words near the cursor that it does not hold as written (`evidence.with_forms`) —
    what the server's warming at the end of a load asks ahead of the first hovers, too."""
    return evidence.with_forms(index, query, hints.focus + hints.word) if levers.forms else query


def find_related(index: LiveIndex, query: RetrievalQuery, tied: Iterable[Tied], *, min_score: float,
                 limit: int | None, count: bool = True, min_terms: int = MIN_MATCHED_TERMS,
                 count_cap: int = COUNT_CAP, levers: Levers = ALL_ON, hints: Hints = NO_HINTS,
                 unasked: bool = False, similarity: Similarity | None = None, reach: float = 0.0) -> Related:
    """Ties first (scored with the same query), then the gated ranking without them, arranged by
    the levers' evidence (`arrange`, with the built query's `hints`).

    With lever `forms` the query first gains the pool's spellings of the words near the cursor that
    the pool does not hold as written (`evidence.with_forms`); ties are scored with that query too.
    With lever `tie_focus`, a tie that matches nothing near the cursor inside a definition's body
    (`late_ties`) is shown after the first ranked record (`Related.late`), not before it.
    `unasked`: for a hover, which must stay quiet where nothing relates: the strength gate drops weak
    ranked records there (lever `strength`), not from find-related (lenses: `worth_a_lens`).
    `reach`: how far under `min_score` a strong ranked record still passes (asked on a document, lever
    `reach`: `reach_below(levers)`); those that stand under `min_score` are `Related.reached`.
    `limit` bounds what is returned (None: everything up to COUNT_CAP); with `count`, the gated
    ranking is read to `count_cap` to say how many there are in all. The gated ranking is ordered by
    standing, plus (lever `components`) `evidence.COMPONENT_BONUS` × its structural term, plus the
    bonuses of `named` and `similarity` (an embedder's, `server.embedder`, off by default), less (lever
    `hubs`) `evidence.HUB_WEIGHT` × the share of the file's other definitions (`hints.others`) a record
    relates to as much as to the scope (`evidence.hub_shares`)."""
    tied = list(tied)
    here = tokenize(query.text) if levers.hubs and hints.others else ()  # the scope's words, as asked
    query = ranked_query(index, query, hints, levers)
    tied_ids = [t.record.id for t in tied]
    tied_scored = sorted(index.score(query, tied_ids), key=_tie_order)
    tied_set = set(tied_ids)
    want = count_cap if (count or limit is None) else max(0, limit - len(tied_scored))
    read = count_cap if levers.strength and unasked else want  # the strength gate may drop some: read on
    lifted = levers.dead_ends or levers.old_runs or levers.named
    gate = max(0.0, min_score - reach)
    floor = max(0.0, gate - max_lift(query.weights)) if lifted and gate > 0 else gate
    ranked_all = index.rank(_with_limit(query, max(want, read) + len(tied_set)), relevant_only=True,
                            min_score=floor)
    pointed = hints.word if levers.cursor and not unasked else ()
    named = {s.record.id for s in ranked_all if evidence.names_the_word(s.record, pointed)} \
        if levers.named and not hints.on_name else set()

    def stands(s: ScoredRecord) -> float:
        return standing(s, levers.dead_ends, levers.old_runs)
    idf: dict[str, float] = {}

    def reaches(s: ScoredRecord) -> bool:  # under `min_score`, within `reach`, and strong (the idf of its words)
        if stands(s) < gate:
            return False
        if not idf:
            idf.update(index.idf_of(t for r in ranked_all for t in r.components.matched_terms))
        return evidence.strong(s, idf, hints.aliases, n_records=len(index))
    ranked = [s for s in ranked_all if s.record.id not in tied_set and has_evidence(s, min_terms, pointed)
              and (stands(s) >= min_score or s.record.id in named or (reach and reaches(s)))]
    reached = frozenset(s.record.id for s in ranked if stands(s) < min_score and s.record.id not in named) \
        if reach else frozenset()
    bonus = similarity(ranked) if similarity is not None else {}
    hubs = evidence.hub_shares(index, ranked, here, hints.others, hints.word) if here else {}

    shared = evidence.COMPONENT_BONUS if levers.components else 0.0

    def order(s: ScoredRecord) -> float:
        return (stands(s) + bonus.get(s.record.id, 0.0) + (evidence.NAME_BONUS if s.record.id in named else 0.0)
                + shared * (s.components.structural or 0.0) - evidence.HUB_WEIGHT * hubs.get(s.record.id, 0.0))
    if lifted or bonus or shared or hubs:
        ranked.sort(key=lambda s: (-order(s), s.record.id))
    capped = len(ranked_all) >= want + len(tied_set) and want > 0
    ranked, labels = arrange(index, query, tied_scored, ranked, gate=unasked and min_terms > 1,
                             levers=levers, hints=hints, order=order)
    total = len(tied_scored) + len(ranked)
    if limit is not None:
        ranked = ranked[: max(0, limit - len(tied_scored))]
    late = late_ties(tied_scored, levers, hints) if ranked else []
    first = [s for s in tied_scored if s not in late]
    commits = {t.record.id: t.commit for t in tied if t.commit is not None}
    return Related(tuple(first), tuple(ranked), total, capped, commits, labels, tuple(late), reached)


def worth_a_lens(index: LiveIndex, related: Related, *, levers: Levers, hints: Hints) -> bool:
    """Whether a definition gets a lens: something related, and with lever `strength` something
    strong — a tie, a same-setting record, or a ranked record at `hover.minScore` (not one the lever
    `reach` brought in) that passes the strength gate. The lens's count stays that of find-related at
    its position (spec §4.3); only whether it shows moves."""
    if not related or not levers.strength or related.tied or related.late:
        return bool(related)
    if any(label.startswith("same setting") for _, label in related.labels):
        return True
    idf = index.idf_of(t for s in related.ranked for t in s.components.matched_terms)
    labelled = dict(related.labels)
    return any(evidence.strong(s, idf, hints.aliases, n_records=len(index))
               for s in related.ranked if s.record.id not in labelled and s.record.id not in related.reached)


def late_ties(tied: Sequence[ScoredRecord], levers: Levers, hints: Hints) -> list[ScoredRecord]:
    """Lever `tie_focus`: the tied records that match nothing near the cursor, when it is inside a
    definition's body (`hints.in_body`; on its name line the whole definition is asked, and every tie
    to it is about that): shown after the top ranked record, their siblings after that record's."""
    return evidence.off_the_line(tied, hints.near) if levers.tie_focus and hints.in_body else []


def arrange(index: LiveIndex, query: RetrievalQuery, tied: Sequence[ScoredRecord],
            ranked: list[ScoredRecord], *, gate: bool, levers: Levers, hints: Hints,
            order: Callable[[ScoredRecord], float] = lambda s: s.score,
            ) -> tuple[list[ScoredRecord], tuple[tuple[str, str], ...]]:
    """The issue-20 levers on a gated ranking (see `evidence`): the strength gate, on a function's name
    line the runs about the settings its body reads (`evidence.read_order`), the cursor's line, then the tiers, which pass the gate whatever their score: the records that set a knob of the
    cursor's line (`evidence.knob_front`), each followed by its siblings; then the top ranked record,
    which keeps its place; then the runs about the settings the cursor's line reads from a config object
    (`evidence.read_runs`), each followed by its siblings; then the siblings of the ties and of that top
    record (those of a tie off the cursor's line after the top record's, lever `tie_focus`)."""
    if levers.strength and gate and ranked:
        idf = index.idf_of(t for s in ranked for t in s.components.matched_terms)
        ranked = [s for s in ranked if evidence.strong(s, idf, hints.aliases, n_records=len(index))]
    read = evidence.read_order(index, hints.body_reads, order) if levers.knob and hints.body_reads else order
    if read is not order:  # on a function's name line, the runs about the settings it reads move up
        order = read
        ranked = sorted(ranked, key=lambda s: (-order(s), s.record.id))
    if levers.cursor:
        spellings = evidence.word_spellings(index, hints.word) if levers.forms else {}
        ranked = evidence.focus_order(ranked, hints.focus, key=order, word=hints.word, aliases=hints.aliases,
                                      spellings=spellings)
    knobs = evidence.knob_front(index, hints.settings, hints.knob) if levers.knob else []
    tiers = Tiers(index, {s.record.id for s in tied}, levers.siblings, dict(knobs))
    for record_id, _ in knobs:
        tiers.place(record_id)
    top = [s.record.id for s in ranked[:1]]
    for record_id in top:  # the top ranked record keeps its place …
        tiers.place(record_id, follow=False)
    late = late_ties(tied, levers, hints)
    anchors = [s.record.id for s in tied if s not in late] + top + [s.record.id for s in late]
    for record_id, label in evidence.read_runs(index, hints.reads) if levers.knob else ():
        if record_id not in tiers.placed:  # … the runs about the settings the line reads follow, each with its sweep
            tiers.labels[record_id] = label
            tiers.place(record_id)
    for record_id in anchors:  # … then the siblings of the ties and of it (of a tie off the line, after it)
        tiers.follow(record_id)
    if not tiers.front:
        return ranked, ()
    front = tiers.front
    by_id = {s.record.id: s for s in ranked}
    missing = [i for i in front if i not in by_id]
    by_id.update({s.record.id: s for s in index.score(query, missing)})
    head = [by_id[i] for i in front if i in by_id]
    rest = [s for s in ranked if s.record.id not in set(front)]
    return head + rest, tuple((i, tiers.labels[i]) for i in front if i in tiers.labels)


class Tiers:
    """The front of a shown list being built: each record placed may bring its siblings right after
    it (lever `siblings`) — the same experiment at another setting ranks with it. A record keeps the
    label it came with (`labels`: a knob tier's "same setting …") when it is also a sibling."""

    def __init__(self, index: LiveIndex, shown: set[str], siblings: bool, labels: dict[str, str]) -> None:
        self.index, self.placed, self.siblings = index, set(shown), siblings
        self.front: list[str] = []
        self.labels = labels

    def place(self, record_id: str, *, follow: bool = True) -> None:
        if record_id not in self.placed:
            self.placed.add(record_id)
            self.front.append(record_id)
            if follow:
                self.follow(record_id)

    def follow(self, record_id: str) -> None:
        """The siblings of a placed (or tied) record, right after it."""
        record = self.index.get(record_id) if self.siblings else None
        if record is not None:
            for sibling, label in evidence.siblings_of(self.index, [record], self.placed):
                self.labels.setdefault(sibling, label)
                self.place(sibling, follow=False)


def _with_limit(query: RetrievalQuery, limit: int) -> RetrievalQuery:
    return RetrievalQuery(text=query.text, architecture=query.architecture, now=query.now,
                          half_life_days=query.half_life_days, limit=limit, weights=query.weights)
