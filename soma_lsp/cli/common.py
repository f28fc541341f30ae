"""What several subcommands share: choosing the pool, and loading it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..pool import LivePool, pool_roots
from ..pool.snapshot import cache_directory
from ..retrieval import LiveIndex


def add_pool_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", action="append", metavar="DIR",
                        help="a pool directory (repeatable); default: $SOMA_POOL, else ./.soma/pool "
                             "(docs/spec.md §1.1)")


def add_snapshot_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-snapshot", dest="snapshot", action="store_false",
                        help="read every pool file; neither use nor write the snapshot in the cache directory "
                             "($SOMA_CACHE_DIR, else $XDG_CACHE_HOME/soma-lsp)")


def roots(args: argparse.Namespace) -> list[Path]:
    return pool_roots([Path.cwd()], args.pool, os.environ)


#: where the pools a command loads are kept to the end of the process when `cli.entry` ends it without
#: freeing them (it sets a list): freeing 100k records object by object takes ~0.25 s (measured)
outlive: list[LivePool] | None = None


def open_pool(args: argparse.Namespace, *, indexed: bool = True) -> LivePool:
    """The pool named by `--pool` (or the defaults), loaded — an indexed one from its snapshot when it
    has one that is still true (unless `--no-snapshot`); call `done_with` after the output."""
    snapshots = cache_directory(os.environ) if indexed and getattr(args, "snapshot", False) else None
    pool = LivePool(roots(args), LiveIndex() if indexed else None, cache_dir=snapshots)
    pool.load()
    if outlive is not None:
        outlive.append(pool)
    return pool


def done_with(pool: LivePool) -> None:
    """Save the snapshot if the load read anything (after the output: the user has the answer)."""
    if pool.unsaved:
        sys.stdout.flush()
        pool.save_snapshot()
