"""Refit lever `learned`'s weights (`soma_lsp.server.learned.WEIGHTS`) on the judged set, and judge them
by leave-one-workspace-out (issue 20).

1. **Dump**: every probe of the *read* workspaces (the first set and `_judged.FRESH` less
   `_judged.UNTOUCHED`, which this script never loads) is asked through `bench/quality.py`'s path — a
   real server over stdio, `soma.findRelatedExperiments` — with a server whose `learned.reorder` is
   replaced by one that writes the candidates' feature rows (`learned.rows`) and returns today's order.
   Each answer is also placed against the whole pool: the **ceiling** says where each must-see
   record is (shown in the top 5, in the gated list past 5, ranked but gated out, not ranked).
2. **Fit**: a pairwise logistic loss over (better, worse) graded pairs among the first
   `learned.DEPTH` candidates of each probe, L2-regularised, by Newton's method (numpy), on the
   features standardised, the weights then given back in the features' own units.
3. **Judge**: for each read workspace, fit on the others (the first set's held-out probes are never
   fitted on) and score the left-out one against today's order (nDCG@5, R@3 as `bench/quality.py`).
   The weights fitted on all read workspaces are printed as the constants to ship.

    python bench/learned_order.py [--dump FILE] [--l2 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _judged  # noqa: E402
import quality  # noqa: E402

READ = tuple(w for w in _judged.WORKSPACES + _judged.FRESH if w not in _judged.UNTOUCHED)
DUMP_ENV = "SOMA_LEARNED_DUMP"
SHOWN = 20  # soma.findRelatedExperiments' default limit


# -- the server that writes its candidates ------------------------------------------------------------

def serve(path: str) -> int:
    """Run the language server with find-related's candidates written to `path` (one JSON line per call)."""
    from soma_lsp.cli import entry
    from soma_lsp.query import NO_HINTS
    from soma_lsp.server import learned, related
    from soma_lsp.server.features import commands

    local = threading.local()
    find = commands.find_related

    def reorder(candidates, weights=learned.WEIGHTS):
        if getattr(local, "call", None) is not None:
            local.call["rows"] = learned.rows(candidates)
            local.call["terms"] = [list(s.components.matched_terms) for s in candidates.ranked[:learned.DEPTH]]
            local.call["idf"] = dict(candidates.idf)
            local.call["near"] = [list(candidates.hints.focus), list(candidates.hints.word)]
        return list(candidates.ranked)

    def find_related(index, query, tied, **options):
        local.call = call = {"rows": []}
        try:
            out = find(index, query, tied, **{**options, "limit": None})
        finally:
            local.call = None
        asked = related.ranked_query(index, query, options.get("hints", NO_HINTS), options["levers"])
        every = index.rank(related._with_limit(asked, None), relevant_only=True)
        call.update(tied=[s.record.id for s in out.tied], late=[s.record.id for s in out.late],
                    ranked=[s.record.id for s in out.ranked], every=[s.record.id for s in every],
                    shown=[s.record.id for s, _ in out.shown(options.get("limit"))])
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(call) + "\n")
        return out

    learned.reorder = reorder
    commands.find_related = find_related
    sys.argv = ["soma-lsp"]
    return entry()


def dump(target: Path) -> None:
    """Ask every probe of the read workspaces; write {workspace: [call per probe, in probe order]}."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="soma-learned-") as base:
        quality.SERVER = [sys.executable, str(Path(__file__).resolve()), "--serve"]
        for workspace in READ:
            path = Path(base) / f"{workspace}.jsonl"
            os.environ[DUMP_ENV] = str(path)
            config = asyncio.run(quality.run_config([workspace], {}))
            calls = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            probes = _judged.load_probes(workspace)
            assert len(calls) == len(probes), (workspace, len(calls), len(probes))
            judged = {r["id"]: r for r in config["probes"]}
            for probe, call in zip(probes, calls):
                call["probe"] = probe.id
                if not probe.quiet:
                    assert judged[probe.id]["ranked"] == call["shown"][:10], probe.id
            out[workspace] = calls
            print(f"dumped {workspace}: {len(calls)} calls", file=sys.stderr)
    target.write_text(json.dumps(out), encoding="utf-8")


# -- scores and the ceiling ---------------------------------------------------------------------------

def shown(call: dict, ranked: list[str]) -> list[str]:
    return (call["tied"] + ranked[:1] + call["late"] + ranked[1:])[:SHOWN]


PLACES = ("top 3", "4-5", "gated 6-20", "gated past 20", "gated out", "not ranked")


def place(record: str, call: dict) -> str:
    """Where a must-see record is in find-related's answer, and beyond it."""
    from soma_lsp.server.learned import DEPTH

    full = call["tied"] + call["ranked"][:1] + call["late"] + call["ranked"][1:]
    if record in full[:3]:
        return "top 3"
    if record in full[:5]:
        return "4-5"
    if record in call["tied"] + call["late"] + call["ranked"][:DEPTH]:
        return "gated 6-20"
    return "gated past 20" if record in full else "gated out" if record in call["every"] else "not ranked"


def ceiling(calls: list[dict], probes: dict) -> dict:
    """Counts of the must-see records by `place`, and the scores of the best re-ordering of the first
    DEPTH ranked records (the ties where they are): what no re-ordering can beat."""
    from soma_lsp.server.learned import DEPTH

    counts = dict.fromkeys(PLACES, 0)
    best = []
    for call in calls:
        probe = probes[call["probe"]]
        if probe.quiet:
            continue
        for record in probe.must:
            counts[place(record, call)] += 1
        grades = probe.grades()
        head = sorted(call["ranked"][:DEPTH], key=lambda r: -grades.get(r, 0))
        best.append(quality.scores(probe, shown(call, head + call["ranked"][DEPTH:])))
    return counts | {m: float(np.mean([b[m] for b in best])) for m in ("ndcg5", "r3")}


def evaluate(calls: list[dict], probes: dict, weights: np.ndarray | None) -> dict:
    """Mean nDCG@5 and R@3 over the judged probes of `calls`, ordered by `weights` (None: today's)."""
    from soma_lsp.server.learned import DEPTH

    rows = []
    for call in calls:
        probe = probes[call["probe"]]
        if probe.quiet:
            continue
        ranked = call["ranked"]
        if weights is not None and len(call["rows"]) > 1:
            head = np.asarray(call["rows"][:DEPTH]) @ weights
            order = sorted(range(len(head)), key=lambda i: (-head[i], i))
            ranked = [ranked[i] for i in order] + ranked[len(head):]
        rows.append(quality.scores(probe, shown(call, ranked)))
    return {m: float(np.mean([r[m] for r in rows])) for m in ("ndcg5", "r3")} | {"n": len(rows)}


# -- the fit ------------------------------------------------------------------------------------------

def pairs(calls: list[dict], probes: dict) -> np.ndarray:
    """x_better − x_worse for every graded pair among a probe's first DEPTH candidates."""
    from soma_lsp.server.learned import DEPTH

    out = []
    for call in calls:
        probe = probes[call["probe"]]
        if probe.quiet or (probe.heldout and probe.workspace in _judged.WORKSPACES) or len(call["rows"]) < 2:
            continue
        grades = probe.grades()
        x = np.asarray(call["rows"][:DEPTH])
        g = np.asarray([grades.get(r, 0) for r in call["ranked"][:len(x)]])
        better, worse = np.nonzero(g[:, None] > g[None, :])
        if len(better):
            out.append(x[better] - x[worse])
    return np.concatenate(out) if out else np.zeros((0, 0))


def fit(calls: list[dict], probes: dict, l2: float) -> np.ndarray:
    """Pairwise logistic weights (features' units) by Newton's method on standardised differences."""
    d = pairs(calls, probes)
    scale = d.std(axis=0)
    scale[scale == 0] = 1.0
    z = d / scale
    w = np.zeros(z.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - 1.0) + l2 * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w / scale


def lowo(calls: dict, probes: dict, l2: float) -> list[dict]:
    out = []
    for left in READ:
        weights = fit([c for w in READ if w != left for c in calls[w]], probes, l2)
        row = {"workspace": left, "today": evaluate(calls[left], probes, None),
               "learned": evaluate(calls[left], probes, weights)}
        if left in _judged.WORKSPACES:
            held = [c for c in calls[left] if probes[c["probe"]].heldout]
            row["held-out today"] = evaluate(held, probes, None)
            row["held-out learned"] = evaluate(held, probes, weights)
        out.append(row)
    return out


def report(calls: dict, l2: float) -> str:
    from soma_lsp.server.learned import FEATURES

    probes = {p.id: p for w in READ for p in _judged.load_probes(w)}
    lines = ["| workspace | " + " | ".join(PLACES) + " | today nDCG@5 / R@3 | best re-ordering |",
             "|---" * (len(PLACES) + 3) + "|"]
    for workspace in READ + ("all",):
        rows = [c for w in READ for c in calls[w]] if workspace == "all" else calls[workspace]
        c, t = ceiling(rows, probes), evaluate(rows, probes, None)
        lines.append(f"| {workspace} | " + " | ".join(str(c[p]) for p in PLACES)
                     + f" | {t['ndcg5']:.3f} / {t['r3']:.3f} | {c['ndcg5']:.3f} / {c['r3']:.3f} |")
    lines += ["", f"LOWO (l2={l2}): | left out | n | today nDCG@5 | learned nDCG@5 | today R@3 | learned R@3 |",
              "|---|---|---|---|---|---|"]
    rows = lowo(calls, probes, l2)
    for r in rows:
        t, lr = r["today"], r["learned"]
        lines.append(f"| {r['workspace']} | {t['n']} | {t['ndcg5']:.3f} | {lr['ndcg5']:.3f} | {t['r3']:.3f} | "
                     f"{lr['r3']:.3f} |")
        if "held-out today" in r:
            t, lr = r["held-out today"], r["held-out learned"]
            lines.append(f"| {r['workspace']} held-out | {t['n']} | {t['ndcg5']:.3f} | {lr['ndcg5']:.3f} | "
                         f"{t['r3']:.3f} | {lr['r3']:.3f} |")
    not_lower = sum(r["learned"]["r3"] >= r["today"]["r3"] - 1e-9 and r["learned"]["ndcg5"] >= r["today"]["ndcg5"]
                    - 1e-9 for r in rows)
    mean = {k: np.mean([r[k]["r3"] for r in rows]) for k in ("today", "learned")}
    lines.append(f"\nnot lower on both in {not_lower} of {len(rows)}; mean R@3 today {mean['today']:.3f}, "
                 f"learned {mean['learned']:.3f}; mean nDCG@5 today "
                 f"{np.mean([r['today']['ndcg5'] for r in rows]):.3f}, learned "
                 f"{np.mean([r['learned']['ndcg5'] for r in rows]):.3f}")
    weights = fit([c for w in READ for c in calls[w]], probes, l2)
    lines.append("\nWEIGHTS fitted on every read workspace:\n" + ",\n".join(
        f"    {name}={value:.4g}" for name, value in zip(FEATURES, weights)))
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        sys.exit(serve(os.environ[DUMP_ENV]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dump", type=Path, help="read the candidates from this file, writing it first if absent")
    parser.add_argument("--l2", type=float, default=1.0)
    args = parser.parse_args()
    target = args.dump or Path(tempfile.mkdtemp(prefix="soma-learned-")) / "candidates.json"
    if not target.exists():
        dump(target)
    print(report(json.loads(target.read_text(encoding="utf-8")), args.l2))


if __name__ == "__main__":
    main()
