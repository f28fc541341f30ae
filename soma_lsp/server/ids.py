"""Experiment ids written in the code (`# see exp-0042`): where they are on a line. The hover (an id
under the cursor shows its record's card) and document links read them from here.

An id is recognised when a token (letters, digits, `_`, `-`, `.`) containing a digit — or its
shorter form at a `.` boundary (`exp-0042.json` → `exp-0042`) — is the id of a record in the
pool; tokens without digits are left alone so that a record id such as `baseline`
does not turn every `baseline` identifier into a link.
"""

from __future__ import annotations

import re

from ..query import index_to_utf16, split_lines, utf16_to_index
from ..retrieval import LiveIndex

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
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


def ids_in(index: LiveIndex, line: str):
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
    lines = split_lines(source)
    if not 0 <= line_no < len(lines) or len(lines[line_no]) > MAX_LINE:
        return None
    line = lines[line_no]
    offset = utf16_to_index(line, character)
    for start, end, token in ids_in(index, line):
        if start <= offset <= end:
            span = ((line_no, index_to_utf16(line, start)), (line_no, index_to_utf16(line, end)))
            return token, span
        if start > offset:
            break
    return None
