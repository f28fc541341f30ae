"""Hover: the experiments that bear on the definition under the cursor (SPEC 3-4).

document → query (`scope="hover"`: the enclosing definition + the word) → core (ties first, then the
gated ranking, `hover.count` in all) → view → Markdown (or plain text for clients without Markdown,
and for `soma-lsp explain`). On an experiment id written in the code (`# see exp-0042`) the hover is
that record's card instead. Nothing worth showing → no hover at all.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from ..query import build_query, definitions, index_to_utf16, utf16_to_index
from ..records import Record
from ..retrieval import TERMS, LiveIndex, ScoredRecord, is_dead_end
from . import convert, links
from .guard import contained
from .markdown import escape, plain
from .related import HOVER_COUNT_CAP, Related, find_related, retrieval_query, tied_records
from .settings import Settings

if TYPE_CHECKING:
    from .server import Snapshot, SomaServer


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


@dataclass(frozen=True)
class Prepared:
    """Step one of a hover: the query and the ties (or the card of an id under the cursor)."""

    view: HoverView | None = None  # final already (a card, or nothing to say)
    query: object = None
    tied: tuple = ()
    scope: str | None = None
    word_range: tuple[tuple[int, int], tuple[int, int]] | None = None


def prepare(index: LiveIndex, snap: "Snapshot", position: tuple[int, int], settings: Settings,
            now: datetime) -> Prepared:
    now = now.replace(second=0, microsecond=0)  # ages and recency to the minute: hovers can share work
    found = links.id_at(index, snap.source, position)
    if found is not None:
        record_id, span = found
        record = index.get(record_id)
        if record is not None:
            return Prepared(HoverView(card=record, range=span, now=now))
    built = build_query(snap.source, snap.name, position=position, scope="hover")
    if not built.word:
        return Prepared()
    defs = definitions(snap.source, snap.name)
    tied = tied_records(index, snap.relpath, built.scope, defs, file_scope_takes_all=False)
    query = retrieval_query(built, settings, now, limit=settings.hover_count)
    return Prepared(query=query, tied=tuple(tied), scope=built.scope.qualname if built.scope else None,
                    word_range=_word_range(snap.source, position, built.word))


_IDENTIFIER = re.compile(r"[^\W\d]\w*")


def _word_range(source: str, position: tuple[int, int], word: str):
    """The span of the hovered word (UTF-16), for the client to highlight."""
    line_no, character = position
    lines = convert.split_lines(source)
    if not 0 <= line_no < len(lines):
        return None
    line = lines[line_no]
    offset = utf16_to_index(line, character)
    for match in _IDENTIFIER.finditer(line):
        if match.start() <= offset <= match.end() and word in match.group(0):
            start = match.start() + match.group(0).index(word)
            return ((line_no, index_to_utf16(line, start)), (line_no, index_to_utf16(line, start + len(word))))
    return None


_CACHE_SIZE = 128
_cache: OrderedDict[tuple, HoverView | None] = OrderedDict()
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget kept answers (the server calls it when it swaps in a new index)."""
    with _cache_lock:
        _cache.clear()


def _cache_key(index: LiveIndex, prepared: Prepared, settings: Settings) -> tuple:
    query = prepared.query
    arch = tuple(sorted(dict(query.architecture).items())) if query.architecture else ()
    return (id(index), index.version, query.text, arch, query.now, tuple(r.id for r in prepared.tied),
            prepared.scope, settings)


def finish(index: LiveIndex, prepared: Prepared, settings: Settings, now: datetime) -> HoverView | None:
    """Step two: ties first, then the gated ranking (`hover.count` in all).

    Every identifier of one definition asks the same question (the scope's text; the word is part
    of it), so answers are kept per (index version, query, ties, settings, minute): moving the
    mouse around a function ranks once."""
    if prepared.query is None:
        return prepared.view
    key = _cache_key(index, prepared, settings)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            cached = _cache[key]
            return replace(cached, range=prepared.word_range) if cached is not None else None
    related = find_related(index, prepared.query, prepared.tied, min_score=settings.min_score,
                           limit=settings.hover_count, count_cap=HOVER_COUNT_CAP)
    view = _view(related, settings.hover_count, prepared.scope, prepared.query.now) if related else None
    with _cache_lock:
        _cache[key] = view
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return replace(view, range=prepared.word_range) if view is not None else None


def compute(index: LiveIndex, snap: "Snapshot", position: tuple[int, int], settings: Settings,
            now: datetime) -> HoverView | None:
    """The hover at `position` (0-based line, UTF-16 character), or None when there is nothing to say."""
    return finish(index, prepare(index, snap, position, settings, now), settings, now)


def _view(related: Related, count: int, scope: str | None, now: datetime) -> HoverView:
    return HoverView(items=tuple(related.shown(count)), more=related.more(count),
                     more_capped=related.capped, scope=scope, now=now)


# -- rendering ---------------------------------------------------------------------------------------

def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _status(scored_or_record: ScoredRecord | Record) -> tuple[str, bool]:
    record = scored_or_record.record if isinstance(scored_or_record, ScoredRecord) else scored_or_record
    dead = scored_or_record.dead_end if isinstance(scored_or_record, ScoredRecord) else is_dead_end(record)
    return record.status.value, dead


def _components(scored: ScoredRecord) -> list[tuple[str, str]]:
    parts = scored.components
    return [(term, f"{_number(getattr(parts, term))} ×{parts.weights.get(term, 0.0):.2f}") for term in TERMS]


def _header_words(count: int) -> str:
    return f"{count} related experiment{'s' if count != 1 else ''}"


def render_markdown(view: HoverView) -> str:
    if view.card is not None:
        return _card_markdown(view.card, view.now)
    out: list[str] = []
    for n, (scored, tied) in enumerate(view.items):
        record = scored.record
        status, dead = _status(scored)
        badges = [escape(status, 40)]
        if dead:
            badges.append("**dead end**")
        if tied:
            badges.append("tied to this code")
        if n:
            out.append("---")
        out.append(f"{'⛔' if dead else '🧪'} **{escape(record.name, 120)}** · {escape(record.id, 80)} · "
                   + " · ".join(badges))
        age = convert.age(record.time, view.now) if view.now else ""
        out.append(f"{escape(age)} · score {scored.score:.2f}  \n"
                   + " · ".join(f"{term} {value}" for term, value in _components(scored)))
        details = []
        if scored.components.matched_terms:
            details.append("matched: " + ", ".join(escape(t, 40) for t in scored.components.matched_terms[:12]))
        if scored.components.shared_components:
            details.append("shared: " + ", ".join(escape(c, 40) for c in scored.components.shared_components[:12]))
        if details:
            out.append(" · ".join(details))
        if record.headline:
            out.append(f"> {escape(record.headline)}")
    if view.more:
        out.append("---")
        more = f"{view.more}+" if view.more_capped else str(view.more)
        out.append(f"{more} more related — *Soma: Find Related Experiments* lists them all")
    return "\n\n".join(out)


def render_plain(view: HoverView) -> str:
    if view.card is not None:
        return _card_plain(view.card, view.now)
    out: list[str] = []
    for scored, tied in view.items:
        record = scored.record
        status, dead = _status(scored)
        badges = [status] + (["dead end"] if dead else []) + (["tied to this code"] if tied else [])
        age = convert.age(record.time, view.now) if view.now else ""
        out.append(f"{plain(record.name, 120)} ({plain(record.id, 80)}) — {', '.join(badges)}")
        out.append(f"  {age} · score {scored.score:.2f}")
        out.append("  " + " · ".join(f"{term} {value}" for term, value in _components(scored)))
        if scored.components.matched_terms:
            out.append("  matched: " + ", ".join(scored.components.matched_terms[:12]))
        if scored.components.shared_components:
            out.append("  shared: " + ", ".join(scored.components.shared_components[:12]))
        if record.headline:
            out.append(f"  {plain(record.headline)}")
    if view.more:
        more = f"{view.more}+" if view.more_capped else str(view.more)
        out.append(f"{more} more related")
    return "\n".join(out)


def _card_lines(record: Record, now: datetime | None, text) -> list[tuple[str, str]]:
    status, dead = _status(record)
    rows = [("status", text(status + (", dead end" if dead else ""), 80))]
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


def _card_markdown(record: Record, now: datetime | None) -> str:
    head = f"**{escape(record.name, 120)}** · {escape(record.id, 80)}"
    rows = [f"{label}: {value}" for label, value in _card_lines(record, now, escape)]
    return "\n\n".join([head, *rows])


def _card_plain(record: Record, now: datetime | None) -> str:
    rows = [f"  {label}: {value}" for label, value in _card_lines(record, now, plain)]
    return "\n".join([f"{plain(record.name, 120)} ({plain(record.id, 80)})", *rows])


# -- the LSP feature ---------------------------------------------------------------------------------

def _markdown_ok(ls: "SomaServer") -> bool:
    formats = ls.capability("text_document.hover.content_format", None)
    return not formats or lsp.MarkupKind.Markdown in formats


@contained(name="hover")
async def hover(ls: "SomaServer", params: lsp.HoverParams) -> lsp.Hover | None:
    snap = ls.snapshot(params.text_document.uri)
    position = (params.position.line, params.position.character)
    index, settings, now = ls.index, ls.settings, ls.now()
    # Two steps, each off the loop; a cancelled (superseded) hover stops between them.
    prepared = await ls.run_query(prepare, index, snap, position, settings, now)
    view = await ls.run_query(finish, index, prepared, settings, now)
    if view is None:
        return None
    if _markdown_ok(ls):
        content = lsp.MarkupContent(lsp.MarkupKind.Markdown, render_markdown(view))
    else:
        content = lsp.MarkupContent(lsp.MarkupKind.PlainText, render_plain(view))
    return lsp.Hover(content, range=convert.lsp_range(view.range) if view.range else None)


def register(ls: "SomaServer") -> None:
    ls.feature(lsp.TEXT_DOCUMENT_HOVER)(hover)
