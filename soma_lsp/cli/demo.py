"""`soma-lsp demo`: a real LSP session against the bundled fixtures, printed for a human.

The demo is an LSP *client*: it starts `soma-lsp` as a subprocess, speaks JSON-RPC to it over stdio
exactly as an editor would, and prints what an editor would show — dead-end warnings, code lenses, a
hover, "find related experiments" and the diagnostics of a pool file with bad records.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "workspace"
TIMEOUT = 120.0
WIDTH = 100


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("demo", help="run a real LSP session against the bundled fixtures")
    parser.add_argument("--workspace", type=Path, default=FIXTURES,
                        help="the workspace to open (default: the bundled fixtures/workspace)")
    parser.add_argument("--server", nargs="+", default=[sys.executable, "-m", "soma_lsp"],
                        metavar="ARG", help="the server command (default: this Python's soma_lsp)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    workspace = args.workspace.resolve()
    if not (workspace / "model" / "transformer.py").is_file():
        print(f"soma-lsp demo: {workspace} is not the fixture workspace "
              "(expected model/transformer.py); pass --workspace", file=sys.stderr)
        return 2
    try:
        return asyncio.run(asyncio.wait_for(_session(workspace, args.server), TIMEOUT))
    except (TimeoutError, ConnectionError, OSError) as error:
        print(f"soma-lsp demo: the session failed: {error!r}", file=sys.stderr)
        return 1


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


def _print_diagnostics(client, uri: str, *, codes: bool = True) -> None:
    diagnostics = client.diagnostics.get(uri, [])
    for d in diagnostics:
        code = f"[{d.code}] " if codes and d.code else ""
        print(f"   line {d.range.start.line + 1}: {code}{d.message}")
    if not diagnostics:
        print("   (none)")


async def _session(workspace: Path, server: Sequence[str]) -> int:
    from ..client import find, start  # pygls and lsprotocol load slowly: only for the demo

    client = await start(server, workspace)
    try:
        _section("soma-lsp demo — a real LSP session over stdio")
        info = (await client.open_workspace(workspace)).server_info
        print(f"   server: {info.name} {info.version}" if info else "   server: (no serverInfo)")
        print(f"   workspace: {workspace}")
        status = await client.wait_for_pool()
        print(f"   pool: {status.get('records', 0)} experiments in {status.get('files', 0)} files, "
              f"{status.get('errors', 0)} bad records — {', '.join(map(str, status.get('pools', [])))}")

        model = workspace / "model" / "transformer.py"
        uri = await client.open(model, "python")
        _section("Dead-end warnings in model/transformer.py")
        _print_diagnostics(client, uri)

        _section("Code lenses in model/transformer.py")
        lines = model.read_text().splitlines()
        for lens in await client.lenses(uri):
            title = lens.command.title if lens.command else "?"
            print(f"   line {lens.range.start.line + 1:>3}  {lines[lens.range.start.line].strip()[:48]:48}  ⟶ {title}")

        _section("Hover on `class RotaryEmbedding`")
        hover = await client.hover(uri, *find(model, "class RotaryEmbedding", len("class R")))
        print(_indent(_plain_markdown(hover.contents.value)) if hover else "   (nothing to show)")

        line, _ = find(model, "class Attention")
        _section("Find related experiments — inside class Attention")
        related = await client.command("soma.findRelatedExperiments",
                                       {"uri": uri, "position": {"line": line + 1, "character": 4}, "limit": 6})
        print(_indent(_result_rows(related or [])))

        train_uri = await client.open(workspace / "train.py", "python")
        _section("Dead-end warnings in train.py")
        _print_diagnostics(client, train_uri)

        for broken in sorted((workspace / ".soma" / "pool" / "broken").glob("*.jsonl")):
            broken_uri = await client.open(broken, "jsonl")
            _section(f"Bad records in {broken.relative_to(workspace)}")
            _print_diagnostics(client, broken_uri, codes=False)
    finally:
        await client.close()
    _section("Done: every line above came from the server over LSP")
    return 0
