"""Code lenses on definitions with related experiments: `4 related experiments · 1 dead end`.

Each lens counts what "find related experiments" lists for that definition (ties first, then the
gated ranking; "N+" past `related.COUNT_CAP`) and carries the client-side command `soma.showRelated`
with `[{uri, position}]`. Definitions with nothing related get no lens. Records tied to the file as a
whole (a `code` path without a symbol) get one file-level lens where a file-level warning goes
(`2 experiments tied to this file · 1 dead end`), not a count on every definition in the file.

Lenses must not jump while typing: they are computed on the document as parsed, kept per document,
and on every edit their lines are moved with the text (an edit above a lens shifts it; a lens inside
a replaced region stays at the region's start). They are recomputed only once typing has paused
(`LENS_DEBOUNCE`), after which the client is asked to refresh (`workspace/codeLens/refresh`, when
supported). A request while the user is typing gets the mapped, previous lenses. While the first load
still fills the index, titles end with `PARTIAL`; the lenses are computed again after each batch the
load commits and once it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from lsprotocol import types as lsp

from ...query import build_query, definitions
from ...retrieval import is_dead_end
from .. import convert
from ..guard import contained
from ..related import find_related, reach_below, tied_records, worth_a_lens
from ..session import Session, Snapshot
from ..timing import LENS_DEBOUNCE

log = logging.getLogger("soma_lsp.server")
SHOW_RELATED = "soma.showRelated"
#: Lenses are computed for at most this many definitions of a file (in source order): each costs a
#: ranking over the pool, and a generated file with thousands of functions must not keep a core busy.
MAX_DEFINITIONS = 400
PARTIAL = " · ⏳ partial"  # the end of a lens's title while the pool still loads


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


#: The lenses kept per open document (uri → state), owned by this feature.
LensStates = dict[str, LensState]


def file_lens(snap: Snapshot, defs) -> Lens | None:
    """The lens of the records tied to this file as a whole, at the file's anchor (None: none)."""
    doc = snap.document
    tied = tied_records(snap.index, doc.relpath, None, defs, file_scope_takes_all=False)
    if not tied:
        return None
    anchor = convert.file_anchor(doc.lines)
    dead = sum(is_dead_end(t.record) for t in tied)
    text = f"{len(tied)} experiment{'s' if len(tied) != 1 else ''} tied to this file"
    if dead:
        text += f" · {dead} dead end{'s' if dead != 1 else ''}"
    return Lens(anchor.start.line, anchor.start.character, anchor.end.character, text, doc.uri)


def compute(snap: Snapshot, cancelled: Callable[[], bool] = lambda: False) -> list[Lens]:
    lenses = _lenses(snap, cancelled)
    if snap.partial is not None:
        for lens in lenses:
            lens.title += PARTIAL
    return lenses


def _lenses(snap: Snapshot, cancelled: Callable[[], bool]) -> list[Lens]:
    doc, index = snap.document, snap.index
    defs = definitions(doc.source, doc.name)
    whole = file_lens(snap, defs)
    out: list[Lens] = [whole] if whole is not None else []
    for definition in defs[:MAX_DEFINITIONS]:
        if cancelled():
            break
        (line, start), (_, end) = definition.name_range
        built = build_query(doc.source, doc.name, position=(line, start), scope="lens",
                            levers=snap.settings.levers)
        scope = built.scope or definition
        tied = tied_records(index, doc.relpath, scope, defs, file_scope_takes_all=False,
                            commit_ties=snap.commit_ties_here())
        query = snap.retrieval_query(built, limit=None)
        related = find_related(index, query, tied, min_score=snap.settings.min_score, limit=None,
                               levers=snap.settings.levers, hints=built.hints, reach=reach_below(snap.settings.levers))
        if not worth_a_lens(index, related, levers=snap.settings.levers, hints=built.hints):
            continue
        out.append(Lens(line, start, end, title(related.total, related.capped, related.dead_ends), doc.uri))
    return out


def _key(snap: Snapshot) -> tuple:
    return (id(snap.index), snap.index.version, snap.settings, snap.partial is None)


async def recompute(session: Session, states: LensStates, uri: str, *, refresh: bool = True) -> list[Lens]:
    """Compute a document's lenses now (off the loop) and keep them; ask the client to refresh.
    Documents whose lenses were never asked for are left alone (the client may not show lenses)."""
    if not session.settings.code_lens or uri not in session.open_uris():
        states.pop(uri, None)
        return []
    snap = await session.snapshot_at(uri)
    stop = False
    try:
        lenses = await session.run_query(compute, snap, lambda: stop)
    except asyncio.CancelledError:
        stop = True
        raise
    current = session.open_document(uri)
    if current is None or current.version != snap.document.version:
        return lenses  # the text moved on; the next recompute will store
    old = states.get(uri)
    states[uri] = LensState(snap.document.version, _key(snap), lenses)
    changed = old is None or old.mapped or [_sig(x) for x in old.lenses] != [_sig(x) for x in lenses]
    if refresh and changed:
        await refresh_client(session)
    return lenses


def _sig(lens: Lens) -> tuple:
    return (lens.line, lens.start, lens.title)


async def refresh_client(session: Session) -> None:
    if not session.capability("workspace.code_lens.refresh_support", False):
        return
    try:
        await asyncio.wait_for(session.server.workspace_code_lens_refresh_async(None), 10)
    except Exception as error:  # noqa: BLE001
        log.debug("workspace/codeLens/refresh failed: %s", error)


async def recompute_all(session: Session, states: LensStates) -> None:
    """Recompute the lenses of every open document the client has asked lenses for."""
    changed = False
    for uri in [u for u in session.open_uris() if u in states]:
        if session.idle_for(uri) < LENS_DEBOUNCE:  # being typed in: after the pause, like any edit
            session.schedule_document(uri, LENS_DEBOUNCE)
            continue
        try:
            await recompute(session, states, uri, refresh=False)
            changed = True
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("code lenses for %s failed", uri)
    if changed:
        await refresh_client(session)


def map_through_edits(states: LensStates, uri: str, changes: Sequence[lsp.TextDocumentContentChangeEvent]) -> None:
    """Move the kept lenses with the text of these edits (called before the debounce)."""
    state = states.get(uri)
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


async def settled(session: Session, states: LensStates, uri: str, delay: float, lenses: bool) -> None:
    """A document settled (warnings first, `delay` after the last edit): its lenses follow once
    typing has paused for `LENS_DEBOUNCE`."""
    if lenses and uri in states:
        await asyncio.sleep(max(0.0, LENS_DEBOUNCE - delay))
        await recompute(session, states, uri)


@contained(list, name="codeLens")
async def code_lens(session: Session, states: LensStates, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
    if not session.settings.code_lens:
        return []
    uri = params.text_document.uri
    state = states.get(uri)
    document = session.open_document(uri)
    if state is not None and document is not None:
        fresh = state.version == document.version and state.key == _key(session.snapshot())
        if fresh or session.idle_for(uri) < LENS_DEBOUNCE:
            return [lens.to_lsp() for lens in state.lenses]
    if document is None:
        lenses = await session.run_query(compute, await session.snapshot_at(uri))  # not open: compute without keeping
    else:
        lenses = await recompute(session, states, uri, refresh=False)
    if not session.settings.code_lens:  # turned off while these were computed: the refresh that change
        return []                        # asked for may have gone out before this answer, which must not undo it
    return [lens.to_lsp() for lens in lenses]


def register(session: Session, pools: object) -> None:
    states: LensStates = {}
    session.handle(lsp.TEXT_DOCUMENT_CODE_LENS, code_lens, states,
                   options=lsp.CodeLensOptions(resolve_provider=False))
    session.edited.subscribe(partial(map_through_edits, states))
    session.settled.subscribe(partial(settled, session, states))
    session.closed.subscribe(lambda uri: states.pop(uri, None))
    session.stale.subscribe(lambda: session.spawn(recompute_all(session, states)))
