"""Diagnostics: dead-end warnings on tied code, and problems of pool files that are open.

* A definition tied (by a record's `code`) to a dead-end record gets a diagnostic on its **name**;
  a file tied as a whole gets it on the module docstring's first line, else line 0. Severity from
  `deadEnds.severity` (`off`: none), source `soma`, code = the record id, message with the record's
  name, status and headline, related information at the record's file and line. Ties to symbols
  that no longer exist in the file are not shown (nothing to point at).
* A pool file that is open gets one diagnostic per problem the pool reported for it (bad records,
  unreadable file, duplicate ids), on the problem's line.

Published on open, after a pause in typing, on save, and for every open document whenever the pool
or the settings change.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from ..pool import LivePool, normalize
from ..query import definitions, find_definition
from ..records import Record
from ..retrieval import LiveIndex, is_dead_end
from . import convert
from .guard import contained
from .markdown import plain

if TYPE_CHECKING:
    from .server import Snapshot, SomaServer

SOURCE = "soma"
SEVERITY = {"warning": lsp.DiagnosticSeverity.Warning, "information": lsp.DiagnosticSeverity.Information,
            "hint": lsp.DiagnosticSeverity.Hint}
_DOCSTRING = re.compile(r'[rRuUbB]{0,2}("""|\'\'\'|"|\')')


def file_anchor(lines: list[str]) -> lsp.Range:
    """Where a file-level diagnostic goes: the module docstring's first line, else line 0."""
    for number, line in enumerate(lines[:200]):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if _DOCSTRING.match(stripped):
            return convert.line_range(number, lines)
        break
    return convert.line_range(0, lines)


def dead_end_message(record: Record) -> str:
    text = f"Dead end: {plain(record.name, 120)} ({plain(record.id, 80)}, {record.status.value})"
    if record.headline:
        text += f" — {plain(record.headline)}"
    return text


def dead_ends(index: LiveIndex, snap: "Snapshot", severity: str) -> list[lsp.Diagnostic]:
    if severity not in SEVERITY or not snap.relpath:
        return []
    records = [r for r in index.tied_to(snap.relpath) if is_dead_end(r)]
    if not records:
        return []
    lines = snap.lines
    defs = definitions(snap.source, snap.name)
    out: list[lsp.Diagnostic] = []
    for record in records:
        targets: list[lsp.Range] = []
        for tie in record.code:
            if tie.path != snap.relpath:
                continue
            if tie.symbol is None:
                span = file_anchor(lines)
            else:
                found = find_definition(defs, tie.symbol)
                if found is None:
                    continue
                span = convert.lsp_range(found.name_range)
            if span not in targets:
                targets.append(span)
        where = convert.record_lsp_location(record)
        related = [lsp.DiagnosticRelatedInformation(where, f"experiment record {plain(record.id, 80)}")] \
            if where is not None else None
        for span in targets:
            out.append(lsp.Diagnostic(range=span, message=dead_end_message(record), severity=SEVERITY[severity],
                                      code=record.id, source=SOURCE, related_information=related,
                                      data={"id": record.id}))
    out.sort(key=lambda d: (d.range.start.line, d.range.start.character, str(d.code)))
    return out


def pool_problems(pool: LivePool | None, snap: "Snapshot") -> list[lsp.Diagnostic]:
    if pool is None or snap.path is None:
        return []
    lines = snap.lines
    out = []
    for problem in pool.problems_for(normalize(snap.path)):
        line = min(max(problem.line, 0), max(len(lines) - 1, 0))
        message = f"{problem.field}: {problem.message}" if problem.field else problem.message
        out.append(lsp.Diagnostic(
            range=convert.line_range(line, lines), message=plain(message, 500),
            severity=lsp.DiagnosticSeverity.Error if problem.severity == "error" else lsp.DiagnosticSeverity.Warning,
            code=problem.kind, source=SOURCE))
    return out


def compute(index: LiveIndex, pool: LivePool | None, snap: "Snapshot", severity: str) -> list[lsp.Diagnostic]:
    return dead_ends(index, snap, severity) + pool_problems(pool, snap)


@contained(name="diagnostics")
async def publish(ls: "SomaServer", uri: str) -> None:
    if uri not in ls.open_uris():
        return
    snap = ls.snapshot(uri)
    found = await ls.run_query(compute, ls.index, ls.pool, snap, ls.settings.dead_end_severity)
    current = ls.open_document(uri)
    if current is None or current.version != snap.version:
        return  # superseded: the next scheduled run publishes for the newer text
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=found,
                                                                      version=snap.version))


def register(ls: "SomaServer") -> None:
    """Diagnostics are pushed (see `SomaServer.schedule_document`); nothing to register."""
