"""A try's per-workspace delta against a baseline, over every probe and over name-line probes (issue 20).

A lever fitted to one workspace lifts that one and not the next (docs/benchmarks.md § Quality, rows 150–181):
so a try is judged on every *read* workspace apart — the first set and the fresh ones that are tune data,
never `_judged.UNTOUCHED`, which this script neither runs nor scores. Per workspace it prints the R@3 delta
in probes (a probe going 0.33 → 1 counts 0.67) and the nDCG@5 delta, for all probes and for the probes
whose cursor is on a definition's own name line (`def drop_path(`, `class MixtralAttention(`), the largest
miss class on unread code; then the rule a try must pass (most workspaces up or equal, the mean up, none
down by more than one probe), held-out and the quiet-by-default figures.

    python bench/quality_delta.py run OUT.json [--lever NAME=off] [--with K=V,...]   # the read workspaces
    python bench/quality_delta.py compare BASE.json TRY.json                          # the tables
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _judged  # noqa: E402
import quality  # noqa: E402

from soma_lsp.query import definitions  # noqa: E402

#: The workspaces whose misses were read: tune data (the first set's held-out third reported apart).
READ = tuple(w for w in _judged.WORKSPACES + _judged.FRESH if w not in _judged.UNTOUCHED)


@cache
def name_lines(workspace: str, file: str) -> frozenset[int]:
    """The 0-based lines holding a definition's name in a workspace's file (none in a config file)."""
    path = _judged.QUALITY / workspace / file
    if path.suffix != ".py":
        return frozenset()
    return frozenset(d.name_range[0][0] for d in definitions(path.read_text(encoding="utf-8"), file))


def on_name_line() -> set[str]:
    """The ids of the judged probes whose cursor is on a definition's own name line."""
    return {p.id for w in READ for p in _judged.load_probes(w) if not p.quiet and p.line in name_lines(w, p.file)}


def _probes(path: str) -> dict[str, dict]:
    config = json.loads(Path(path).read_text(encoding="utf-8"))["configs"][0]
    if any(p["workspace"] in _judged.UNTOUCHED for p in config["probes"]):
        sys.exit(f"{path} holds untouched probes: this script compares read workspaces only")
    return {p["id"]: p for p in config["probes"]}


def _quiet(path: str) -> str:
    config = json.loads(Path(path).read_text(encoding="utf-8"))["configs"][0]
    return " · ".join(f"{q['hover_shown_quiet']} · {q['lensed_definitions']} · {q['related_at_quiet']} · "
                      f"{q['hover_empty_judged']}" for q in (config["quiet"], config["fresh_quiet"]))


def deltas(base: dict[str, dict], other: dict[str, dict], ids: set[str] | None = None) -> dict[str, tuple]:
    """Workspace → (probes, R@3 delta in probes, nDCG@5 delta in probes, R@3 up, R@3 down) over `ids`."""
    out = {}
    for workspace in READ:
        rows = [(base[i], other[i]) for i in base if base[i]["workspace"] == workspace and (ids is None or i in ids)]
        if not rows or any(b["id"] not in other for b, _ in rows):
            continue
        dr = [o["scores"]["r3"] - b["scores"]["r3"] for b, o in rows]
        dn = sum(o["scores"]["ndcg5"] - b["scores"]["ndcg5"] for b, o in rows)
        out[workspace] = (len(rows), sum(dr), dn, sum(d > 1e-9 for d in dr), sum(d < -1e-9 for d in dr))
    return out


def verdict(table: dict[str, tuple]) -> tuple[bool, str]:
    """The round's rule on R@3: most workspaces up or equal (7 of the 11), the mean up, none down by more
    than one probe — whether a try passes it, and the line saying so."""
    r3 = [row[1] for row in table.values()]
    level = sum(d >= -1e-9 for d in r3)
    mean = sum(r3) / len(r3) if r3 else 0.0
    worst = min(r3, default=0.0)
    ok = level >= 7 * len(r3) / 11 and mean > 1e-9 and worst >= -1 - 1e-9
    return ok, (f"{level} of {len(r3)} up or equal, mean {mean:+.3f} probes, worst {worst:+.2f}: "
                f"{'passes' if ok else 'fails'}")


def render(title: str, table: dict[str, tuple]) -> str:
    lines = [f"{title}", "| workspace | n | ΔR@3 (probes) | ΔnDCG@5 (probes) | R@3 up / down |", "|---|---|---|---|---|"]
    for workspace, (n, dr, dn, up, down) in table.items():
        lines.append(f"| {workspace} | {n} | {dr:+.2f} | {dn:+.2f} | {up} / {down} |")
    total = [sum(row[k] for row in table.values()) for k in range(5)]
    lines.append(f"| all | {total[0]} | {total[1]:+.2f} | {total[2]:+.2f} | {total[3]} / {total[4]} |")
    return "\n".join(lines + [verdict(table)[1]])


def group_line(path: str, group: str) -> str:
    s = json.loads(Path(path).read_text(encoding="utf-8"))["configs"][0]["summary"].get(group)
    return f"{s['ndcg5']:.3f} / {s['r3']:.3f}" if s else "—"


def compare(base_path: str, try_path: str) -> str:
    base, other = _probes(base_path), _probes(try_path)
    named = on_name_line()
    moved = [f"{i} {base[i]['scores']['r3']:.2f}→{other[i]['scores']['r3']:.2f}" for i in base
             if i in other and abs(other[i]["scores"]["r3"] - base[i]["scores"]["r3"]) > 1e-9]
    parts = [render("All probes", deltas(base, other)), "",
             render(f"Name-line probes ({len(named & set(base))})", deltas(base, other, named)), ""]
    parts += [f"{g}: {group_line(base_path, g)} → {group_line(try_path, g)}" for g in ("tune", "held-out", "fresh")]
    parts += [f"quiet (first set · fresh: hovers at quiet · lensed · records at quiet · empty judged hovers): "
              f"{_quiet(base_path)} → {_quiet(try_path)}", "R@3 moved: " + (", ".join(moved) or "none")]
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="score the read workspaces through the server into a JSON file")
    run.add_argument("out")
    run.add_argument("--lever", action="append", type=quality.parse_lever, default=[])
    run.add_argument("--with", dest="settings", type=quality.parse_settings, default={})
    cmp = sub.add_parser("compare", help="print the delta tables of TRY against BASE")
    cmp.add_argument("base")
    cmp.add_argument("other")
    args = parser.parse_args()
    if args.command == "run":
        config = asyncio.run(quality.run_config(list(READ), dict(args.lever), args.settings or None))
        Path(args.out).write_text(json.dumps({"configs": [config]}), encoding="utf-8")
    else:
        print(compare(args.base, args.other))


if __name__ == "__main__":
    main()
