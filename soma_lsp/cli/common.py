"""What several subcommands share: choosing the pool, and loading it."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..pool import LivePool, pool_roots
from ..retrieval import LiveIndex


def add_pool_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pool", action="append", metavar="DIR",
                        help="a pool directory (repeatable); default: $SOMA_POOL, else ./.soma/pool")


def roots(args: argparse.Namespace) -> list[Path]:
    return pool_roots([Path.cwd()], args.pool, os.environ)


def open_pool(args: argparse.Namespace, *, indexed: bool = True) -> LivePool:
    """The pool named by `--pool` (or the defaults), loaded."""
    pool = LivePool(roots(args), LiveIndex() if indexed else None)
    pool.load()
    return pool
