"""The `soma-lsp` command: serve LSP (the default) or one of the subcommands in this package.

Each subcommand module exposes `add_parser(subparsers)`, which registers its parser with
`set_defaults(run=...)`; `run(args) -> int` is the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from .. import __version__

SUBCOMMANDS = ("serve", "query", "check", "explain", "arch", "demo", "cache")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soma-lsp",
        description="The experiments you already ran, where you edit the code they bear on. "
                    "Without a subcommand, serves LSP over stdio. Reference: docs/spec.md "
                    "(§1 the pool and its records, §4 the language server, §6 this command).",
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


def _reader_gone() -> int:
    """The exit status after the reader of stdout went away (`soma-lsp demo | head -1`): no
    traceback, it is the reader's choice; stdout now goes nowhere, so the interpreter's last flush
    of what is still buffered does not fail again. (Only stdout raises it out of a command: the
    server's own pipes are asyncio transports, which report a lost connection instead.)"""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 1


def entry() -> int:
    """The `soma-lsp` command: `main`, ending quietly when the reader of its output went away
    (`_reader_gone`). A command that loaded a pool then ends the process at once —
    output and logs flushed — skipping the interpreter's teardown, which would free the pool object by
    object after the answer is out (~0.25 s at 100k records, measured). The server exits as usual (its
    executors finish what they were doing, a snapshot save among them)."""
    from . import common

    common.outlive = []
    try:
        code = main()
    except BrokenPipeError:
        code = _reader_gone()
    if not common.outlive:
        return code
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # a command that set it so itself after its reader went away
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`), a closed stream
            code = code or 1
    logging.shutdown()
    os._exit(code)
