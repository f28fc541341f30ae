"""Hover: the experiments that bear on the definition under the cursor (docs/spec.md §3-4).

document → query (`scope="hover"`: the enclosing definition + the word) → core (ties first, then the
gated ranking, `hover.count` in all) → view (`hover_view`: Markdown, or plain text for clients without
Markdown and for `soma-lsp explain`). On an experiment id written in the code (`# see exp-0042`) the hover is
that record's card instead. Nothing worth showing → no hover at all. While the first load still fills
the index, a hover answers from the records loaded so far and ends with `partial_note`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime

from lsprotocol import types as lsp

from ...query import NO_HINTS, Hints, build_query, definitions
from .. import convert
from ..guard import contained
from ..ids import id_at
from ..related import HOVER_COUNT_CAP, Related, find_related, tied_records
from ..session import Session, Snapshot, to_the_minute
from ..hover_view import HoverView, render_markdown, render_plain


@dataclass(frozen=True)
class Prepared:
    """Step one of a hover: the query and the ties (or the card of an id under the cursor)."""

    view: HoverView | None = None  # final already (a card, or nothing to say)
    query: object = None
    tied: tuple = ()
    scope: str | None = None
    word_range: tuple[tuple[int, int], tuple[int, int]] | None = None
    hints: Hints = NO_HINTS  # the built query's hints for the gate and order (levers)


def prepare(snap: Snapshot, position: tuple[int, int]) -> Prepared:
    """Step one: the card of an id under the cursor, else the query and the ties."""
    index, doc = snap.index, snap.document
    now = to_the_minute(snap.now)
    found = id_at(index, doc.source, position)
    if found is not None:
        record_id, span = found
        record = index.get(record_id)
        if record is not None:
            return Prepared(HoverView(card=record, range=span, now=now))
    built = build_query(doc.source, doc.name, position=position, scope="hover",
                        levers=snap.settings.levers)
    if not built.word:
        return Prepared()
    defs = definitions(doc.source, doc.name)
    tied = tied_records(index, doc.relpath, built.scope, defs, file_scope_takes_all=False,
                        commit_ties=snap.commit_ties_here())
    query = replace(snap, now=now).retrieval_query(built, limit=snap.settings.hover_count)
    return Prepared(query=query, tied=tuple(tied), scope=built.scope.qualname if built.scope else None,
                    word_range=built.word_range, hints=built.hints)


class HoverCache:
    """Answers kept per (index, index version, query, ties, settings, minute): every identifier of
    one definition asks the same question (the scope's text; the word is part of it), so moving the
    mouse around a function ranks once. The server clears it when it swaps in a new index (answers
    of the old one, and never a stale hit on a reused object id)."""

    SIZE = 128

    def __init__(self) -> None:
        self._answers: OrderedDict[tuple, HoverView | None] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self, *_: object) -> None:
        with self._lock:
            self._answers.clear()

    def get(self, key: tuple) -> tuple[bool, HoverView | None]:
        with self._lock:
            if key not in self._answers:
                return False, None
            self._answers.move_to_end(key)
            return True, self._answers[key]

    def put(self, key: tuple, view: HoverView | None) -> None:
        with self._lock:
            self._answers[key] = view
            while len(self._answers) > self.SIZE:
                self._answers.popitem(last=False)


def _cache_key(snap: Snapshot, prepared: Prepared) -> tuple:
    query, index = prepared.query, snap.index
    arch = tuple(sorted(dict(query.architecture).items())) if query.architecture else ()
    return (id(index), index.version, query.text, arch, query.now, tuple((t.record.id, t.commit) for t in prepared.tied),
            prepared.scope, snap.settings, prepared.hints)


def finish(snap: Snapshot, prepared: Prepared, cache: HoverCache | None = None) -> HoverView | None:
    """Step two: ties first, then the gated ranking (`hover.count` in all)."""
    if prepared.query is None:
        return prepared.view
    key = _cache_key(snap, prepared)
    if cache is not None:
        hit, cached = cache.get(key)
        if hit:
            return replace(cached, range=prepared.word_range) if cached is not None else None
    settings = snap.settings
    related = find_related(snap.index, prepared.query, prepared.tied, min_score=settings.min_score,
                           limit=settings.hover_count, count_cap=HOVER_COUNT_CAP, levers=settings.levers,
                           hints=prepared.hints, unasked=True)
    view = _view(related, settings.hover_count, prepared.scope, prepared.query.now) if related else None
    if cache is not None:
        cache.put(key, view)
    return replace(view, range=prepared.word_range) if view is not None else None


def compute(snap: Snapshot, position: tuple[int, int]) -> HoverView | None:
    """The hover at `position` (0-based line, UTF-16 character), or None when there is nothing to say:
    both steps at once, uncached (`soma-lsp explain`)."""
    return finish(snap, prepare(snap, position))


def partial_note(percent: int) -> str:
    """The last line of a hover answered while the pool still loads (the server's own text: nothing
    in it is Markdown)."""
    return f"⏳ partial: the pool is still loading ({percent}%)"


def _view(related: Related, count: int, scope: str | None, now: datetime) -> HoverView:
    return HoverView(items=tuple(related.shown(count)), more=related.more(count),
                     more_capped=related.capped, scope=scope, now=now, commits=related.commits,
                     labels=related.labels)


# -- the LSP feature ---------------------------------------------------------------------------------

@contained(name="hover")
async def hover(session: Session, cache: HoverCache, params: lsp.HoverParams) -> lsp.Hover | None:
    snap = await session.snapshot_at(params.text_document.uri)
    position = (params.position.line, params.position.character)
    # Two steps, each off the loop; a cancelled (superseded) hover stops between them.
    prepared = await session.run_query(prepare, snap, position)
    view = await session.run_query(finish, snap, prepared, cache)
    if view is None:
        return None
    formats = snap.capability("text_document.hover.content_format", None)
    if not formats or lsp.MarkupKind.Markdown in formats:
        kind, text, rule = lsp.MarkupKind.Markdown, render_markdown(view), "\n\n---\n\n"
    else:
        kind, text, rule = lsp.MarkupKind.PlainText, render_plain(view), "\n\n"
    if snap.partial is not None:
        text += rule + partial_note(snap.partial)
    content = lsp.MarkupContent(kind, text)
    return lsp.Hover(content, range=convert.lsp_range(view.range) if view.range else None)


def register(session: Session, pools: object) -> None:
    cache = HoverCache()
    session.index_swapped.subscribe(cache.clear)
    session.handle(lsp.TEXT_DOCUMENT_HOVER, hover, cache)
