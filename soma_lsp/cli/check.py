"""`soma-lsp check [--pool DIR]...`: load the pool as the server does and report every problem.

Prints each problem as `path:line: field: problem` (1-based line), then a summary: records loaded,
files, errors and warnings by kind; `--json` prints the same as one JSON object for tools. Exit status
1 if there is any error (warnings alone exit 0), 2 if a pool directory named does not exist (a typo
must not pass as a clean pool).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from ..pool import LivePool
from . import common
from .render import dumps_json, print_safe


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "check", help="validate the experiment pool and report bad records",
        description="Load the experiment pool and print every problem as path:line: field: problem, then a "
                    "summary. Exit status 1 if any record or file has an error, 2 if a pool directory does "
                    "not exist. The record format: docs/spec.md §1.2; what counts as a bad record: §1.4.")
    common.add_pool_argument(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the summary")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: the pools, the counts, every problem (1-based lines)")
    parser.set_defaults(run=run)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def run(args: argparse.Namespace) -> int:
    pool = common.open_pool(args, indexed=False)
    try:
        return _report(pool, args, sys.stdout)
    except BrokenPipeError:  # `soma-lsp check | head`
        sys.stdout = None  # nothing more can be written; avoid a second error at exit
        return _status(pool, [r for r in pool.roots if not os.path.isdir(r)])


def _status(pool: LivePool, missing: list[str]) -> int:
    return 2 if missing else 1 if pool.summary()["errors"] else 0


def _json_report(pool: LivePool, missing: list[str], out) -> int:
    summary = pool.summary()
    problems = [{"path": p.path, "line": p.line + 1, "field": p.field or None, "message": p.message,
                 "severity": p.severity, "kind": p.kind}
                for ps in pool.problems.values() for p in ps]
    print(dumps_json({"pools": pool.sources, "missing": missing, "records": summary["records"],
                      "files": summary["files"], "errors": summary["errors"], "warnings": summary["warnings"],
                      "problems": problems}), file=out)
    return _status(pool, missing)


def _report(pool: LivePool, args: argparse.Namespace, out) -> int:
    missing = [r for r in pool.roots if not os.path.isdir(r)]
    if getattr(args, "json", False):
        return _json_report(pool, missing, out)
    here = os.getcwd()
    if not getattr(args, "quiet", False):
        for path, problems in pool.problems.items():
            shown = os.path.relpath(path, here) if path.startswith(here + os.sep) else path
            for problem in problems:
                line = str(dataclasses.replace(problem, path=shown))
                print_safe(line if problem.severity == "error" else f"{line} (warning)", file=out)
    summary = pool.summary()
    for root in missing:
        print_safe(f"error: pool directory {root} does not exist", file=out)
    print(f"{_plural(summary['records'], 'record')} loaded from {_plural(summary['files'], 'file')} in "
          f"{_plural(len(pool.sources), 'pool')}; {_plural(summary['errors'], 'error')}, "
          f"{_plural(summary['warnings'], 'warning')}", file=out)
    for label, counts in (("errors", summary["errors_by_kind"]), ("warnings", summary["warnings_by_kind"])):
        if counts:
            print(f"  {label} by kind: " + ", ".join(f"{kind} {n:,}" for kind, n in counts.items()), file=out)
    return _status(pool, missing)
