"""Document links for experiment ids written in the code, e.g. `# see exp-0042` (`ids`). A link
points at the record's file and line — a `file:` URI the server makes from where it read the record,
never anything from the record's text.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from ...query import index_to_utf16
from .. import convert
from ..guard import contained
from ..ids import MAX_LINE, ids_in
from ..markdown import plain
from ..session import Session, Snapshot

MAX_LINKS = 1000


def compute(snap: Snapshot) -> list[lsp.DocumentLink]:
    index = snap.index
    tooltips = bool(snap.capability("text_document.document_link.tooltip_support", False))
    out: list[lsp.DocumentLink] = []
    for line_no, line in enumerate(snap.document.lines):
        if len(line) > MAX_LINE:
            continue
        for start, end, token in ids_in(index, line):
            record = index.get(token)
            where = convert.record_lsp_location(record) if record is not None else None
            if where is None:
                continue
            target = f"{where.uri}#L{where.range.start.line + 1}"
            out.append(lsp.DocumentLink(
                range=lsp.Range(lsp.Position(line_no, index_to_utf16(line, start)),
                                lsp.Position(line_no, index_to_utf16(line, end))),
                target=target,
                tooltip=f"{plain(record.name, 80)} ({record.status.value}) — open the experiment record"
                if tooltips else None))
            if len(out) >= MAX_LINKS:
                return out
    return out


@contained(list, name="documentLink")
async def document_link(session: Session, params: lsp.DocumentLinkParams) -> list[lsp.DocumentLink]:
    return await session.run_query(compute, await session.snapshot_at(params.text_document.uri))


def register(session: Session, pools: object) -> None:
    session.handle(lsp.TEXT_DOCUMENT_DOCUMENT_LINK, document_link,
                   options=lsp.DocumentLinkOptions(resolve_provider=False))
