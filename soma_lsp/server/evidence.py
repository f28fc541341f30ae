"""Evidence beyond the core's score, for what an editor surface shows (issue 20's server levers).

`related.find_related` gates and orders through these functions when their lever is on
(`soma_lsp.query.levers`); each is pure over the index and the built query, and none changes the
core's ranking (docs/spec.md §2) — only which ranked records pass and in what order they are shown.

* **strength** (`strong`): lexical is normalised to the query's best match, so one shared common word
  reaches lexical 1. To be shown unasked (a hover; whether a lens shows), a ranked record from a code
  scope must also match terms whose idf (an alias group's names once) adds up to `MIN_STRENGTH` ×
  the idf of a word one record holds — about two rare words — or share a component; ties and
  same-setting records need not.
* **cursor** (`focus_order`): the ranked records that match the terms of the cursor's own line move
  up by `FOCUS_BONUS` × the share of those terms they match — a hover on one call in a long function
  is about that call.
* **knob** (`knob_tier`): a record whose `key=value` sets the knob on the cursor's line to the same
  value (equal as numbers, `soma_lsp.knobs`) is strong evidence: it comes right after the ties,
  labelled "same setting: rope_theta = 1e6"; records that set the same knob to another value (the
  other arms of that sweep) follow it.
* **forms** (`with_forms`): a word near the cursor that the pool never spells as the code does
  (`initializer`, `normalize`) is asked in the pool's spellings of it too (`initialised`,
  `normalisation`; `soma_lsp.query.word_forms`); in the word under the cursor's bonus a record holding
  one of those spellings matches the word's term (`word_spellings`, `focus_order`).
* **siblings** (`siblings_of`): records of the same experiment as a tied or top-ranked record — the
  same name stem (`lr-3e-4-1b` ~ `lr-1e-3-1b`), or one naming the other ("re-run of rope-theta-1m")
  — follow it, labelled "sibling of …": who must see one must see its siblings.
  Inside a definition's body, a tie that matches nothing near the cursor comes after the top ranked
  record, its siblings after that record's (`off_the_line`, lever `tie_focus`).
* **hubs** (`hub_shares`): a ranked record that overlaps most of the file's other definitions as much
  as the scope asked is about the file, not this scope: the order weighs it down by `HUB_WEIGHT` × that
  share.
* **components** (`COMPONENT_BONUS`): a ranked record that shares components with the scope moves up
  by its structural share — the parts this code builds, named by the run, are evidence the core's
  weights under-count.
"""

from __future__ import annotations

import math
import re
import sys
import threading
import weakref
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from .. import foreground
from ..gcpause import collector_paused
from ..knobs import Knob, canonical_value, knob_settings
from ..records import Record
from ..query.word_forms import MIN_ROOT, forms, root
from ..retrieval import LiveIndex, RetrievalQuery, ScoredRecord, tokenize

#: Summed idf of the matched terms a ranked record needs to be shown unasked (lever `strength`), in
#: units of the idf of a word only one record holds — so the bar means the same in a pool of 20
#: records as in one of 20 000 (about 6.0 in the judged set's pools of ~60).
MIN_STRENGTH = 1.6
#: How far a full match of the cursor's line moves a record up (lever `cursor`), in score units: at
#: 0.8 a record matching most of the line comes before one that only matches the rest of the scope
#: (tuned on the judged set's tune probes: 0.2 → 0.8 moved R@3 0.758 → 0.803; 1.0 and 1.5 no better).
FOCUS_BONUS = 0.80
#: … and a match of the word under the cursor, on top (tuned on the tune probes: 0.1 / 0.2 / 0.3 gave
#: tune nDCG@5 0.801 / 0.804 / 0.804 against 0.800 without).
WORD_BONUS = 0.20


#: How far a run whose name holds the word under the cursor moves up in find-related (lever `named`),
#: in score units (tuned on the tune probes: 0.2 / 0.3 / 0.5 / 0.8 / 1.2 gave tune nDCG@5 0.813 / 0.813 /
#: 0.819 / 0.819 / 0.819, the same R@3 0.843).
NAME_BONUS = 0.5


#: How far a ranked record moves up per unit of its structural term (the weighted Jaccard of the
#: components it shares with the scope, docs/spec.md §2.4), lever `components`, in score units. The
#: core gives structural 0.25 of the score and a record without an architecture has it left out,
#: not scored 0 — so a run that names the very parts this code builds (`post-norm-vit` with
#: `LayerNorm`, `MultiHeadDotProductAttention` for `Encoder1DBlock`) scored *below* one that names
#: none. Tuned on the tune probes: 0.2 / 0.3 / 0.4 / 0.6 / 0.8 gave tune nDCG@5 0.839 / 0.843 / 0.845 /
#: 0.847 / 0.846, R@3 0.866 / 0.871 / 0.886 / 0.886 / 0.886 (docs/benchmarks.md § Quality, try 46).
COMPONENT_BONUS = 0.6


#: How far a ranked record that overlaps the file's other definitions as much as the scope moves down
#: (lever `hubs`), in score units × the share of them it overlaps so: measured at 0.1 / 0.2 / 0.3 in
#: process (docs/benchmarks.md § Quality, try 151).
HUB_WEIGHT = 0.1
#: How many of the gated ranking's first records (by the core's score) `hub_shares` reads: those that
#: may be shown; a record further down is no hub of the first places.
HUB_READ = 30


def _record_text(record: Record) -> str:
    """A record's words as the evidence reads them: name, headline, notes and details, space-joined."""
    return " ".join(filter(None, (record.name, record.headline, record.notes, record.details)))


def hub_shares(index: LiveIndex, ranked: Sequence[ScoredRecord], here: Iterable[str],
               others: Sequence[frozenset[str]], exempt: Sequence[str] = ()) -> dict[str, float]:
    """Record id → the share of the file's other definitions (`others`, their terms: `Hints.others`)
    whose text a ranked record overlaps at least as much as the scope's (`here`), lever `hubs` — the
    overlap being the summed idf of the record's words that the text holds. A record whose words are
    the file's own (`compile-whole-model`: `module`, `student`, `teacher`, `masked`, `patches` for any
    scope of a self-supervised trainer) relates to every definition of it as much as to this one, so
    it is no evidence about this one; a record matching a term of the word under the cursor
    (`exempt`) is about what the user points at, and is exempt. Only the first `HUB_READ` of `ranked`
    (the core's order) are read; a record overlapping nothing here is left alone."""
    if not others:
        return {}
    here, pointed = set(here), set(exempt)
    out: dict[str, float] = {}
    for scored in ranked[:HUB_READ]:
        if not pointed.isdisjoint(scored.components.matched_terms):
            continue
        record = scored.record
        words = set(tokenize(_record_text(record)))
        idf = index.idf_of(words)
        mine = math.fsum(idf.get(t, 0.0) for t in words & here)
        if mine > 0.0:
            out[record.id] = sum(math.fsum(idf.get(t, 0.0) for t in words & text) >= mine for text in others) / len(others)
    return out


def off_the_line(tied: Sequence[ScoredRecord], near: Sequence[str]) -> list[ScoredRecord]:
    """The tied records that match no term near the cursor (`near`: the terms of its line, of the
    word under it and their aliases; none without a cursor, as for a lens), lever `tie_focus`: a run
    tied to the enclosing class or function is about that definition, not about the line of its
    body the cursor is on (`gqa-4-kv-heads`, tied to `Attention`, on the line that builds the
    QK-norm). Such a tie is shown after the top ranked record, its siblings after that record's."""
    wanted = set(near)
    return [s for s in tied if wanted and wanted.isdisjoint(s.components.matched_terms)]


def names_the_word(record: Record, word: Sequence[str]) -> bool:
    """Whether a run's name holds every part of the word under the cursor (a CamelCase word's joined
    run left out): `gelu-tanh-approximation` for `gelu`, `shared-actor-critic-torso` for `Critic` —
    teams name a run after what it changed; or, for a word of several parts, its parts written as one
    word in any form (`groupnorm-16-groups` for `GroupNorm`, `convnext-style-resblocks` for `ResBlock`).
    A word with a one-letter part names none: what is left of `z_loss` or `c_attn` (`loss`, `attn`)
    is not the word, and names half the pool (try 67)."""
    if any(len(t) == 1 for t in word):
        return False
    parts = [t for t in word if not any(t != u and t.startswith(u) for u in word)]
    named = set(tokenize(record.name))
    if parts and set(parts) <= named:
        return True
    joined = "".join(parts)  # `groupnorm-16-groups` for `GroupNorm`, `convnext-style-resblocks` for `ResBlock`
    return len(parts) > 1 and any(t == joined or root(t) == root(joined) for t in named)


def with_forms(index: LiveIndex, query: RetrievalQuery, near: Sequence[str]) -> RetrievalQuery:
    """The query with the pool's spellings of the words near the cursor (`near`: its line's terms and
    the word's) that no record holds as written (lever `forms`): `initializer` on the line asks for
    `initialised` too when a note says so. A word the pool already holds is not expanded — its
    other forms would pull in records about neighbouring ideas (expanding every form of the scope's
    words cost tune R@3, docs/benchmarks.md § Quality)."""
    present = set(tokenize(query.text))
    candidates = list(dict.fromkeys(f for t in _unheld(index, near) for f in forms(t) if f not in present))
    held = index.idf_of(candidates)
    extra = [f for f in candidates if held.get(f, 0.0) > 0.0]
    if not extra:
        return query
    return replace(query, text=f"{query.text} {' '.join(extra)}")


def word_spellings(index: LiveIndex, word: Sequence[str]) -> dict[str, str]:
    """Root → term for the terms of the word under the cursor that no record holds as written and
    that are longer than `word_forms.MIN_ROOT` (lever `forms`): in the word's bonus (`focus_order`) a
    record holding another form of such a term matches it — `ignored` for `IGNORE_INDEX`,
    `evaluation` for `evaluate` — as `with_forms` asks those forms. A word the pool holds as
    written keeps its own spelling, and a short one (`make`, a root as it stands) would match every
    `makes` of the notes (docs/benchmarks.md § Quality, try 137)."""
    return {root(t): t for t in _unheld(index, word) if len(t) > MIN_ROOT}


def _unheld(index: LiveIndex, terms: Sequence[str]) -> list[str]:
    """These terms (once each, in order) that no record holds as written: what lever `forms` may
    spell otherwise."""
    held = index.idf_of(terms)
    return [t for t in dict.fromkeys(terms) if not held.get(t)]


def strength(scored: ScoredRecord, idf: dict[str, float], aliases: Sequence[Sequence[str]] = ()) -> float:
    """The summed idf of the query terms the record matched: a match's absolute strength. The
    names of one idea (an alias group the query builder added) count once, by the rarest."""
    matched = set(scored.components.matched_terms)
    total = 0.0
    for group in aliases:
        hit = matched.intersection(group)
        total += max((idf.get(t, 0.0) for t in hit), default=0.0)
        matched -= hit
    return total + math.fsum(idf.get(t, 0.0) for t in matched)


def rarest_idf(n_records: int) -> float:
    """spec §2.2's idf of a term that one record of `n_records` holds."""
    return math.log1p((n_records - 0.5) / 1.5) if n_records > 0 else 0.0


def strong(scored: ScoredRecord, idf: dict[str, float], aliases: Sequence[Sequence[str]] = (), *,
           n_records: int) -> bool:
    return bool(scored.components.structural) or \
        strength(scored, idf, aliases) >= MIN_STRENGTH * rarest_idf(n_records)


def focus_order(ranked: Sequence[ScoredRecord], focus: Sequence[str],
                key: Callable[[ScoredRecord], float] = lambda s: s.score,
                word: Sequence[str] = (), aliases: Sequence[Sequence[str]] = (),
                spellings: Mapping[str, str] | None = None) -> list[ScoredRecord]:
    """`ranked` by `key` (the score, or the server's standing) plus the cursor line's bonus, and
    `WORD_BONUS` × the share of the terms of the word under the cursor (`word`) a record matches. A
    record holding a word of an alias group fired near the cursor (`aliases`) matches all of the
    group's words: the notes' "rotary" is the line's `freqs_cis`. Likewise a record holding another
    form of a term of the word (`spellings`, root → the term: `word_spellings`) matches that term."""
    if not focus:
        return list(ranked)
    wanted, pointed = set(focus), set(word)
    base = key

    def key(s: ScoredRecord) -> tuple:
        matched = set(s.components.matched_terms)
        for group in aliases:  # one idea: a record naming it in other words matches the line's name of it
            if matched.intersection(group):
                matched.update(group)
        if spellings:  # `ignored` in a note is the `ignore` of `IGNORE_INDEX`
            matched.update(spellings[r] for r in map(root, list(matched)) if r in spellings)
        share = len(wanted.intersection(matched)) / len(wanted)
        on_word = len(pointed.intersection(matched)) / len(pointed) if pointed else 0.0
        return (-(base(s) + FOCUS_BONUS * share + WORD_BONUS * on_word), s.record.id)
    return sorted(ranked, key=key)


# -- the table the tiers read -------------------------------------------------------------------------

_WORD = re.compile(r"[^\s,;:()\[\]{}\"'`]+")
_TRAILING_MARKS = re.compile(r"[.!?]+(?=[\s,;:()\[\]{}\"'`]|$)")  # a word's own end: `rstrip(".!?")` of each


def _prose_words(record: Record) -> frozenset[str]:
    prose = " ".join(filter(None, (record.headline, record.notes, record.details))).lower()
    return frozenset(_WORD.findall(_TRAILING_MARKS.sub("", prose)))  # (one pass each, not one call a word)


def _lowered(text: str) -> str:
    """`text` lower-cased, the same string when it already is (an id the index holds is not copied)."""
    low = text.lower()
    return text if low == text else low


class _Table:
    """What the tiers read of every record of one index: knob → rows (record, canonical value, as
    written), name stem → records, lower-cased name or id → records, and who names whom —
    `mentions`: a word of a record's prose (a run's name or id written in it, "re-run of
    rope-theta-1m") → the records whose prose holds it — so a look-up costs the anchors' words, not a
    scan of the pool.

    Compact, for 100k records of ~70 distinct prose words each (7M postings): each filing of a record
    gets a number (`ids[number]` is its id) and the postings are arrays of numbers (4 bytes each) that a
    pool change only appends to (`follow`). A posting is current exactly when its number is its
    record's latest filing (`filed`), so what a record filed again or taken out no longer holds is
    dropped when looked up, with nothing of the record kept to check it against; once such stale
    postings outnumber the live ones the table is built afresh. Measured at 100k records (RSS the
    table adds, in process): lists of ids and each record's words kept, 117 MiB; numbers, a key's one
    posting held as an int, 15 MiB (docs/benchmarks.md § 1M)."""

    def __init__(self, index: LiveIndex, version: int) -> None:
        self.index, self.version = weakref.ref(index), version  # (an index swapped out may go)
        self.ids: list[str] = []  # filing number → record id
        self.filed: dict[str, int] = {}  # record id → the number of its current filing
        self.sizes = array("I")  # filing number → the postings it added (the live/stale count)
        self.knobs: defaultdict[str, list[tuple[int, str, str]]] = defaultdict(list)
        self.stems: dict[str, int | array] = {}
        self.by_name: dict[str, int | array] = {}
        self.mentions: dict[str, int | array] = {}
        self._live = self._stale = 0  # postings of current filings, and of replaced or removed ones

    @property
    def stale(self) -> bool:
        """More postings of replaced or removed records than of current ones: build it afresh."""
        return self._stale > self._live

    def add(self, record_id: str, record: Record) -> None:
        """File this record under `record_id`, the index's own string (a record decoded for the
        table alone, `LiveIndex.peek`, goes once filed: nothing of it stays referenced but its name)."""
        self.discard(record_id)
        number = len(self.ids)
        self.ids.append(record_id)
        self.filed[record_id] = number
        settings = knob_settings(_record_text(record))
        for knob, setting in settings.items():
            self.knobs[knob.rsplit(".", 1)[-1]].append((number, setting.value, setting.text))
        stem = name_stem(record.name)
        if stem:
            _post(self.stems, stem, number)
        names = {_lowered(record.name), _lowered(record_id)}
        for name in names:
            _post(self.by_name, name, number)
        words = _prose_words(record)
        mentions = self.mentions
        for word in map(sys.intern, words):  # (one string per word, not per record)
            _post(mentions, word, number)
        size = len(settings) + bool(stem) + len(names) + len(words)
        self.sizes.append(size)
        self._live += size

    def discard(self, record_id: str) -> None:
        number = self.filed.pop(record_id, None)
        if number is not None:
            self._live -= self.sizes[number]
            self._stale += self.sizes[number]

    def follow(self, changed: Iterable[str], version: int) -> None:
        """File again the records these ids name now (added, replaced or gone)."""
        index = self.index()
        for record_id in changed:
            record = index.get(record_id) if index is not None else None
            if record is None:
                self.discard(record_id)
            else:
                self.add(record_id, record)
        self.version = version

    # -- look-ups (under `_lock`), each dropping the postings of filings no longer current -------------

    def _current(self, postings: dict[str, int | array], key: str) -> list[str]:
        ids, filed = self.ids, self.filed
        numbers = postings.get(key, ())
        return [ids[n] for n in dict.fromkeys((numbers,) if type(numbers) is int else numbers)
                if filed.get(ids[n]) == n]

    def knob_rows(self, knob: str) -> list[tuple[str, str, str]]:
        ids, filed = self.ids, self.filed
        return [(ids[n], value, text) for n, value, text in dict.fromkeys(self.knobs.get(knob, ()))
                if filed.get(ids[n]) == n]

    def with_stem(self, stem: str) -> list[str]:
        return self._current(self.stems, stem)

    def named(self, name: str) -> list[str]:
        return self._current(self.by_name, name)

    def mentioning(self, word: str) -> list[str]:
        return self._current(self.mentions, word)


def _post(postings: dict[str, int | array], key: str, number: int) -> None:
    """Add a posting: a key's one number held as it is, an array of them from the second on (most
    names and stems belong to one record: an array each was ≈ 75 bytes more a key, a quarter of the table)."""
    held = postings.get(key)
    if held is None:
        postings[key] = number
    elif type(held) is int:
        postings[key] = array("I", (held, number))
    else:
        held.append(number)


_table_now: _Table | None = None  # the table of the index asked last (one index at a time is asked)
_building: int | None = None  # id() of the index whose table is being built
_lock = threading.Lock()

#: Up to this many records the table is built on the spot (tens of ms); a larger pool's is built in
#: the background (every record read once: ≈ 0.1 s at 10k on a quiet machine, seconds at 100k or
#: under load — a 10k build on the spot made a hover wait 0.5 s, docs/benchmarks.md § LSP — stepping
#: aside for requests: `foreground`), so a hover never waits for it; the tiers do not apply to the
#: hovers asked meanwhile. Once built, a table follows the index's changes
#: (`LiveIndex.changed_since`) on the spot when they are at most `FOLLOW_HERE` records, else is built
#: again the same way — not while the pool is still loading into the index (`LiveIndex.filling`): a
#: first load commits a big file in parts, and a table built after each part was thrown away by the next.
BUILD_HERE = 2_000
FOLLOW_HERE = 2_000


def _table(index: LiveIndex) -> _Table | None:
    """The table of this index as it stands, or None while a large pool's is being built."""
    global _building
    with _lock:
        version = index.version  # read first: what changes meanwhile is filed next time
        table = _table_now
        ours = table is not None and table.index() is index
        if ours and table.version == version:
            return table
        if len(index) > BUILD_HERE and index.filling:
            return None  # (built or followed once the load is over: a build per part of a big file cost 2× one)
        meanwhile = None  # what is answered while a large pool's table is built in the background
        if ours:
            changed = index.changed_since(table.version, FOLLOW_HERE)
            if changed is not None:
                table.follow(changed, version)
                if not table.stale:
                    return table
                meanwhile = table  # (exact, only larger than one built afresh)
        if len(index) <= BUILD_HERE:  # built here even while another thread builds it: an answer
            # without the tiers would be cached as if it had them (a lens counting 7 where
            # find-related lists 10, seen under load); a second small build costs milliseconds
            building = False
        elif _building == id(index):
            return meanwhile  # (one build at a time; the changes meanwhile are followed once it is done)
        else:
            building, _building = True, id(index)
    if not building:
        return _build(index, version)
    threading.Thread(target=_build, args=(index, version), name="soma-evidence", daemon=True).start()
    return meanwhile


def _build(index: LiveIndex, version: int) -> _Table:
    """Every record filed into a new table (its survivors frozen out of the collector's generations:
    the first full collection after it would otherwise walk them all during a hover)."""
    global _table_now, _building
    table = _Table(index, version)
    try:
        with collector_paused():
            for n, record_id in enumerate(index.ids()):
                if n % foreground.STEP == 0:
                    foreground.pause()
                record = index.peek(record_id)  # (not kept built: a restored pool stays stored)
                if record is not None:
                    table.add(record_id, record)
    finally:
        with _lock:
            if _building == id(index):
                _building = None
            _table_now = table  # (a change meanwhile is followed at the next look-up)
    return table


def knob_tier(index: LiveIndex, settings: Sequence[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(record id, label) of the records setting a knob of the cursor's line: same value first."""
    return [(record_id, label) for record_id, label, _, _ in _knob_matches(index, settings)]


def _knob_matches(index: LiveIndex, settings: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str, Knob]]:
    """`knob_tier` with the knob and the record's value: (record id, label, knob, Knob)."""
    table = _table(index)
    if not settings or table is None:
        return []
    with _lock:
        rows = [(knob, value, written, sorted(table.knob_rows(knob))) for knob, value, written in settings]
    same, other = [], []
    for knob, value, written, theirs in rows:
        for record_id, their_value, their_text in theirs:
            if their_value == value:
                same.append((record_id, f"same setting: {knob} = {their_text}", knob, Knob(their_value, their_text)))
            else:
                other.append((record_id, f"same knob: {knob} = {their_text} (here {written})", knob,
                              Knob(their_value, their_text)))
    first: dict[str, tuple[str, str, str, Knob]] = {}
    for match in same + other:
        first.setdefault(match[0], match)
    return list(first.values())


#: Knob words too generic to say what a run is about (`num_layers` is not about `num-envs-8`).
_GENERIC_KNOB_WORDS = frozenset({"num", "n", "max", "min", "use", "init", "size", "dim", "steps", "rate"})


#: A flag's two values (`soma_lsp.knobs.canonical_value`): each the other's arm.
_OTHER_BOOLEAN = {"true": "false", "false": "true"}


def is_about(record: Record | None, knob: str, value: Knob | None = None) -> bool:
    """Whether a run is about a knob: a distinctive word of the knob is in its name (`lr-3e-4-1b`,
    `warmup-2000` for `warmup_steps`) — a run of that setting, or an arm of its sweep; or the value
    it set the knob to (`value`) is, as written or as a number (`width-128` setting
    `model_channels=128`, `cfg-w-3` setting `guidance_scale=3.0`): teams name a run after the setting
    it tried, in their own word for the knob."""
    if record is None:
        return False
    name = record.name.lower()
    parts = re.split(r"[-_\s]+", name)
    if set(parts).intersection(w for w in knob.lower().split("_") if w not in _GENERIC_KNOB_WORDS):
        return True
    if value is None or not value.text:
        return False
    return (re.search(rf"(?<![\w.]){re.escape(value.text.lower())}(?![\w.])", name) is not None
            or any(canonical_value(part) == value.value for part in parts if part[:1].isdigit()))


def knob_front(index: LiveIndex, settings: Sequence[tuple[str, str, str]], pointed: str = "") -> list[tuple[str, str]]:
    """The knob tier as shown first (lever `knob`): the records about a knob of the cursor's line
    (`is_about`), the same value first, then its other values; then the records about the knob the
    cursor points at (`pointed`, the word under it) when its line sets no value for it; then the
    records that only mention the same setting in passing (a note saying `lr=3e-4` of a run about
    something else). A record mentioning another value in passing is no evidence: it keeps its place
    in the ranking. When the line sets several knobs (a signature's defaults, `freq_masks=2,
    freq_width=27, time_masks=10`) and the cursor is on one, that one is asked: the others' runs (an
    arm of the `freq_width` sweep, which shares `freq_masks=2` with the line) are no evidence about
    `time_masks`, and keep their place in the ranking (docs/benchmarks.md § Quality, try 94). Runs named
    after the knob alone (`lr-2e-4` for `lr`) come before those whose name qualifies it
    (`backbone-lr-1e-4`, about the backbone's own rate, and its sweep's arms): `names_only`, try 108.
    A run that set a flag of the line to the other boolean (`bf16=false` at `bf16: bool = True`) is
    the flag's other arm, whatever its name: a run turning a flag off is named after what it did
    instead (`fp16-with-loss-scaling`), so its name cannot say it is about the flag (try 139)."""
    if pointed in {knob for knob, _, _ in settings}:
        settings, pointed = [s for s in settings if s[0] == pointed], ""
    knobs = [knob for knob, _, _ in settings]
    flips = {knob: _OTHER_BOOLEAN[value] for knob, value, _ in settings if value in _OTHER_BOOLEAN}
    about, passing = [], []
    for record_id, label, knob, value in _knob_matches(index, settings):
        record = index.get(record_id)
        if any(is_about(record, k) for k in knobs) or is_about(record, knob, value) or flips.get(knob) == value.value:
            about.append((record_id, label))
        elif label.startswith("same setting"):
            passing.append((record_id, label))
    table = _table(index) if pointed else None
    if table is not None:
        about += _runs_about(index, table, pointed, {record_id for record_id, _ in about})
    about.sort(key=lambda item: not names_only(index.get(item[0]), [*knobs, pointed]))
    return about + passing


def _runs_about(index: LiveIndex, table: _Table, knob: str, seen: set[str]) -> list[tuple[str, str]]:
    """(record id, "sets knob = value") of the runs that set a knob and are about it (`is_about`, by
    the value each set), but those in `seen`."""
    with _lock:
        rows = sorted(table.knob_rows(knob))
    return [(record_id, f"sets {knob} = {text}") for record_id, value, text in rows
            if record_id not in seen and is_about(index.get(record_id), knob, Knob(value, text))]


def read_runs(index: LiveIndex, knobs: Sequence[str]) -> list[tuple[str, str]]:
    """(record id, label) of the runs about the knobs the cursor's line reads from a config object
    (`Hints.reads`: `args.policy_frequency`, the `args.learning_starts` of the `if` it runs under),
    each knob's runs named after it alone first (lever `knob`). A line reading a setting sets no value
    to compare, so these come after the top ranked record, not first: put first, the lr runs at
    `Adam(learning_rate=cfg.learning_rate, epsilon=1e-5)` came before the Adam-epsilon run the line
    was about (docs/benchmarks.md § Quality, tries 88–89, 120, 122)."""
    table = _table(index) if knobs else None
    if table is None:
        return []
    out: list[tuple[str, str]] = []
    for knob in knobs:
        runs = _runs_about(index, table, knob, {record_id for record_id, _ in out})
        out += sorted(runs, key=lambda item: not names_only(index.get(item[0]), [knob]))
    return out


#: How far a run about a setting the function reads moves up on the function's own name line (lever
#: `knob`, `read_order`), in score units: measured at 0.15 / 0.3 / 0.5 / 0.65 / 0.8 / 1.0 on every part of
#: the judged set — 0.5, `NAME_BONUS`'s value, was the only one moving no probe's R@3 down (docs/benchmarks.md
#: § Quality, try 141).
READ_BONUS = 0.5


def read_order(index: LiveIndex, knobs: Sequence[str],
               key: Callable[[ScoredRecord], float]) -> Callable[[ScoredRecord], float]:
    """`key` plus `READ_BONUS` for the runs about these knobs (`read_runs`: `Hints.body_reads`, the
    settings a function reads, asked on its name line). A function reads many settings, and a run about
    one of them is evidence about the function only as strong as a matching word: a bonus, not the tier
    that 120's reads of the cursor's own line get (placed after the top record, they pushed its siblings
    and better matches out of the top 3, try 141)."""
    about = {record_id for record_id, _ in read_runs(index, knobs)}
    if not about:
        return key
    return lambda s: key(s) + (READ_BONUS if s.record.id in about else 0.0)


def names_only(record: Record | None, knobs: Sequence[str]) -> bool:
    """Whether a run's name, its settings left out (`name_stem`), holds only words of one of these knobs
    (`lr-2e-4` for `lr`, `warmup-2000` for `warmup_steps`; not `backbone-lr-1e-4`, a run about the
    backbone's own rate that only shares `lr` with the knob)."""
    if record is None:
        return False
    stem = set(name_stem(record.name).split("-")) - {""}
    return bool(stem) and any(stem <= set(k.lower().split("_")) for k in knobs if k)


# -- siblings ------------------------------------------------------------------------------------------

_VALUE_PART = re.compile(r"\d")
#: Counts written in words, which a run's name uses as it uses digits (`eight-small-views`, `two-experts-per-token`).
_NUMBER_WORDS = frozenset("""one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand""".split())


def name_stem(name: str) -> str:
    """A run's name without its settings: the `-`/`_` parts holding a digit or a count written in
    words, and a leading `no`, dropped (`lr-3e-4-1b` → `lr`, `rope-theta-1m-4k-ctx-seed2` →
    `rope-theta-ctx`, `four-extra-tokens` → `extra-tokens`, the sweep of `sixteen-extra-tokens`:
    docs/benchmarks.md § Quality, try 160)."""
    parts = [p for p in re.split(r"[-_\s]+", name.lower()) if p and not _VALUE_PART.search(p) and p not in _NUMBER_WORDS]
    if parts[:1] == ["no"]:
        parts = parts[1:]
    return "-".join(parts)


def siblings_of(index: LiveIndex, anchors: Iterable[Record], exclude: set[str]) -> list[tuple[str, str]]:
    """(record id, label) of the records of the same experiment as an anchor, anchors in order:
    the same name stem, or prose naming the other's name or id ("re-run of rope-theta-1m")."""
    table = _table(index)
    if table is None:
        return []
    out: dict[str, str] = {}
    for anchor in anchors:
        words = _prose_words(anchor)
        with _lock:
            found = set(table.with_stem(name_stem(anchor.name)))
            for name in (anchor.name.lower(), anchor.id.lower()):
                found.update(table.mentioning(name))  # records naming the anchor
            for word in words:
                found.update(table.named(word))  # records the anchor names
        for record_id in sorted(found):  # (the index's record order)
            if record_id not in exclude and record_id not in out and record_id != anchor.id:
                out[record_id] = f"sibling of {anchor.id}"
    return list(out.items())


__all__ = ["COMPONENT_BONUS", "FOCUS_BONUS", "HUB_READ", "HUB_WEIGHT", "MIN_STRENGTH", "NAME_BONUS", "READ_BONUS", "WORD_BONUS", "focus_order", "hub_shares", "is_about",
           "knob_front", "knob_tier", "name_stem", "names_only", "names_the_word", "off_the_line", "read_order", "read_runs",
           "siblings_of",
           "strong", "with_forms", "word_spellings"]
