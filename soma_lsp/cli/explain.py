"""`soma-lsp explain FILE[:LINE[:COL]]`: what the editor would show there, as plain text.

It runs the server's own feature code (`features.hover.compute`, `features.diagnostics.compute`,
`features.code_lens.compute`, on a `session.Snapshot`) over the file as it is on disk and the pool as the server would load
it, so what it prints is what a hover, the lenses and the dead-end warnings show. LINE and COL are
1-based (COL defaults to the line's first identifier that is not a keyword). Without LINE: every warning of
the file and the lens of every definition.

The workspace is `--workspace`, else the nearest directory above FILE holding `.soma/pool`, else
the current directory; the pool comes from `--pool`, `$SOMA_POOL` or `.soma/pool` (docs/spec.md §1.1).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

from .render import print_safe


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("explain", help="print what the hover and warnings would show at FILE[:LINE[:COL]]",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("location", metavar="FILE[:LINE[:COL]]")
    parser.add_argument("--pool", action="append", metavar="DIR",
                        help="a pool directory (repeatable); default: $SOMA_POOL, else the workspace's .soma/pool "
                             "(docs/spec.md §1.1)")
    parser.add_argument("--workspace", metavar="DIR", help="the workspace root (default: found from FILE)")
    parser.add_argument("--now", metavar="RFC3339", help="the time ages and recency are measured at (default: now)")
    parser.set_defaults(run=run)


log = logging.getLogger("soma_lsp.cli")
_LOCATION = re.compile(r"^(?P<file>.+?)(?::(?P<line>\d+)(?::(?P<col>\d+))?)?$")


def parse_location(text: str) -> tuple[str, int | None, int | None]:
    if os.path.exists(text):
        return text, None, None
    match = _LOCATION.match(text)
    if match is None:
        return text, None, None
    line, col = match.group("line"), match.group("col")
    return match.group("file"), int(line) if line else None, int(col) if col else None


def find_workspace(path: Path) -> Path:
    for parent in [path.parent, *path.parent.parents]:
        if (parent / ".soma" / "pool").is_dir():
            return parent
    return Path.cwd()


def run(args: argparse.Namespace) -> int:
    from ..pool import LivePool, pool_roots
    from ..retrieval import LiveIndex
    from ..server import convert
    from ..server.features import code_lens, diagnostics, hover
    from ..server.hover_view import render_plain
    from ..pool.commit_ties import CommitTieMap
    from ..pool.snapshot import cache_directory
    from ..records import RecordError, parse_timestamp
    from ..server.commit_service import repositories, run_of, tie_map
    from ..server.session import Document, Snapshot
    from ..server.settings import Settings

    file, line, col = parse_location(args.location)
    path = Path(file).resolve()
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"soma-lsp explain: cannot read {file}: {error}", file=sys.stderr)
        return 2
    try:
        now = parse_timestamp(args.now, "--now") if args.now else datetime.now(timezone.utc)
    except RecordError as error:  # the records' own reading of a time, as `query --now` has it
        print(f"soma-lsp explain: {error}", file=sys.stderr)
        return 2
    workspace = Path(args.workspace).resolve() if args.workspace else find_workspace(path)
    index = LiveIndex()
    pool = LivePool(pool_roots([workspace], args.pool, os.environ), index, in_parts=False)
    pool.load()
    settings = Settings()
    relpath = convert.relative_to_folders(str(path), [str(workspace)])
    document = Document(path.as_uri(), str(path), relpath, source, None)
    runs = [run_of(r) for r in index.records() if r.commit]
    ties = tie_map(runs, repositories([str(workspace)], log.info).values(), cache_directory(os.environ), log.info) \
        if runs else CommitTieMap()
    snap = Snapshot(index, settings, now, pool, document, commit_ties=ties)
    lines = document.lines
    shown = relpath or str(path)
    out = io.StringIO()  # printed at the end, each line terminal-safe (record text is data)

    found = diagnostics.compute(snap)
    if line is not None:
        if not 1 <= line <= len(lines):
            print(f"soma-lsp explain: {shown} has {len(lines)} lines, not {line}", file=sys.stderr)
            return 2
        text = lines[line - 1]
        column = col - 1 if col else _first_word(source, str(path), line - 1, text)
        character = len(text[:column].encode("utf-16-le")) // 2
        out.write(f"{shown}:{line}:{column + 1}\n")
        view = hover.compute(snap, (line - 1, character))
        out.write("hover:\n")
        out.write(_indent(render_plain(view)) if view else "  (nothing related)\n")
        found = [d for d in found if d.range.start.line == line - 1]
    else:
        out.write(f"{shown}\nlenses:\n")
        lenses = code_lens.compute(snap)
        for lens in lenses:
            name = lines[lens.line][lens.start:lens.end]
            out.write(f"  {lens.line + 1}:{lens.start + 1} {name}: {lens.title}\n")
        if not lenses:
            out.write("  (none)\n")
    out.write("warnings:\n" if found else "warnings: (none)\n")
    for diagnostic in found:
        severity = {1: "error", 2: "warning", 3: "information", 4: "hint"}.get(int(diagnostic.severity or 2))
        start = diagnostic.range.start
        out.write(f"  {shown}:{start.line + 1}:{start.character + 1}: {severity}: {diagnostic.message}"
                  f" [{diagnostic.code}]\n")
    if not len(index):  # nothing could relate: say where the pool was looked for
        out.write(f"(no experiments in the pool: read from {', '.join(pool.sources) or 'no pool'})\n")
    print_safe(out.getvalue().removesuffix("\n"))
    return 0


def _first_word(source: str, path: str, line: int, text: str) -> int:
    """Without COL: the first identifier on the line that a hover would answer on (not a keyword)."""
    from ..query import build_query

    for match in re.finditer(r"[^\W\d]\w*", text):
        character = len(text[:match.start()].encode("utf-16-le")) // 2
        if build_query(source, path, position=(line, character), scope="hover").word:
            return match.start()
    return len(text) - len(text.lstrip())


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())
