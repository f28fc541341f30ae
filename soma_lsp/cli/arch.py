"""`soma-lsp arch FILE`: the file's architecture bag (docs/spec.md §3), in the vocabulary records use.

One `component count` line per component, most frequent first (`--json`: one JSON object), so that
tools writing records can store the same names the server will compare against.
"""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("arch", help="print a file's architecture bag",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--json", action="store_true", help="print a JSON object component → count")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..query import architecture_bag

    try:
        with open(args.file, encoding="utf-8") as handle:
            source = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        print(f"soma-lsp arch: cannot read {args.file}: {error}", file=sys.stderr)
        return 2
    bag = architecture_bag(source, args.file)
    if args.json:
        print(json.dumps(dict(sorted(bag.items())), sort_keys=False))
        return 0
    for name, count in sorted(bag.items(), key=lambda item: (-item[1], item[0])):
        print(f"{name} {count:g}")
    return 0
