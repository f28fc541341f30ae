"""`soma-lsp query TEXT`: `rank`'s own output for the text as given (spec §6) — no relevance gate and no
ties-first, which belong to the editor features."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from ..records import RecordError, parse_timestamp
from ..results import result_json
from ..retrieval import DEFAULT_HALF_LIFE_DAYS, RetrievalQuery
from . import common
from .render import dumps_json, print_table


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "query", help="rank the pool against TEXT and explain every score",
        description="Rank the pool against TEXT and print each result with its score terms: the ranking "
                    "itself, without the editor's relevance gate or ties-first (docs/spec.md §6.2).")
    parser.add_argument("text", metavar="TEXT")
    common.add_pool_argument(parser)
    common.add_snapshot_argument(parser)
    parser.add_argument("--arch", action="append", default=[], metavar="COMPONENT",
                        help="a component of the query architecture (repeatable)")
    parser.add_argument("--now", default=None, metavar="RFC3339",
                        help="the time recency is measured from (default: now; 'none' leaves recency out)")
    parser.add_argument("--half-life", type=float, default=DEFAULT_HALF_LIFE_DAYS, metavar="DAYS",
                        help=f"days until recency halves (default {DEFAULT_HALF_LIFE_DAYS:g}; docs/spec.md §2.3)")
    parser.add_argument("--limit", type=int, default=10, metavar="N", help="results to show (0 = all)")
    parser.add_argument("--json", action="store_true", help="print a JSON list of results (docs/spec.md §2.8)")
    parser.set_defaults(run=run)


def _now(value: str | None) -> datetime | None:
    if value is None:
        return datetime.now(timezone.utc)
    if value.strip().lower() == "none":
        return None
    return parse_timestamp(value, "--now")


def run(args: argparse.Namespace) -> int:
    try:
        if args.limit < 0:
            raise ValueError(f"--limit must be >= 0, got {args.limit}")
        query = RetrievalQuery(text=args.text, architecture=args.arch or None, now=_now(args.now),
                               half_life_days=args.half_life, limit=args.limit or None)
    except (ValueError, RecordError) as error:
        print(f"soma-lsp query: {error}", file=sys.stderr)
        return 2
    pool = common.open_pool(args)
    results = pool.index.rank(query)
    if args.json:
        print(dumps_json([result_json(r) for r in results]))
    else:
        print_table(results, len(pool.index), pool.sources)
    common.done_with(pool)
    return 0
