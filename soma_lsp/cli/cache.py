"""`soma-lsp cache [--tidy | --clear]`: what the cache directory holds, and emptying it.

The directory is `$SOMA_CACHE_DIR`, else `$XDG_CACHE_HOME/soma-lsp`, else `~/.cache/soma-lsp`
(docs/spec.md §1.5). Without an option, lists its entries (kind, size, last use) and the total;
`--tidy` applies the housekeeping the server does after every snapshot (`soma_lsp.pool.cache`);
`--clear` removes every entry (pools then read their files again on their next start).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..pool.cache import UNUSED_DAYS, CacheLimits, Entry, clear, entries, tidy
from ..pool.snapshot import cache_directory
from ..sizes import size_text


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "cache", help="show, tidy or clear the snapshot cache",
        description="Show what the cache directory holds (pool snapshots, commit caches), tidy it as the "
                    "server does, or clear it. See docs/spec.md §1.5.")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--tidy", action="store_true",
                        help="remove entries unused for --unused-days, then the least recently used "
                             "until under --max-size")
    action.add_argument("--clear", action="store_true", help="remove every entry")
    parser.add_argument("--unused-days", type=float, default=UNUSED_DAYS, metavar="N",
                        help=f"with --tidy: entries not used for N days go (default {UNUSED_DAYS})")
    parser.add_argument("--max-size", type=float, default=CacheLimits().max_bytes / 2**20, metavar="MB",
                        help="with --tidy: the directory's size limit in MiB (default %(default).0f)")
    parser.set_defaults(run=run)


def _describe(items: list[Entry], now: float) -> list[str]:
    return [f"  {e.kind:<9} {size_text(e.size):>10}  used {e.age_days(now):5.1f} days ago  {e.path.name}" for e in items]


def run(args: argparse.Namespace) -> int:
    directory = cache_directory(os.environ)
    now = time.time()
    if args.clear:
        removed = clear(directory)
        print(f"removed {len(removed)} entries ({size_text(sum(e.size for e in removed))}) from {directory}")
        return 0
    if args.tidy:
        limits = CacheLimits(args.unused_days, int(args.max_size * 2**20))
        removed = tidy(directory, limits)
        print(f"removed {len(removed)} entries ({size_text(sum(e.size for e in removed))}) from {directory}")
        print("\n".join(_describe(removed, now)) if removed else "", end="\n" if removed else "")
        return 0
    found = entries(directory)
    print(f"{directory}: {len(found)} entries, {size_text(sum(e.size for e in found))}")
    if found:
        print("\n".join(_describe(list(reversed(found)), now)))  # most recently used first
    sys.stdout.flush()
    return 0
