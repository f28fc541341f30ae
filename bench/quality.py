"""Retrieval quality on the judged set of bench/quality/, through the shipped server (issue 20).

Each workspace is copied to a temporary directory (timestamps shifted so the records keep their age
as of the set's anchor, `_judged.shift_timestamps`), a real `soma-lsp` is started over stdio with that
copy as its root folder, and every judged probe is asked `soma.findRelatedExperiments {uri, position}`
— the editor's own command. The answer's record ids are scored against the probe's grades:
nDCG@5, R@3 (must-see in the top 3), MRR (first grade ≥ 1); see bench/quality/README.md for the
exact definitions. Figures are printed overall, by kind, by workspace, and for the tune set and the
held-out third, and for the fresh part (`_judged.FRESH`, all held out) on its own — the untouched
workspaces (`_judged.UNTOUCHED`) apart from it; then the quiet-by-default check (lenses per definition,
empty hovers), each part's apart.

`--lever NAME=off` (repeatable) adds a row per lever switched off, passed to the server as
`initializationOptions.soma.levers.NAME` (the setting `soma.levers`; the server reads levers nowhere else).
`--with KEY=VALUE[,KEY=VALUE…]` (repeatable) adds a row with those settings (dotted keys of section
`soma`, values read as JSON when they parse, else as text) — e.g. an embedder:
`--with embedder.entryPoint=soma_lsp.server.embedder:wordllama,embedder.weight=0.3`.

    python bench/quality.py [--workspace llm_torch] [--lever NAME=off ...] [--with K=V,...] [--json] [--write]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _judged  # noqa: E402
from _machine import replace_section  # noqa: E402

from soma_lsp.client import SomaClient  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "soma_lsp"]
FIND_RELATED = "soma.findRelatedExperiments"
CODE_SUFFIXES = {".py", ".yaml", ".yml", ".json", ".toml"}


# -- scores ------------------------------------------------------------------------------------------

def ndcg_at(ranked: list[str], grades: dict[str, int], k: int = 5) -> float:
    def dcg(gains):
        return sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(gains[:k]))
    ideal = dcg(sorted(grades.values(), reverse=True))
    return dcg([grades.get(r, 0) for r in ranked]) / ideal if ideal else 0.0


def recall_at(ranked: list[str], must: tuple[str, ...], k: int = 3) -> float:
    return len(set(ranked[:k]) & set(must)) / min(k, len(must)) if must else 0.0


def reciprocal_rank(ranked: list[str], grades: dict[str, int]) -> float:
    return next((1.0 / (i + 1) for i, r in enumerate(ranked) if grades.get(r, 0) >= 1), 0.0)


def scores(probe: _judged.Probe, ranked: list[str]) -> dict[str, float]:
    grades = probe.grades()
    return {"ndcg5": ndcg_at(ranked, grades), "r3": recall_at(ranked, probe.must),
            "mrr": reciprocal_rank(ranked, grades)}


def groups_of(probe: _judged.Probe) -> list[str]:
    """The groups a probe counts in; a fresh workspace's probes only in `fresh` (`untouched` for one no
    lever was fitted to) and its own groups, so that `all`, `tune` and `held-out` stay the first set's."""
    if probe.workspace in _judged.FRESH:
        part = "untouched" if probe.workspace in _judged.UNTOUCHED else "fresh"
        return [part, f"ws:{probe.workspace}"] + [f"{part} kind:{k}" for k in probe.kinds]
    return (["all", "held-out" if probe.heldout else "tune", f"ws:{probe.workspace}"]
            + [f"kind:{k}" for k in probe.kinds])


def summarize(results: list[dict]) -> dict[str, dict[str, float]]:
    """Group name → mean of each score and the probe count."""
    grouped: dict[str, list[dict]] = defaultdict(list)
    for result in results:
        for group in result["groups"]:
            grouped[group].append(result["scores"])
    return {group: {**{m: sum(s[m] for s in rows) / len(rows) for m in ("ndcg5", "r3", "mrr")}, "n": len(rows)}
            for group, rows in grouped.items()}


# -- one workspace through the server ----------------------------------------------------------------

def prepare(workspace: str, base: Path, now: datetime) -> Path:
    """A copy of the workspace whose pool timestamps keep their age as of the anchor."""
    target = base / workspace
    shutil.copytree(_judged.QUALITY / workspace, target, ignore=shutil.ignore_patterns("probes.yaml"))
    delta = now - _judged.ANCHOR
    for path in (target / ".soma" / "pool").rglob("*"):
        if path.is_file():
            path.write_text(_judged.shift_timestamps(path.read_text(encoding="utf-8"), delta), encoding="utf-8")
    return target


def lever_settings(levers: dict[str, str], extra: dict | None = None) -> dict:
    """The initializationOptions switching the named levers (and other settings)."""
    options = {"soma": {"snapshot": {"enabled": False}, **(extra or {})}}
    if levers:
        options["soma"]["levers"] = {name: value not in ("off", "false", "0") for name, value in levers.items()}
    return options


def code_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in CODE_SUFFIXES
                  and ".soma" not in p.relative_to(root).parts)


def definition_count(path: Path) -> int:
    if path.suffix != ".py":
        return 0
    return sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
               for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def hover_text(hover) -> str:
    if hover is None:
        return ""
    contents = hover.contents
    return (getattr(contents, "value", None) or (contents if isinstance(contents, str) else str(contents))).strip()


async def run_workspace(workspace: str, root: Path, levers: dict[str, str],
                        extra: dict | None = None) -> tuple[list[dict], dict]:
    options = lever_settings(levers, extra)
    env = {k: v for k, v in os.environ.items() if k != "SOMA_POOL"}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    client = SomaClient(options)
    await client.start_io(*SERVER, cwd=str(root), env=env)
    try:
        await client.open_workspace(root)
        status = await client.wait_for_pool()
        if not status.get("records"):
            raise RuntimeError(f"{workspace}: the server loaded no records ({status})")
        opened: dict[str, str] = {}

        async def uri_of(rel: str) -> str:
            if rel not in opened:
                path = root / rel
                opened[rel] = await client.open(path, "python" if path.suffix == ".py" else "yaml", wait=0)
            return opened[rel]

        results, quiet = [], {"hover_empty_judged": 0, "judged": 0, "hover_shown_quiet": 0, "quiet": 0,
                              "related_at_quiet": 0}
        for probe in _judged.load_probes(workspace):
            uri = await uri_of(probe.file)
            position = {"line": probe.line, "character": probe.character}
            related = await client.command(FIND_RELATED, {"uri": uri, "position": position}) or []
            ranked = [r["id"] for r in related]
            empty = not hover_text(await client.hover(uri, probe.line, probe.character))
            if probe.quiet:
                quiet["quiet"] += 1
                quiet["hover_shown_quiet"] += not empty
                quiet["related_at_quiet"] += len(ranked)
                continue
            quiet["judged"] += 1
            quiet["hover_empty_judged"] += empty
            results.append({"id": probe.id, "workspace": workspace, "kinds": list(probe.kinds),
                            "heldout": probe.heldout, "groups": groups_of(probe), "ranked": ranked[:10],
                            "must": list(probe.must), "useful": list(probe.useful),
                            "scores": scores(probe, ranked)})
        quiet.update(lenses=0, lensed_definitions=0, definitions=0, config_lenses=0)
        for path in code_files(root):
            lenses = await client.lenses(await uri_of(path.relative_to(root).as_posix()))
            if path.suffix == ".py":
                quiet["lenses"] += len(lenses)
                quiet["lensed_definitions"] += len({lens.range.start.line for lens in lenses})
                quiet["definitions"] += definition_count(path)
            else:
                quiet["config_lenses"] += len(lenses)
        return results, quiet
    finally:
        await client.close()


async def run_config(workspaces: list[str], levers: dict[str, str], extra: dict | None = None) -> dict:
    now = datetime.now(timezone.utc)
    results, quiet, fresh_quiet, untouched_quiet = [], defaultdict(int), defaultdict(int), defaultdict(int)
    with tempfile.TemporaryDirectory(prefix="soma-quality-") as base:
        os.environ["SOMA_CACHE_DIR"] = str(Path(base) / "cache")
        for workspace in workspaces:
            root = prepare(workspace, Path(base), now)
            found, counts = await run_workspace(workspace, root, levers, extra)
            results += found
            for key, value in counts.items():
                (untouched_quiet if workspace in _judged.UNTOUCHED else fresh_quiet if workspace in _judged.FRESH
                 else quiet)[key] += value
    name = ", ".join([f"{k}={v}" for k, v in levers.items()] + [f"{k}={v}" for k, v in (extra or {}).items()]) \
        or "baseline"
    return {"name": name, "levers": levers, "summary": summarize(results), "quiet": dict(quiet),
            "fresh_quiet": dict(fresh_quiet), "untouched_quiet": dict(untouched_quiet), "probes": results}


# -- report ------------------------------------------------------------------------------------------

def group_order(summary: dict) -> list[str]:
    kinds = [f"{part}kind:{k}" for part in ("", "fresh ", "untouched ") for k in _judged.KINDS
             if f"{part}kind:{k}" in summary]
    spaces = [f"ws:{w}" for w in _judged.WORKSPACES + _judged.FRESH if f"ws:{w}" in summary]
    return [g for g in ("all", "tune", "held-out", "fresh", "untouched") if g in summary] + kinds + spaces


def table(config: dict) -> str:
    rows = ["| group | n | nDCG@5 | R@3 | MRR |", "|---|---|---|---|---|"]
    for group in group_order(config["summary"]):
        s = config["summary"][group]
        rows.append(f"| {group} | {s['n']} | {s['ndcg5']:.3f} | {s['r3']:.3f} | {s['mrr']:.3f} |")
    for label, q in (("Quiet by default", config["quiet"]), ("Fresh part, quiet by default", config["fresh_quiet"]),
                     ("Untouched part, quiet by default", config["untouched_quiet"])):
        if q:
            rows += ["", f"{label}: {quiet_line(q)}"]
    return "\n".join(rows)


def quiet_line(q: dict) -> str:
    return (f"{q['lensed_definitions']} of {q['definitions']} Python definitions (`def`/`class`) get a code lens "
            f"({q['lenses']} lenses; {q['config_lenses']} more on config files); hovers empty at "
            f"{q['hover_empty_judged']} of {q['judged']} judged probes; hovers shown at {q['hover_shown_quiet']} "
            f"of {q['quiet']} quiet probes; {q['related_at_quiet']} records from find-related at the quiet probes.")


def levers_table(configs: list[dict]) -> str:
    """One row per configuration; the untouched columns only while some workspace is untouched."""
    untouched = any("untouched" in c["summary"] for c in configs)
    rows = ["| configuration | all nDCG@5 | all R@3 | all MRR | tune R@3 | held-out R@3 | paraphrase R@3 "
            "| fresh nDCG@5 | fresh R@3 |" + (" untouched nDCG@5 | untouched R@3 |" if untouched else ""),
            "|---|---|---|---|---|---|---|---|---|" + ("---|---|" if untouched else "")]
    missing = {"ndcg5": float("nan"), "r3": float("nan")}
    for c in configs:
        s = c["summary"]
        para, fresh = s.get("kind:paraphrase", missing)["r3"], s.get("fresh", missing)
        row = (f"| {c['name']} | {s['all']['ndcg5']:.3f} | {s['all']['r3']:.3f} | {s['all']['mrr']:.3f} | "
               f"{s['tune']['r3']:.3f} | {s['held-out']['r3']:.3f} | {para:.3f} | "
               f"{fresh['ndcg5']:.3f} | {fresh['r3']:.3f} |")
        if untouched:
            row += f" {s.get('untouched', missing)['ndcg5']:.3f} | {s.get('untouched', missing)['r3']:.3f} |"
        rows.append(row)
    return "\n".join(rows)


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_lever(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (e.g. aliases=off), got {text!r}")
    return name, value


def parse_settings(text: str) -> dict:
    """`embedder.weight=0.3,embedder.url=http://…` → {"embedder.weight": 0.3, …}."""
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE…], got {text!r}")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspace", action="append", choices=_judged.WORKSPACES + _judged.FRESH,
                        help="only this workspace (repeatable; default: all)")
    parser.add_argument("--lever", action="append", type=parse_lever, default=[],
                        help="NAME=off: add a row with that lever switched off (repeatable)")
    parser.add_argument("--with", dest="settings", action="append", type=parse_settings, default=[],
                        help="KEY=VALUE[,KEY=VALUE…]: add a row with these `soma` settings (repeatable)")
    parser.add_argument("--json", action="store_true", help="print machine-readable figures")
    parser.add_argument("--write", action="store_true", help="put the figures in bench/quality/README.md")
    args = parser.parse_args()
    problems = _judged.check()
    if problems:
        sys.exit("the judged set is broken:\n" + "\n".join(problems))
    workspaces = args.workspace or list(_judged.WORKSPACES + _judged.FRESH)
    configs = [asyncio.run(run_config(workspaces, {}))]
    configs += [asyncio.run(run_config(workspaces, {name: value})) for name, value in args.lever]
    configs += [asyncio.run(run_config(workspaces, {}, extra)) for extra in args.settings]
    stamp = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit()}"
    if args.json:
        print(json.dumps({"when": stamp, "anchor": _judged.ANCHOR.isoformat(), "configs": configs}, indent=1))
        return
    text = [f"## Baseline\n\n`python bench/quality.py` — {stamp}; workspaces: {', '.join(workspaces)}.\n",
            table(configs[0])]
    for config in configs[1:]:
        text += [f"\n### {config['name']}\n", table(config)]
    if len(configs) > 1:
        text += ["\n### Levers\n", levers_table(configs)]
    report = "\n".join(text) + "\n"
    print(report)
    if args.write:
        replace_section(_judged.QUALITY / "README.md", "## Baseline", report)


if __name__ == "__main__":
    main()
