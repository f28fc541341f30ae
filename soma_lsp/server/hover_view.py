"""What a hover shows (`HoverView`), and its two renderings: Markdown for editors, plain text for
clients without Markdown and for `soma-lsp explain`.

One structure, two renderers: `_entries` reads a view once into `Entry` values (status, badges,
age, score, components, matched terms, headline) and a card into labelled rows; `render_markdown`
and `render_plain` only lay those out. Record text is data: Markdown goes through `markdown.escape`,
plain text through `markdown.plain`, each length-capped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..records import Record
from ..retrieval import TERMS, ScoredRecord, is_dead_end
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
    why: str = ""  # the evidence that brought it (server.evidence), else ""


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _components(scored: ScoredRecord) -> str:
    parts = scored.components
    return " · ".join(f"{term} {_number(getattr(parts, term))} ×{parts.weights.get(term, 0.0):.2f}"
                      for term in TERMS)


def _entries(view: HoverView) -> list[Entry]:
    why = dict(view.labels)
    return [Entry(scored, scored.record.status.value, scored.dead_end, tied,
                  convert.age(scored.record.time, view.now) if view.now else "", _components(scored),
                  why.get(scored.record.id, ""))
            for scored, tied in view.items]


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
        badges = [escape(e.status, 40)] + (["**dead end**"] if e.dead else []) \
            + (["tied to this code"] if e.tied else []) + ([escape(e.why, 120)] if e.why else [])
        if n:
            out.append("---")
        out.append(f"{'⛔' if e.dead else '🧪'} **{escape(record.name, 120)}** · {escape(record.id, 80)} · "
                   + " · ".join(badges))
        out.append(f"{escape(e.age)} · score {e.scored.score:.2f}  \n{e.components}")
        details = [f"{label}: " + ", ".join(escape(t, 40) for t in values[:12])
                   for label, values in (("matched", parts.matched_terms), ("shared", parts.shared_components))
                   if values]
        if details:
            out.append(" · ".join(details))
        if record.headline:
            out.append(f"> {escape(record.headline)}")
    if view.more:
        out += ["---", f"{_more(view)} more related — *Soma: Find Related Experiments* lists them all"]
    return "\n\n".join(out)


def _results_plain(view: HoverView) -> str:
    out: list[str] = []
    for e in _entries(view):
        record, parts = e.scored.record, e.scored.components
        badges = [e.status] + (["dead end"] if e.dead else []) + (["tied to this code"] if e.tied else []) \
            + ([plain(e.why, 120)] if e.why else [])
        out.append(f"{plain(record.name, 120)} ({plain(record.id, 80)}) — {', '.join(badges)}")
        out.append(f"  {e.age} · score {e.scored.score:.2f}")
        out.append(f"  {e.components}")
        out += [f"  {label}: " + ", ".join(values[:12])
                for label, values in (("matched", parts.matched_terms), ("shared", parts.shared_components))
                if values]
        if record.headline:
            out.append(f"  {plain(record.headline)}")
    if view.more:
        out.append(f"{_more(view)} more related")
    return "\n".join(out)


def _card_rows(record: Record, now: datetime | None, text) -> list[tuple[str, str]]:
    """A record's card as (label, value) rows; `text` makes record text safe for the output."""
    rows = [("status", text(record.status.value + (", dead end" if is_dead_end(record) else ""), 80))]
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
    return rows
