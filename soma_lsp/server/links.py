"""Document links (and the hover card, see `hover`) for experiment ids written in the code, e.g.
`# see exp-0042`. A link points at the record's file and line — a `file:` URI the server makes from
where it read the record, never anything from the record's text.

An id is recognised when a token (letters, digits, `_`, `-`, `.`) containing a digit — or its
shorter form at a `.` boundary (`exp-0042.json` → `exp-0042`) — is the id of a record in the
pool; tokens without digits are left alone so that a record id such as `baseline`
does not turn every `baseline` identifier into a link.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from ..query import index_to_utf16, utf16_to_index
from ..retrieval import LiveIndex
from . import convert
from .guard import contained
from .markdown import plain

if TYPE_CHECKING:
    from .server import Snapshot, SomaServer

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
MAX_LINKS = 1000
MAX_LINE = 10_000  # characters; longer lines (minified data) are skipped


def _candidates(line: str):
    """(start, end, token) for each token with a digit, and its shorter forms at `.` boundaries
    (`exp-0042.json` → `exp-0042.json`, `exp-0042`), longest first."""
    for match in _TOKEN.finditer(line):
        token = match.group(0)
        if not any(c.isdigit() for c in token):
            continue
        yield match.start(), match.end(), token
        while "." in token:
            token = token.rsplit(".", 1)[0].rstrip(".-_")
            if token and any(c.isdigit() for c in token):
                yield match.start(), match.start() + len(token), token


def _ids(index: LiveIndex, line: str):
    """(start, end, id) of the experiment ids written in a line, the longest form that is an id."""
    taken_until = -1
    for start, end, token in _candidates(line):
        if start < taken_until:
            continue
        if token in index:
            taken_until = end
            yield start, end, token


def id_at(index: LiveIndex, source: str, position: tuple[int, int]):
    """(record id, UTF-16 span) of an experiment id under the position, or None."""
    line_no, character = position
    lines = convert.split_lines(source)
    if not 0 <= line_no < len(lines) or len(lines[line_no]) > MAX_LINE:
        return None
    line = lines[line_no]
    offset = utf16_to_index(line, character)
    for start, end, token in _ids(index, line):
        if start <= offset <= end:
            span = ((line_no, index_to_utf16(line, start)), (line_no, index_to_utf16(line, end)))
            return token, span
        if start > offset:
            break
    return None


def compute(index: LiveIndex, snap: "Snapshot", tooltips: bool = True) -> list[lsp.DocumentLink]:
    out: list[lsp.DocumentLink] = []
    for line_no, line in enumerate(convert.split_lines(snap.source)):
        if len(line) > MAX_LINE:
            continue
        for start, end, token in _ids(index, line):
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
async def document_link(ls: "SomaServer", params: lsp.DocumentLinkParams) -> list[lsp.DocumentLink]:
    snap = ls.snapshot(params.text_document.uri)
    tooltips = bool(ls.capability("text_document.document_link.tooltip_support", False))
    return await ls.run_query(compute, ls.index, snap, tooltips)


def register(ls: "SomaServer") -> None:
    ls.feature(lsp.TEXT_DOCUMENT_DOCUMENT_LINK, lsp.DocumentLinkOptions(resolve_provider=False))(document_link)
