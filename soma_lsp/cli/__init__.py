"""The `soma-lsp` command: serve LSP (the default) or one of the subcommands in this package.

Each subcommand module exposes `add_parser(subparsers)`, which registers its parser with
`set_defaults(run=...)`; `run(args) -> int` is the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__

SUBCOMMANDS = ("serve", "query", "check", "explain", "arch", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soma-lsp",
        description="The experiments you already ran, where you edit the code they bear on. "
                    "Without a subcommand, serves LSP over stdio.",
    )
    parser.add_argument("--version", action="version", version=f"soma-lsp {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv or argv[0].startswith("--") and argv[0] not in ("--help", "--version"):
        argv = ["serve", *argv]
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return 2
    return args.run(args)
