"""Where the must-see records are in find-related's answer: what a re-ordering can lift at most (issue 20).

Every judged probe is asked through `bench/quality.py`'s path — a real server over stdio,
`soma.findRelatedExperiments` — with a server whose find-related also writes its whole answer (the ties,
the late ties, the whole gated ranking) and the core's ranking of the same query without the gate. Each
must-see record is then placed: in the top 3, 4th–5th, in the gated list's first 20 (the command's
default list) past the 5th, further down, ranked but gated out, not ranked at all. Beside today's
nDCG@5 / R@3 the table gives the scores of the best re-ordering of the first 20 gated records (the
ties where they are): no change to the order alone can beat it; only the gate and the query reach
the records below. docs/benchmarks.md § Quality, try 210.

    python bench/ceiling.py [--workspace llm_torch ...]   (default: the read workspaces, not the untouched ones)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _judged  # noqa: E402
import quality  # noqa: E402

READ = tuple(w for w in _judged.WORKSPACES + _judged.FRESH if w not in _judged.UNTOUCHED)
ANSWERS = "SOMA_CEILING_ANSWERS"  # where the serving process writes its answers
SHOWN = 20  # soma.findRelatedExperiments' default limit
PLACES = ("top 3", "4-5", "gated 6-20", "gated past 20", "gated out", "not ranked")


def serve(path: str) -> int:
    """The language server, its find-related command also writing each whole answer to `path` (a JSON line)."""
    from soma_lsp.cli import entry
    from soma_lsp.query import NO_HINTS
    from soma_lsp.server import related
    from soma_lsp.server.features import commands

    find = commands.find_related

    def find_related(index, query, tied, **options):
        out = find(index, query, tied, **{**options, "limit": None})  # the command cuts the list itself
        asked = related.ranked_query(index, query, options.get("hints", NO_HINTS), options["levers"])
        every = index.rank(replace(asked, limit=None), relevant_only=True)
        answer = {"tied": [s.record.id for s in out.tied], "late": [s.record.id for s in out.late],
                  "ranked": [s.record.id for s in out.ranked], "every": [s.record.id for s in every]}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(answer) + "\n")
        return out

    commands.find_related = find_related
    sys.argv = ["soma-lsp"]
    return entry()


def answers(workspace: str, base: Path) -> list[tuple[_judged.Probe, dict]]:
    """(probe, whole answer) for each judged probe of a workspace, checked against the harness's list."""
    path = base / f"{workspace}.jsonl"
    os.environ[ANSWERS] = str(path)
    config = asyncio.run(quality.run_config([workspace], {}))
    written = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    probes = _judged.load_probes(workspace)
    if len(written) != len(probes):
        raise RuntimeError(f"{workspace}: {len(written)} answers for {len(probes)} probes")
    harness = {r["id"]: r["ranked"] for r in config["probes"]}
    out = []
    for probe, answer in zip(probes, written):
        if not probe.quiet:
            if shown(answer, answer["ranked"])[:10] != harness[probe.id]:
                raise RuntimeError(f"{probe.id}: the written answer is not the one the harness got")
            out.append((probe, answer))
    return out


def shown(answer: dict, ranked: list[str]) -> list[str]:
    """The command's list for this order of the gated ranking (`related.Related.shown`)."""
    return (answer["tied"] + ranked[:1] + answer["late"] + ranked[1:])[:SHOWN]


def place(record: str, answer: dict) -> str:
    full = answer["tied"] + answer["ranked"][:1] + answer["late"] + answer["ranked"][1:]
    if record in full[:3]:
        return "top 3"
    if record in full[:5]:
        return "4-5"
    if record in full[:SHOWN]:
        return "gated 6-20"
    return "gated past 20" if record in full else "gated out" if record in answer["every"] else "not ranked"


def row(name: str, judged: list[tuple[_judged.Probe, dict]]) -> str:
    counts = dict.fromkeys(PLACES, 0)
    today, best = [], []
    for probe, answer in judged:
        for record in probe.must:
            counts[place(record, answer)] += 1
        grades = probe.grades()
        head = sorted(answer["ranked"][:SHOWN], key=lambda r: -grades.get(r, 0))
        today.append(quality.scores(probe, shown(answer, answer["ranked"])))
        best.append(quality.scores(probe, shown(answer, head + answer["ranked"][SHOWN:])))

    def mean(rows: list[dict]) -> str:
        return " / ".join(f"{sum(r[m] for r in rows) / len(rows):.3f}" for m in ("ndcg5", "r3"))
    return f"| {name} | {len(judged)} | " + " | ".join(str(counts[p]) for p in PLACES) + \
        f" | {mean(today)} | {mean(best)} |"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        sys.exit(serve(os.environ[ANSWERS]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", action="append", choices=_judged.WORKSPACES + _judged.FRESH,
                        help="only this workspace (repeatable; default: every read one)")
    workspaces = parser.parse_args().workspace or list(READ)
    quality.SERVER = [sys.executable, str(Path(__file__).resolve()), "--serve"]
    lines = ["| workspace | probes | must-see: " + " | ".join(PLACES) + " | today nDCG@5 / R@3 | best re-ordering |",
             "|---" * (len(PLACES) + 4) + "|"]
    every = []
    with tempfile.TemporaryDirectory(prefix="soma-ceiling-") as base:
        for workspace in workspaces:
            judged = answers(workspace, Path(base))
            every += judged
            lines.append(row(workspace, judged))
    if len(workspaces) > 1:
        lines.append(row("all", every))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
