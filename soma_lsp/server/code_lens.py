"""Code lenses on definitions with related experiments: `4 related experiments · 1 dead end`.

Each lens counts what "find related experiments" lists for that definition (ties first, then the
gated ranking; "N+" past `related.COUNT_CAP`) and carries the client-side command `soma.showRelated`
with `[{uri, position}]`. Definitions with nothing related get no lens.

Lenses must not jump while typing: they are computed on the document as parsed, kept per document,
and on every edit their lines are moved with the text (an edit above a lens shifts it; a lens inside
a replaced region stays at the region's start). They are recomputed only once typing has paused
(`LENS_DEBOUNCE`), after which the client is asked to refresh (`workspace/codeLens/refresh`, when
supported). A request while the user is typing gets the mapped, previous lenses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from ..query import build_query, definitions
from ..retrieval import LiveIndex
from .guard import contained
from .timing import LENS_DEBOUNCE
from .related import find_related, retrieval_query, tied_records
from .settings import Settings

if TYPE_CHECKING:
    from .server import Snapshot, SomaServer

log = logging.getLogger("soma_lsp.server")
SHOW_RELATED = "soma.showRelated"
#: Lenses are computed for at most this many definitions of a file (in source order): each costs a
#: ranking over the pool, and a generated file with thousands of functions must not keep a core busy.
MAX_DEFINITIONS = 400


@dataclass(slots=True)
class Lens:
    line: int
    start: int
    end: int
    title: str
    uri: str

    def to_lsp(self) -> lsp.CodeLens:
        position = {"line": self.line, "character": self.start}
        return lsp.CodeLens(
            range=lsp.Range(lsp.Position(self.line, self.start), lsp.Position(self.line, self.end)),
            command=lsp.Command(self.title, SHOW_RELATED, arguments=[{"uri": self.uri, "position": position}]))


@dataclass(slots=True)
class LensState:
    version: int | None
    key: tuple  # (index version, settings) the lenses were computed for
    lenses: list[Lens] = field(default_factory=list)
    mapped: bool = False  # moved through edits since computed


def title(total: int, capped: bool, dead_ends: int) -> str:
    count = f"{total}+" if capped else str(total)
    text = f"{count} related experiment{'s' if total != 1 or capped else ''}"
    if dead_ends:
        text += f" · {dead_ends} dead end{'s' if dead_ends != 1 else ''}"
    return text


def compute(index: LiveIndex, snap: "Snapshot", settings: Settings, now: datetime,
            cancelled: Callable[[], bool] = lambda: False) -> list[Lens]:
    defs = definitions(snap.source, snap.name)
    out: list[Lens] = []
    for definition in defs[:MAX_DEFINITIONS]:
        if cancelled():
            break
        (line, start), (_, end) = definition.name_range
        built = build_query(snap.source, snap.name, position=(line, start), scope="lens")
        scope = built.scope or definition
        tied = tied_records(index, snap.relpath, scope, defs, file_scope_takes_all=False)
        query = retrieval_query(built, settings, now, limit=None)
        related = find_related(index, query, tied, min_score=settings.min_score, limit=None)
        if not related:
            continue
        out.append(Lens(line, start, end, title(related.total, related.capped, related.dead_ends), snap.uri))
    return out


def _key(ls: "SomaServer") -> tuple:
    return (id(ls.index), ls.index.version, ls.settings)


async def recompute(ls: "SomaServer", uri: str, *, refresh: bool = True) -> list[Lens]:
    """Compute a document's lenses now (off the loop) and keep them; ask the client to refresh.
    Documents whose lenses were never asked for are left alone (the client may not show lenses)."""
    if not ls.settings.code_lens or uri not in ls.open_uris():
        ls.lens_states.pop(uri, None)
        return []
    snap = ls.snapshot(uri)
    key = _key(ls)
    stop = False
    try:
        lenses = await ls.run_query(compute, ls.index, snap, ls.settings, ls.now(), lambda: stop)
    except asyncio.CancelledError:
        stop = True
        raise
    current = ls.open_document(uri)
    if current is None or current.version != snap.version:
        return lenses  # the text moved on; the next recompute will store
    old = ls.lens_states.get(uri)
    ls.lens_states[uri] = LensState(snap.version, key, lenses)
    changed = old is None or old.mapped or [_sig(x) for x in old.lenses] != [_sig(x) for x in lenses]
    if refresh and changed:
        await refresh_client(ls)
    return lenses


def _sig(lens: Lens) -> tuple:
    return (lens.line, lens.start, lens.title)


async def refresh_client(ls: "SomaServer") -> None:
    if not ls.capability("workspace.code_lens.refresh_support", False):
        return
    try:
        await asyncio.wait_for(ls.workspace_code_lens_refresh_async(None), 10)
    except Exception as error:  # noqa: BLE001
        log.debug("workspace/codeLens/refresh failed: %s", error)


async def recompute_all(ls: "SomaServer") -> None:
    """Recompute the lenses of every open document the client has asked lenses for."""
    changed = False
    for uri in [u for u in ls.open_uris() if u in ls.lens_states]:
        if ls.idle_for(uri) < LENS_DEBOUNCE:  # being typed in: after the pause, like any edit
            ls.schedule_document(uri, LENS_DEBOUNCE)
            continue
        try:
            await recompute(ls, uri, refresh=False)
            changed = True
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("code lenses for %s failed", uri)
    if changed:
        await refresh_client(ls)


def map_through_edits(ls: "SomaServer", uri: str,
                      changes: Sequence[lsp.TextDocumentContentChangeEvent]) -> None:
    """Move the kept lenses with the text of these edits (called before the debounce)."""
    state = ls.lens_states.get(uri)
    if state is None:
        return
    for change in changes:
        span = getattr(change, "range", None)
        if span is None:
            continue  # whole-document replacement: keep lines as they are until recomputed
        start, end = span.start.line, span.end.line
        delta = change.text.count("\n") - (end - start)
        for lens in state.lenses:
            if lens.line > end:
                lens.line += delta
            elif lens.line > start:
                lens.line = start
    state.mapped = True


@contained(list, name="codeLens")
async def code_lens(ls: "SomaServer", params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    if not ls.settings.code_lens:
        return []
    uri = params.text_document.uri
    state = ls.lens_states.get(uri)
    document = ls.open_document(uri)
    if state is not None and document is not None:
        fresh = state.version == document.version and state.key == _key(ls)
        if fresh or ls.idle_for(uri) < LENS_DEBOUNCE:
            return [lens.to_lsp() for lens in state.lenses]
    if document is None:
        snap = ls.snapshot(uri)  # not open: compute without keeping
        lenses = await ls.run_query(compute, ls.index, snap, ls.settings, ls.now())
    else:
        lenses = await recompute(ls, uri, refresh=False)
    return [lens.to_lsp() for lens in lenses]


def register(ls: "SomaServer") -> None:
    ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))(code_lens)
