"""What several subcommands share: choosing the pool, and loading it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
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
    pool = LivePool(roots(args), LiveIndex() if indexed else None, cache_dir=snapshots, in_parts=False)
    pool.load()
    if outlive is not None:
        outlive.append(pool)
    return pool


def done_with(pool: LivePool) -> None:
    """Save the snapshot if the load read anything — after the output, and where `fork` exists in a
    detached process, so that the user's process ends as soon as the answer is out: writing a 100k
    pool's snapshot takes about a second, which the user waited for (issue 22). The write is atomic
    (a temporary file renamed into place), so a command started meanwhile reads the pool's files or
    the whole snapshot, never half of one; a write that fails is as if none was made."""
    if not pool.unsaved:
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if not hasattr(os, "fork"):
        pool.save_snapshot()
        return
    _in_detached_process(pool.save_snapshot)


def _in_detached_process(work: Callable[[], object]) -> None:
    """Run `work` in a grandchild of this process (fork twice: nothing for this process to reap,
    whether it ends at once or lives on), with its own session and its standard streams on
    /dev/null — so whoever reads this process's output (a pipe, `subprocess.run`) sees its end now,
    not when `work` is done."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        os.setsid()
        if os.fork():
            return
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        work()
    finally:
        os._exit(0)
