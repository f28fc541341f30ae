"""`make fuzz`: every target of tests/fuzz/targets.py for FUZZ_SECONDS (default 60) in all, on
FUZZ_JOBS processes (default 2), each input bounded to FUZZ_INPUT_SECONDS (default 10) and each
process to FUZZ_MAX_RSS_MB of peak memory (default 1024). Hypothesis draws fresh random inputs in
batches until the time is up (a failure is shrunk and printed with its reproduction blob).

Prints, per target: inputs run, failures, peak RSS and — when the `coverage` package is importable
(not a dependency: `pip install coverage`) — the line coverage of the modules it aims at. Exit status
1 if any target failed. docs/reliability.md keeps the figures of a long run.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import resource
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: `fuzz` as a package

from hypothesis import HealthCheck, settings  # noqa: E402

from fuzz import targets  # noqa: E402

PACKAGE = Path(targets.__file__).resolve().parent.parent.parent / "soma_lsp"
AIMS = {"frame_reader": ["server/transport.py"], "pool_file": ["pool/loader.py"],
        "valid_records_never_lost": ["pool/loader.py"],
        "query_builder": ["query/__init__.py", "query/document.py", "query/positions.py", "query/definitions.py",
                          "query/identifiers.py", "query/architecture.py", "query/languages.py"]}
BATCH = settings(max_examples=200, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                 print_blob=True)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_target(name: str, seconds: float, per_input: float, max_rss_mb: float) -> dict:
    """One target in this process until `seconds` are spent; its figures."""
    targets.PER_INPUT_SECONDS = per_input
    logging.disable(logging.CRITICAL)  # the reader and loader log every bad input they meet
    os.environ["SOMA_FUZZ_DIR"] = tempfile.mkdtemp(prefix="soma-fuzz-")
    target, strategies = targets.TARGETS[name]
    count = [0]

    def counted(*args, **kwargs):
        count[0] += 1
        target(*args, **kwargs)

    counted.__signature__ = inspect.signature(target)  # what `given` maps the strategies onto
    targets.TARGETS[name] = (counted, strategies)
    test = targets.hypothesis_test(name, BATCH)
    try:
        import coverage
        cov = coverage.Coverage(data_file=None, include=[str(PACKAGE / aim) for aim in AIMS[name]])
    except ImportError:
        cov = None
    failures: list[str] = []
    start = time.monotonic()
    if cov is not None:
        cov.start()
    try:
        while time.monotonic() - start < seconds and len(failures) < 3:
            try:
                test()
            except Exception:  # noqa: BLE001 - a finding: recorded, printed, and the run goes on
                failures.append(traceback.format_exc(limit=8))
            if _peak_rss_mb() > max_rss_mb:
                failures.append(f"peak RSS {_peak_rss_mb():.0f} MB over the {max_rss_mb:.0f} MB bound")
                break
    finally:
        if cov is not None:
            cov.stop()
    covered = None
    if cov is not None:
        executed = total = 0
        for aim in AIMS[name]:
            _, statements, _, missing, _ = cov.analysis2(str(PACKAGE / aim))
            executed += len(statements) - len(missing)
            total += len(statements)
        covered = round(100 * executed / max(total, 1), 1)
    return {"target": name, "inputs": count[0], "seconds": round(time.monotonic() - start, 1),
            "failures": failures, "peak_rss_mb": round(_peak_rss_mb()), "line_coverage_pct": covered,
            "aims": AIMS[name]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("FUZZ_SECONDS", 60)))
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("FUZZ_JOBS", 2)))
    parser.add_argument("--input-seconds", type=float, default=float(os.environ.get("FUZZ_INPUT_SECONDS", 10)))
    parser.add_argument("--max-rss-mb", type=float, default=float(os.environ.get("FUZZ_MAX_RSS_MB", 1024)))
    parser.add_argument("--only", action="append", choices=list(targets.TARGETS), help="run only these targets")
    parser.add_argument("--report", metavar="FILE", default=os.environ.get("FUZZ_REPORT"),
                        help="also write the figures as JSON to FILE")
    args = parser.parse_args(argv)
    names = args.only or list(targets.TARGETS)
    jobs = max(1, min(args.jobs, len(names)))
    each = args.seconds * jobs / len(names)
    print(f"fuzzing {len(names)} targets for {args.seconds:.0f} s on {jobs} processes "
          f"({each:.0f} s each, ≤ {args.input_seconds:g} s per input)", flush=True)
    with ProcessPoolExecutor(jobs) as pool:
        results = list(pool.map(run_target, names, [each] * len(names), [args.input_seconds] * len(names),
                                [args.max_rss_mb] * len(names)))
    for result in results:
        coverage = "n/a" if result["line_coverage_pct"] is None else f"{result['line_coverage_pct']}%"
        print(f"{result['target']:26} {result['inputs']:>9,} inputs in {result['seconds']:>7} s  "
              f"failures {len(result['failures'])}  peak RSS {result['peak_rss_mb']} MB  "
              f"line coverage {coverage} of {', '.join(result['aims'])}")
        for failure in result["failures"]:
            print(failure, file=sys.stderr)
    if args.report:
        Path(args.report).write_text(json.dumps(results, indent=2))
    return 1 if any(result["failures"] for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
