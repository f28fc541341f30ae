"""Diagnostics: dead-end warnings on tied code, and problems of pool files that are open.

* A definition tied (by a record's `code`) to a dead-end record gets a diagnostic on its **name**;
  a file tied as a whole gets it on the module docstring's first line, else line 0. Severity from
  `deadEnds.severity` (`off`: none), source `soma`, code = the record id, message with the record's
  name, why it is a dead end (its status, or each metric against baseline and goal) and headline,
  related information at the record's file and line. Ties to symbols that no longer exist in the
  file are not shown (nothing to point at).
* A definition tied through the commit a dead-end run ran at (`pool.commit_ties`) gets one too, with
  its own severity (`deadEnds.commitSeverity`) and its evidence in the message (the commit, how long
  ago, whether the code changed since) — unless other runs at the same code succeeded: then the
  failure lies in what differs between them, shown in the hover, and the code gets no warning.
* A line that sets a knob to the value a dead end about that knob ran with (`rope_theta=1e6` in a
  config or as a default, a record `rope-theta-1m` with `rope_theta=1000000`: equal as numbers,
  `soma_lsp.knobs`; "about": `evidence.is_about`) gets one on that line, its evidence appended
  (`· same setting: rope_theta = 1000000`) — lever `knob`, severity `deadEnds.severity`.
* A pool file that is open gets one diagnostic per problem the pool reported for it (bad records,
  unreadable file, duplicate ids), on the problem's line.

Published on open, after a pause in typing, on save, and for every open document whenever the pool
or the settings change.
"""

from __future__ import annotations

from functools import lru_cache, partial

from lsprotocol import types as lsp

from ...pool import normalize
from ...query import definitions, find_definition, index_to_utf16, language_for_path, line_knobs, split_lines
from ...query.languages import CONFIG_LANGUAGES
from ...records import Record
from ...retrieval import dead_end_reason, is_dead_end
from .. import convert, evidence
from ..guard import contained
from ..hover_view import commit_evidence
from ..markdown import plain
from ..session import Session, Snapshot

SOURCE = "soma"
SEVERITY = {"warning": lsp.DiagnosticSeverity.Warning, "information": lsp.DiagnosticSeverity.Information,
            "hint": lsp.DiagnosticSeverity.Hint}


def dead_end_message(record: Record) -> str:
    text = f"Dead end: {plain(record.name, 120)} ({plain(record.id, 80)}, {dead_end_reason(record)})"
    if record.headline:
        text += f" — {plain(record.headline)}"
    return text


def _diagnostic(record: Record, span: lsp.Range, message: str, severity: str) -> lsp.Diagnostic:
    where = convert.record_lsp_location(record)
    related = [lsp.DiagnosticRelatedInformation(where, f"experiment record {plain(record.id, 80)}")] \
        if where is not None else None
    return lsp.Diagnostic(range=span, message=message, severity=SEVERITY[severity], code=record.id, source=SOURCE,
                          related_information=related, data={"id": record.id})


def commit_dead_ends(snap: Snapshot, defs, written: set[tuple]) -> list[lsp.Diagnostic]:
    """Warnings from dead ends tied through their commit (`written`: (line, character, id) already
    warned by a `code` tie)."""
    severity = snap.settings.commit_severity
    if severity not in SEVERITY:
        return []
    out = []
    for tie in snap.commit_ties_here():
        record = snap.index.get(tie.record_id)
        found = find_definition(defs, tie.qualname)
        if record is None or found is None or not tie.blames_code or not is_dead_end(record):
            continue
        span = convert.lsp_range(found.name_range)
        if (span.start.line, span.start.character, record.id) in written:
            continue
        written.add((span.start.line, span.start.character, record.id))
        message = f"{dead_end_message(record)} · {commit_evidence(tie)}"
        out.append(_diagnostic(record, span, message, severity))
    return out


def dead_ends(snap: Snapshot) -> list[lsp.Diagnostic]:
    doc = snap.document
    severity = snap.settings.dead_end_severity
    records = [r for r in snap.index.tied_to(doc.relpath) if is_dead_end(r)] \
        if severity in SEVERITY and doc.relpath else []
    if not records and not snap.commit_ties_here():
        return []
    lines = doc.lines
    defs = definitions(doc.source, doc.name)
    out: list[lsp.Diagnostic] = []
    for record in records:
        targets: list[lsp.Range] = []
        for tie in record.code:
            if tie.path != doc.relpath:
                continue
            if tie.symbol is None:
                span = convert.file_anchor(lines)
            else:
                found = find_definition(defs, tie.symbol)
                if found is None:
                    continue
                span = convert.lsp_range(found.name_range)
            if span not in targets:
                targets.append(span)
        out += [_diagnostic(record, span, dead_end_message(record), severity) for span in targets]
    out += commit_dead_ends(snap, defs, {(d.range.start.line, d.range.start.character, d.code) for d in out})
    out.sort(key=lambda d: (d.range.start.line, d.range.start.character, str(d.code)))
    return out


#: Longer lines (minified data) are not read for settings.
MAX_SETTING_LINE = 2000


def _in_pool(snap: Snapshot) -> bool:
    """Whether the document is a file of the pool itself (its records are not settings of code)."""
    path, pool = snap.document.path, snap.pool
    return pool is not None and path is not None and any(
        convert.inside(convert.real(path), convert.real(root)) for root in pool.roots)


@lru_cache(maxsize=16)
def setting_lines(source: str, config: bool = False) -> tuple[tuple[int, str, tuple[tuple[str, str, str], ...]], ...]:
    """(line number, line, what it sets: `line_knobs`) of each line of a text that sets a knob, read
    once per text: every pool change asks again for every open document, and reading each line of a
    200-line model file took ≈ 1.6 ms of the 10 a pool change → warnings may take (docs/benchmarks.md
    § LSP). (Keyed by the text itself, as `query.document`'s parses: a string keeps its hash.) In a
    config file (`config`) a bare word is a value too (`beta_schedule: linear`), as for lever `knob`."""
    found = []
    for number, line in enumerate(split_lines(source)):
        if len(line) <= MAX_SETTING_LINE and ("=" in line or ":" in line):
            settings = line_knobs(line, config)
            if settings:
                found.append((number, line, settings))
    return tuple(found)


def knob_dead_ends(snap: Snapshot) -> list[lsp.Diagnostic]:
    """Warnings on the lines that set a knob to the value a dead end about that knob ran with."""
    severity = snap.settings.dead_end_severity
    if severity not in SEVERITY or not snap.settings.levers.knob or not len(snap.index) or _in_pool(snap):
        return []
    out = []
    config = language_for_path(snap.document.name) in CONFIG_LANGUAGES  # (as the query builder tells it)
    for number, line, settings in setting_lines(snap.document.source, config):
        for knob, value, written in settings:
            for record_id, label in evidence.knob_tier(snap.index, [(knob, value, written)]):
                record = snap.index.get(record_id)
                if not label.startswith("same setting") or record is None or not is_dead_end(record) \
                        or not evidence.is_about(record, knob):
                    continue
                start = max(line.lower().find(knob), 0)
                end = line.find(written, start)
                end = end + len(written) if end >= 0 else len(line)
                span = lsp.Range(lsp.Position(number, index_to_utf16(line, start)),
                                 lsp.Position(number, index_to_utf16(line, end)))
                out.append(_diagnostic(record, span, f"{dead_end_message(record)} · {plain(label)}", severity))
    return out


def pool_problems(snap: Snapshot) -> list[lsp.Diagnostic]:
    pool, doc = snap.pool, snap.document
    if pool is None or doc.path is None:
        return []
    lines = doc.lines
    out = []
    for problem in pool.problems_for(normalize(doc.path)):
        line = min(max(problem.line, 0), max(len(lines) - 1, 0))
        message = f"{problem.field}: {problem.message}" if problem.field else problem.message
        out.append(lsp.Diagnostic(
            range=convert.line_range(line, lines), message=plain(message, 500),
            severity=lsp.DiagnosticSeverity.Error if problem.severity == "error" else lsp.DiagnosticSeverity.Warning,
            code=problem.kind, source=SOURCE))
    return out


def compute(snap: Snapshot) -> list[lsp.Diagnostic]:
    return dead_ends(snap) + knob_dead_ends(snap) + pool_problems(snap)


@contained(name="diagnostics")
async def publish(session: Session, uri: str, delay: float = 0.0, lenses: bool = True) -> None:
    """A document settled: publish its diagnostics (unless it changed meanwhile)."""
    if uri not in session.open_uris():
        return
    snap = await session.snapshot_at(uri)
    found = await session.run_query(compute, snap)
    current = session.open_document(uri)
    if current is None or current.version != snap.document.version:
        return  # superseded: the next scheduled run publishes for the newer text
    session.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
        uri=uri, diagnostics=found, version=snap.document.version))


def clear(session: Session, uri: str) -> None:
    """A document closed: its diagnostics go."""
    session.server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


def register(session: Session, pools: object) -> None:
    """Diagnostics are pushed when a document settles, and cleared when it closes."""
    session.settled.subscribe(partial(publish, session))
    session.closed.subscribe(partial(clear, session))
