"""What a hover shows (`HoverView`), and its two renderings: Markdown for editors, plain text for
clients without Markdown and for `soma-lsp explain`.

One structure, two renderers: `_entries` reads a view once into `Entry` values (status, badges,
age, score, components, why it is a dead end, how it is tied, matched terms, headline) and a card
into labelled rows; `render_markdown` and `render_plain` only lay those out. Record text is data:
Markdown goes through `markdown.escape`, plain text through `markdown.plain`, each length-capped.

Every claim explains itself (docs/spec.md §4.3): a dead end says which rule made it one (its status,
or each metric against its baseline and goal), a tie says how it came about (⚓ written in the
record's `code`, or the commit the run ran at, how long ago, and whether that code changed since),
and when a term does not apply (`n/a`) one legend line says that its weight went to the others —
which is why the effective weights (`×0.53`) differ from the configured ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from ..pool.commit_ties import CommitTie
from ..records import Record
from ..retrieval import TERMS, ScoredRecord, dead_end_reason
from . import convert
from .markdown import escape, plain


@dataclass(frozen=True)
class HoverView:
    """What a hover shows, before rendering. `items` are (scored, tied); `card` is a record shown on
    its own (an id under the cursor)."""

    items: tuple[tuple[ScoredRecord, bool], ...] = ()
    more: int = 0
    more_capped: bool = False
    scope: str | None = None
    card: Record | None = None
    range: tuple[tuple[int, int], tuple[int, int]] | None = None
    now: datetime | None = field(default=None, compare=False)
    commits: Mapping[str, CommitTie] = field(default_factory=dict, compare=False)  # id → tie through a commit
    labels: tuple[tuple[str, str], ...] = ()  # (record id, why it is shown: "same setting: …", "sibling of …")


@dataclass(frozen=True)
class Entry:
    """One result of a hover, read once for both renderers."""

    scored: ScoredRecord
    status: str
    dead: bool
    tied: bool
    age: str
    components: str  # `lexical 0.80 ×0.40 · …`
    why_dead: str | None  # `status failed`, `every metric moved the wrong way: …`
    commit: CommitTie | None  # the tie through a commit (None: not one)
    why: str = ""  # the evidence that brought it (server.evidence), else ""


TIED = "⚓ tied to this code"
LEGEND = "n/a: the term does not apply to this pair; its weight went to the terms that do (×: the weights used)"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _components(scored: ScoredRecord) -> str:
    parts = scored.components
    return " · ".join(f"{term} {_number(getattr(parts, term))} ×{parts.weights.get(term, 0.0):.2f}"
                      for term in TERMS)


def commit_evidence(tie: CommitTie, text=plain, code=str) -> str:
    """`ran at 1a2b3c4 (12 commits ago), which changed RMSNorm.forward · this code changed since`, and
    for a sweep whose other runs succeeded, what this one differs in (the code is then not blamed).
    `text` makes record text safe for the output, `code` shows a sha or a name from the code."""
    when = {None: "not in HEAD's history", 0: "HEAD", 1: "1 commit ago"}.get(tie.commits_ago,
                                                                          f"{tie.commits_ago} commits ago")
    out = (f"ran at {code(tie.commit[:7])} ({when}), which changed {code(tie.qualname)} · "
           + ("this code changed since" if tie.changed_since else "unchanged since"))
    if tie.sweep is not None:
        runs = f"{tie.sweep.succeeded} run{'s' if tie.sweep.succeeded != 1 else ''}"
        differs = f"; this one differs in {text(', '.join(tie.sweep.differs), 200)}" if tie.sweep.differs else ""
        out += f" · {runs} at {code(tie.commit[:7])} succeeded{differs}: not blamed on the code"
    return out


def origin_line(record: Record, text) -> str:
    """`from MLflow tracking server … · experiment rope · run page http[:]//…`: where a tracker's run
    came from and how to open it. The run page is shown inert (defanged by `text`, like all record
    text), not as a link: the server writes links only from its own data (server.markdown)."""
    page = f" · run page {text(record.url, 300)}" if record.url else ""
    return f"from {text(record.origin, 200)}{page}"


def _entries(view: HoverView) -> list[Entry]:
    why = dict(view.labels)
    return [Entry(scored, scored.record.status.value, scored.dead_end, tied,
                  convert.age(scored.record.time, view.now) if view.now else "", _components(scored),
                  dead_end_reason(scored.record) if scored.dead_end else None,
                  view.commits.get(scored.record.id), why.get(scored.record.id, ""))
            for scored, tied in view.items]


def _needs_legend(view: HoverView) -> bool:
    return any(getattr(s.components, term) is None for s, _ in view.items for term in TERMS)


def _more(view: HoverView) -> str:
    return f"{view.more}+" if view.more_capped else str(view.more)


def render_markdown(view: HoverView) -> str:
    return _render(view, _results_markdown, escape, "**{name}** · {id}", "{}: {}", "\n\n")


def render_plain(view: HoverView) -> str:
    return _render(view, _results_plain, plain, "{name} ({id})", "  {}: {}", "\n")


def _render(view: HoverView, results, text, head: str, row: str, separator: str) -> str:
    """The results, or a record's card: `head`, then one `row` (label, value) per field."""
    if view.card is None:
        return results(view)
    record = view.card
    head = head.format(name=text(record.name, 120), id=text(record.id, 80))
    return separator.join([head, *(row.format(label, value) for label, value in _card_rows(record, view.now, text))])


def _results_markdown(view: HoverView) -> str:
    out: list[str] = []
    for n, e in enumerate(_entries(view)):
        record, parts = e.scored.record, e.scored.components
        badges = [escape(e.status, 40)] + (["**dead end**"] if e.dead else []) + ([TIED] if e.tied else []) \
            + ([escape(e.why, 120)] if e.why else [])
        if n:
            out.append("---")
        out.append(f"{'⛔' if e.dead else '🧪'} **{escape(record.name, 120)}** · {escape(record.id, 80)} · "
                   + " · ".join(badges))
        out.append(f"{escape(e.age)} · score {e.scored.score:.2f}  \n{e.components}")
        if e.why_dead:
            out.append(f"dead end: {escape(e.why_dead, 400)}")
        if e.commit:
            out.append("⚓ " + commit_evidence(e.commit, escape, lambda name: f"`{name}`"))
        if record.origin:
            out.append(origin_line(record, escape))
        details = [f"{label}: " + ", ".join(escape(t, 40) for t in values[:12])
                   for label, values in (("matched", parts.matched_terms), ("shared", parts.shared_components))
                   if values]
        if details:
            out.append(" · ".join(details))
        if record.headline:
            out.append(f"> {escape(record.headline)}")
    if view.more:
        out += ["---", f"{_more(view)} more related — *Soma: Find Related Experiments* lists them all"]
    if _needs_legend(view):
        out.append(f"*{LEGEND}*")
    return "\n\n".join(out)


def _results_plain(view: HoverView) -> str:
    out: list[str] = []
    for e in _entries(view):
        record, parts = e.scored.record, e.scored.components
        badges = [e.status] + (["dead end"] if e.dead else []) + ([TIED] if e.tied else []) \
            + ([plain(e.why, 120)] if e.why else [])
        out.append(f"{plain(record.name, 120)} ({plain(record.id, 80)}) — {', '.join(badges)}")
        out.append(f"  {e.age} · score {e.scored.score:.2f}")
        out.append(f"  {e.components}")
        if e.why_dead:
            out.append(f"  dead end: {plain(e.why_dead, 400)}")
        if e.commit:
            out.append(f"  ⚓ {commit_evidence(e.commit)}")
        if record.origin:
            out.append(f"  {origin_line(record, plain)}")
        out += [f"  {label}: " + ", ".join(values[:12])
                for label, values in (("matched", parts.matched_terms), ("shared", parts.shared_components))
                if values]
        if record.headline:
            out.append(f"  {plain(record.headline)}")
    if view.more:
        out.append(f"{_more(view)} more related")
    if _needs_legend(view):
        out.append(LEGEND)
    return "\n".join(out)


def _card_rows(record: Record, now: datetime | None, text) -> list[tuple[str, str]]:
    """A record's card as (label, value) rows; `text` makes record text safe for the output."""
    reason = dead_end_reason(record)
    rows = [("status", text(record.status.value + (f", dead end: {reason}" if reason else ""), 300))]
    if record.time is not None:
        rows.append(("when", text(f"{convert.age(record.time, now)} ({convert.rfc3339(record.time)})"
                                  if now else convert.rfc3339(record.time), 80)))
    if record.headline:
        rows.append(("conclusion", text(record.headline)))
    if record.notes:
        rows.append(("notes", text(record.notes, 400)))
    if record.code:
        rows.append(("code", text(", ".join(str(t) for t in record.code[:6]), 300)))
    if record.tags:
        rows.append(("tags", text(", ".join(record.tags[:12]), 200)))
    if record.origin:
        rows.append(("from", origin_line(record, text).removeprefix("from ")))
    return rows
