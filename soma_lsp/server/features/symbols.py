"""Workspace symbols: experiments by name or headline (e.g. `#` → `rope` finds `rope-theta-500k`).

Matching is case-insensitive: every whitespace-separated word of the query must occur in the
record's id, name or headline. Results rank name-prefix matches first, then name matches, then
headline-only matches, then by id; at most `MAX_SYMBOLS`. An empty query lists the pool (up to
the cap). Symbol names are the record's name (plain text: symbols are not Markdown); the location
is the record's file and line.
"""

from __future__ import annotations

from functools import lru_cache

from lsprotocol import types as lsp

from ...records import Record
from ...retrieval import LiveIndex, is_dead_end
from .. import convert
from ..guard import contained
from ..markdown import plain
from ..session import Session

MAX_SYMBOLS = 200


@lru_cache(maxsize=1)  # one pool at a time: an old index is not kept alive
def _catalogue(version: int, index: LiveIndex) -> tuple[tuple[Record, str, str], ...]:
    """Each record with its lower-cased `id name` and headline, for this index (by identity) at this version."""
    return tuple((r, f"{r.id} {r.name}".lower(), (r.headline or "").lower()) for r in index.records())


def compute(index: LiveIndex, query: str) -> list[lsp.SymbolInformation]:
    words = query.lower().split()
    matches: list[tuple[tuple, Record]] = []
    for record, name, headline in _catalogue(index.version, index):
        if not all(w in name or w in headline for w in words):
            continue
        in_name = all(w in name for w in words)
        prefix = bool(words) and record.name.lower().startswith(words[0])
        matches.append(((not prefix, not in_name, record.id), record))
    matches.sort(key=lambda pair: pair[0])
    out = []
    for _, record in matches[:MAX_SYMBOLS]:
        where = convert.record_lsp_location(record)
        if where is None:
            continue
        status = record.status.value + (", dead end" if is_dead_end(record) else "")
        container = f"{plain(record.id, 80)} · {status}"
        if record.headline:
            container += f" · {plain(record.headline, 120)}"
        out.append(lsp.SymbolInformation(name=plain(record.name, 120), kind=lsp.SymbolKind.Event,
                                         location=where, container_name=container))
    return out


@contained(list, name="workspaceSymbol")
async def workspace_symbol(session: Session, params: lsp.WorkspaceSymbolParams) -> list[lsp.SymbolInformation]:
    return await session.run_query(compute, session.snapshot().index, params.query or "")


def register(session: Session, pools: object) -> None:
    session.handle(lsp.WORKSPACE_SYMBOL, workspace_symbol)
