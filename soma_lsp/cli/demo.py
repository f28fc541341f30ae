"""`soma-lsp demo`: a real LSP session against a workspace, printed for a human.

The demo is an LSP *client*: it starts `soma-lsp` as a subprocess, speaks JSON-RPC to it over stdio
exactly as an editor would, and prints what an editor would show — dead-end warnings, code lenses, a
hover, "find related experiments" and the diagnostics of pool files with bad records. It chooses what
to show from what the server answers, so it works on any workspace: by default the bundled one
(fixtures/workspace, which the wheel carries as package data), or a project of one's own.

The pool is the server's own choice (`$SOMA_POOL`, else `.soma/pool`), except that a workspace holding
an MLflow file store (`mlruns/`) or a W&B folder (`wandb/`) at its top gets them too, through the
`soma.pool` setting the demo prints: the bundled workspace mixes soma records and MLflow runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..pool.discover import DEFAULT_POOL
from ..pool.trackers import is_tracker_folder
from ..query.languages import CONFIG_LANGUAGES, language_for_path

TIMEOUT = 120.0
WIDTH = 100
MAX_FILES = 200  # source files and pool files opened at most, each (a bound on a large project's demo)
MAX_LINES = 30  # warnings and lenses listed at most, each
# … and the trackers' folders: their saved code copies are not the project's code
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "build", "dist", "mlruns", "wandb"})
TRACKER_FOLDERS = ("mlruns", "wandb")
POOL_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")


def bundled_workspace() -> Path:
    """The demo's own workspace. setup.py maps fixtures/workspace into the wheel as the package data
    `soma_lsp/demo_workspace`; a source checkout (or an editable install) has fixtures/workspace."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "demo_workspace"
    return installed if installed.is_dir() else package.parent / "fixtures" / "workspace"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "demo", help="run a real LSP session and print what an editor would show (docs/spec.md §6.6)",
        description="Start the server, open a workspace as an editor would, and print the dead-end "
                    "warnings, code lenses, a hover, find-related and the pool's bad records it answers.")
    parser.add_argument("--workspace", type=Path, default=None, metavar="DIR",
                        help="the workspace to open: a project with a pool in .soma/pool (or $SOMA_POOL) "
                             "(default: the bundled example workspace)")
    parser.add_argument("--server", nargs="+", default=[sys.executable, "-m", "soma_lsp"],
                        metavar="ARG", help="the server command (default: this Python's soma_lsp)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    workspace = (args.workspace or bundled_workspace()).resolve()
    if not workspace.is_dir():
        print(f"soma-lsp demo: {workspace} is not a directory (pass --workspace DIR)", file=sys.stderr)
        return 2
    try:
        return asyncio.run(asyncio.wait_for(_session(workspace, args.server), TIMEOUT))
    except BrokenPipeError:
        raise  # the reader of our output went away (`| head`): `cli.entry` ends quietly
    except (TimeoutError, ConnectionError, OSError) as error:
        print(f"soma-lsp demo: the session failed: {error!r}", file=sys.stderr)
        return 1


def pool_setting(workspace: Path, environ=os.environ) -> list[str] | None:
    """The `soma.pool` the demo asks for: None (the server's default) unless `$SOMA_POOL` is unset and
    the workspace holds `mlruns/` or `wandb/` tracker folders at its top; then `.soma/pool` and those."""
    if environ.get("SOMA_POOL", "").strip():
        return None
    found = [name for name in TRACKER_FOLDERS if is_tracker_folder(str(workspace / name))]
    return [DEFAULT_POOL, *found] if found else None


def _section(title: str) -> None:
    print(f"\n━━ {title} {'━' * max(0, WIDTH - len(title) - 4)}")


def _indent(text: str) -> str:
    return textwrap.indent(text.rstrip(), "   ")


def _plain_markdown(markdown: str) -> str:
    """Markdown as a terminal shows it: backslash escapes undone, bold markers dropped."""
    text = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)  # a backslash before ASCII punctuation
    return text.replace("**", "")


def _result_rows(results: Sequence[dict[str, Any]]) -> str:
    rows = []
    for r in results:
        mark = "tied " if r.get("tied") else "     "
        outcome = "✗ dead end" if r["dead_end"] else r["status"]
        parts = "  ".join(f"{term[:3]} {value:.2f}" for term, value in r["components"].items() if value is not None)
        rows.append(f"{mark}{r['score']:.3f}  {r['id']:9}  {r['name'][:28]:28}  {outcome:12}  {parts}")
        if r.get("headline"):
            rows.append(f"{'':16}{r['headline'][:WIDTH - 16]}")
    return "\n".join(rows) or "(nothing related)"


def _capped(lines: list[str]) -> None:
    for line in lines[:MAX_LINES]:
        print(line)
    if len(lines) > MAX_LINES:
        print(f"   … and {len(lines) - MAX_LINES} more")
    if not lines:
        print("   (none)")


def _files(root: Path, wanted: Callable[[Path], bool]) -> Iterator[Path]:
    """The files below `root` that `wanted(path)` accepts, in path order, hidden and build
    directories left out (a virtualenv in the project is not the project's code)."""
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        for name in sorted(names):
            path = Path(directory, name)
            if wanted(path):
                yield path


def _is_code(path: Path) -> bool:
    language = language_for_path(path.name)
    return language != "text" and language not in CONFIG_LANGUAGES


async def _session(workspace: Path, server: Sequence[str]) -> int:
    from ..client import start  # pygls and lsprotocol load slowly: only for the demo

    setting = pool_setting(workspace)
    client = await start(server, workspace, {"pool": setting} if setting else None)
    try:
        _section("soma-lsp demo — a real LSP session over stdio")
        info = (await client.open_workspace(workspace)).server_info
        print(f"   server: {info.name} {info.version}" if info else "   server: (no serverInfo)")
        print(f"   workspace: {workspace}")
        if setting:
            print(f"   setting soma.pool: {setting} (soma records and tracker runs in one pool)")
        status = await client.wait_for_pool()
        pools = [str(p) for p in status.get("pools", [])]  # folders, and trackers' URIs
        print(f"   pool: {status.get('records', 0)} experiments in {status.get('files', 0)} files, "
              f"{status.get('errors', 0)} bad records — {', '.join(pools) or '(none)'}")
        if not status.get("records"):
            print("   (no experiments: put records in .soma/pool, or set $SOMA_POOL — docs/spec.md §1.1)")

        warnings: dict[Path, list] = {}
        for path in list(_files(workspace, _is_code))[:MAX_FILES]:
            uri = await client.open(path, language_for_path(path.name))
            warnings[path] = client.diagnostics.get(uri, [])
        _section("Dead-end warnings")
        _capped([f"   {path.relative_to(workspace)}:{d.range.start.line + 1}: [{d.code}] {d.message}"
                 for path, found in warnings.items() for d in found])

        if warnings:
            # the file with the most warnings; in it, the definition with the most (the first of them)
            focus = max(warnings, key=lambda p: len(warnings[p]))
            await _show_file(client, workspace, focus, warnings[focus])

        record_folders = [Path(root) for root in pools if "://" not in root and not is_tracker_folder(root)]
        for path in [p for root in record_folders for p in _files(root, lambda p: p.suffix in POOL_SUFFIXES)][:MAX_FILES]:
            uri = await client.open(path, "jsonl" if path.suffix == ".jsonl" else language_for_path(path.name))
            if client.diagnostics.get(uri):
                _section(f"Bad records in {path.relative_to(workspace) if path.is_relative_to(workspace) else path}")
                _capped([f"   line {d.range.start.line + 1}: {d.message}" for d in client.diagnostics[uri]])
    except RuntimeError:  # pygls fails the requests in flight when the server's process ends
        if client.exited() is None:
            raise
        await client.stop()  # its stderr read to the end
        _server_ended(client)
        return 1
    finally:
        if client.exited() is None:
            await client.close()
    _section("Done: every line above came from the server over LSP")
    return 0


def _server_ended(client) -> None:
    """Say that the server ended before the session did, with what it last wrote to stderr."""
    print(f"soma-lsp demo: the server ended (return code {client.exited()}) before the session did"
          + ("; its last lines:" if client.stderr_tail else ", writing nothing to stderr"), file=sys.stderr)
    for line in client.stderr_tail:
        print(f"   {line}", file=sys.stderr)


async def _show_file(client, workspace: Path, path: Path, warnings: list) -> None:
    """Lenses of `path`, then the hover and find-related on its most warned-about definition (its
    first lens when it has no warning)."""
    uri = path.as_uri()
    name = path.relative_to(workspace)
    lines = path.read_text().splitlines()
    lenses = await client.lenses(uri)
    _section(f"Code lenses in {name}")
    _capped([f"   line {lens.range.start.line + 1:>3}  {lines[lens.range.start.line].strip()[:48]:48}  "
             f"⟶ {lens.command.title if lens.command else '?'}" for lens in lenses])
    starts = [d.range.start for d in warnings] or [lens.range.start for lens in lenses]
    if not starts:
        return
    lines_of = [s.line for s in starts]
    spot = next(s for s in starts if s.line == max(lines_of, key=lines_of.count))
    where = f"{name}:{spot.line + 1} `{lines[spot.line].strip()[:60]}`"
    _section(f"Hover at {where}")
    hover = await client.hover(uri, spot.line, spot.character)
    print(_indent(_plain_markdown(hover.contents.value)) if hover else "   (nothing to show)")
    _section(f"Find related experiments at {where}")
    related = await client.command("soma.findRelatedExperiments",
                                   {"uri": uri, "position": {"line": spot.line, "character": spot.character},
                                    "limit": 6})
    print(_indent(_result_rows(related or [])))
