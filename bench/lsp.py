"""Hover latency through a real LSP session over stdio (issue 4's acceptance).

For each pool size: a workspace with the fixture code and a generated pool (one JSONL file), the
server started as a subprocess, driven by `soma_lsp.client.SomaClient` exactly as an editor would.

* server start → first hover answered with content;
* hover latency p50/p99 over identifiers of `model/transformer.py` (the request is sent, the answer
  read back: JSON-RPC framing, the query builder, ranking and Markdown all included);
* at the largest size, the same hovers while a full reindex of the pool runs (`soma.reloadPool`);
* at the largest size, start → first hover again once a server has left its snapshot (a restart on
  the unchanged pool). Every other figure runs with snapshots off (`snapshot.enabled: false`): a full
  load, and a reindex that reads every file.

Targets: at 100k p50 ≤ 30 ms and p99 ≤ 100 ms, and the 100k p50 within 3× of the 1k p50 (the named
baseline, measured in the same run).

    python bench/lsp.py [--sizes 1000,10000,100000] [--hovers 200] [--write docs/benchmarks.md] [--pools DIR]

`--first-load` measures instead what a user waits for when a server starts on an unseen pool (issue 22,
`first_load`): from the server's start, on an empty cache directory, to its first hover with content
(answered from the records loaded so far) and to the full result (the load over, the lenses
recomputed), each a ratio to a `json.loads` of every line of the pool as a process of its own,
interpreter start included — measured in the same run, alternating, `--rounds` times.

    python bench/lsp.py --first-load [--sizes 100000] [--rounds 3] [--write docs/benchmarks.md] [--pools DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe_machine, replace_section  # noqa: E402
from _stores import corpus_jsonl  # noqa: E402

from soma_lsp.client import SomaClient, start  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures" / "workspace"
SERVER = [sys.executable, "-m", "soma_lsp"]


def make_workspace(base: Path, n: int, pools: Path | None) -> Path:
    """The fixture code with a generated pool of n records in one JSONL file (`_stores.corpus_jsonl`,
    built once and kept: linked into the workspace where the file system allows, else copied)."""
    workspace = base / f"ws-{n}"
    shutil.copytree(FIXTURES, workspace, ignore=shutil.ignore_patterns(".soma"))
    pool = workspace / ".soma" / "pool"
    pool.mkdir(parents=True)
    stored = corpus_jsonl(n, pools)
    try:
        os.link(stored, pool / "runs.jsonl")
    except OSError:
        shutil.copyfile(stored, pool / "runs.jsonl")
    return workspace


def hover_positions(path: Path) -> list[tuple[int, int]]:
    """One position inside each distinct identifier of the file (what a researcher hovers)."""
    seen, positions = set(), []
    for line, text in enumerate(path.read_text().splitlines()):
        for match in re.finditer(r"[A-Za-z_][A-Za-z0-9_]{2,}", text):
            if match.group() not in seen:
                seen.add(match.group())
                positions.append((line, match.start() + 1))
    return positions


def scope_positions(path: Path) -> list[tuple[int, int]]:
    """The name of every class and function: each hover there is a new scope (nothing cached)."""
    positions = []
    for line, text in enumerate(path.read_text().splitlines()):
        match = re.match(r"\s*(?:async\s+)?(?:def|class)\s+(\w+)", text)
        if match:
            positions.append((line, match.start(1) + 1))
    return positions


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def timed_hovers(client: SomaClient, uri: str, positions: list[tuple[int, int]], count: int) -> list[float]:
    samples = []
    for i in range(count):
        line, character = positions[i % len(positions)]
        started = time.perf_counter()
        await client.hover(uri, line, character)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


NO_SNAPSHOT = {"snapshot": {"enabled": False}}


async def first_hover(client: SomaClient, workspace: Path) -> tuple[str, list[tuple[int, int]]]:
    """Open the model file and hover `RotaryEmbedding` until the answer has content."""
    await client.open_workspace(workspace)
    model = workspace / "model" / "transformer.py"
    uri = await client.open(model, "python", wait=0)
    positions = hover_positions(model)
    line, character = next(p for p in positions if model.read_text().splitlines()[p[0]].startswith("class Rotary"))
    while not await client.hover(uri, line, character):
        await asyncio.sleep(0.01)
    return uri, positions


async def restart_from_snapshot(workspace: Path) -> float:
    """Start → first hover of a server whose predecessor left the snapshot of this unchanged pool."""
    cache = Path(os.environ["SOMA_CACHE_DIR"])
    await asyncio.sleep(2.1)  # a file changed in the last 2 s is read again on every restart (loader.RACY_NS)
    client = await start(SERVER, workspace)
    try:
        await client.open_workspace(workspace)
        await client.wait_for_pool()
        while not list(cache.glob("*.snapshot")):
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    started = time.perf_counter()
    client = await start(SERVER, workspace)
    try:
        await first_hover(client, workspace)
        elapsed = time.perf_counter() - started
        assert (await client.wait_for_pool())["restored"] == 1, "the restart did not use the snapshot"
        return elapsed
    finally:
        await client.close()


async def measure(workspace: Path, hovers: int, during_reindex: bool) -> dict:
    started = time.perf_counter()
    client = await start(SERVER, workspace, NO_SNAPSHOT)
    try:
        uri, positions = await first_hover(client, workspace)
        first_hover_s = time.perf_counter() - started
        status = await client.wait_for_pool()
        # New scopes: one hover per definition, so every answer is computed, none cached.
        scopes = scope_positions(workspace / "model" / "transformer.py")
        first_visits = await timed_hovers(client, uri, scopes, len(scopes))
        result = {"records": status.get("records"), "first_hover_s": first_hover_s, "first_visit_ms": first_visits,
                  "hover_ms": await timed_hovers(client, uri, positions, hovers)}
        if during_reindex:
            reload = asyncio.ensure_future(client.command("soma.reloadPool"))
            samples = []
            reindex_started = time.perf_counter()
            while not reload.done():
                samples += await timed_hovers(client, uri, positions, 1)
            await reload
            result["reindex_s"] = time.perf_counter() - reindex_started
            result["reindex_hover_ms"] = samples
    finally:
        await client.close()
    if during_reindex:
        result["restart_first_hover_s"] = await restart_from_snapshot(workspace)
    return result


def summarize(n: int, result: dict) -> dict:
    row = {"n": n, "records": result["records"], "first_hover_s": result["first_hover_s"],
           "p50": statistics.median(result["hover_ms"]), "p99": percentile(result["hover_ms"], 0.99),
           "first_p50": statistics.median(result["first_visit_ms"]),
           "first_p99": percentile(result["first_visit_ms"], 0.99), "positions": len(result["first_visit_ms"])}
    if "reindex_hover_ms" in result:
        row.update(reindex_s=result["reindex_s"], reindex_hovers=len(result["reindex_hover_ms"]),
                   reindex_p50=statistics.median(result["reindex_hover_ms"]),
                   reindex_p99=percentile(result["reindex_hover_ms"], 0.99),
                   restart_first_hover_s=result["restart_first_hover_s"])
    return row


def render(rows: list[dict], hovers: int, command: str) -> str:
    base = rows[0]
    lines = [
        "## LSP", "",
        f"Command: `{command}` — {hovers} hovers per size over the identifiers of the fixture "
        "`model/transformer.py`, through a real stdio session (`soma_lsp.client`), pool in one JSONL file.",
        "", describe_machine(), "",
        f"New scopes: one hover on the name of each of the file's {base['positions']} definitions, so every "
        "answer is computed (the server caches an answer per scope, index version and minute); then "
        f"{hovers} hovers cycling over all its identifiers (revisits, mostly answered from that cache).", "",
        f"| records | start → first hover | new scopes p50 / p99 | ÷ {base['n']:,} p50 "
        f"| revisits p50 / p99 | ÷ {base['n']:,} p50 |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['records']:,} | {r['first_hover_s']:.2f} s | {r['first_p50']:.1f} / {r['first_p99']:.1f} ms "
                     f"| {r['first_p50'] / base['first_p50']:.2f}× | {r['p50']:.1f} / {r['p99']:.1f} ms "
                     f"| {r['p50'] / base['p50']:.2f}× |")
    last = rows[-1]
    if "reindex_p50" in last:
        lines += ["", f"During a full reindex of {last['records']:,} records (`soma.reloadPool`, "
                  f"{last['reindex_s']:.1f} s): {last['reindex_hovers']} hovers answered, "
                  f"p50 {last['reindex_p50']:.1f} ms, p99 {last['reindex_p99']:.1f} ms.", "",
                  f"Restart on the unchanged {last['records']:,}-record pool, from the snapshot the previous server "
                  f"left: start → first hover {last['restart_first_hover_s']:.2f} s (a first start: "
                  f"{last['first_hover_s']:.2f} s)."]
    lines += ["", "Targets (issue 4): at 100k p50 ≤ 30 ms, p99 ≤ 100 ms; 100k p50 within 3× of the 1k p50."]
    return "\n".join(lines) + "\n"


# -- the first load (--first-load) -----------------------------------------------------------------------

JSON_LOADS = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)"
PARTIAL = "⏳ partial"


def json_loads_process(pool: Path) -> float:
    """The baseline: a process that `json.loads` every line of the pool (interpreter start included)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", JSON_LOADS, str(pool)], check=True)
    return time.perf_counter() - started


async def first_load_once(workspace: Path, cache: Path) -> dict:
    """Server start (empty cache directory) → first hover with content, and → the full result: the
    status says the load is over and a code-lens request answers without a partial title."""
    os.environ["SOMA_CACHE_DIR"] = str(cache)
    model = workspace / "model" / "transformer.py"
    line, character = next((n, text.index("Rotary") + 1) for n, text in enumerate(model.read_text().splitlines())
                           if text.startswith("class Rotary"))
    started = time.perf_counter()
    client = await start(SERVER, workspace)
    try:
        await client.open_workspace(workspace)
        uri = await client.open(model, "python", wait=0)
        while not (hover := await client.hover(uri, line, character)):
            await asyncio.sleep(0.01)
        first = time.perf_counter() - started
        partial = PARTIAL in hover.contents.value
        while (status := await client.command("soma.poolStatus"))["indexing"]:
            await asyncio.sleep(0.02)
        loaded = time.perf_counter() - started
        while any(PARTIAL in lens.command.title for lens in await client.lenses(uri)):
            await asyncio.sleep(0.02)
        full = time.perf_counter() - started
        return {"records": status["records"], "first": first, "first_partial": partial, "loaded": loaded,
                "full": full}
    finally:  # (measured by now: a shutdown that waits for the snapshot's first write is not timed)
        try:
            await asyncio.wait_for(client.close(), 60)
        except TimeoutError:
            print("the server did not end within 60 s of shutdown; stopped", file=sys.stderr)
            client._server.kill()


def first_load(sizes: list[int], rounds: int, tmp: Path, pools: Path | None) -> list[dict]:
    """Per size: `rounds` alternating runs of the baseline and of a server on a fresh cache."""
    rows = []
    for n in sizes:
        workspace = make_workspace(tmp, n, pools)
        pool = workspace / ".soma" / "pool" / "runs.jsonl"
        time.sleep(2.1)  # a pool written in the last 2 s is not trusted by stamp (loader.RACY_NS): let it age
        baselines, runs = [], []
        for r in range(rounds):
            baselines.append(json_loads_process(pool))
            runs.append(asyncio.run(first_load_once(workspace, tmp / f"cache-{n}-{r}")))
            print({"n": n, "baseline": baselines[-1], **runs[-1]}, flush=True)
        rows.append({"n": n, "bytes": pool.stat().st_size, "baselines": baselines, "runs": runs})
    return rows


def render_first_load(rows: list[dict], command: str) -> str:
    lines = [
        "## LSP first load", "",
        f"Command: `{command}` — a server started on an unseen pool (one JSONL file, an empty "
        "`SOMA_CACHE_DIR`, snapshots on), driven through stdio by `soma_lsp.client`. Times from the "
        "server's start (interpreter and imports included) to its first hover with content on "
        "`RotaryEmbedding` (answered from the records loaded so far), to the end of the load (status "
        "`indexing: false`) and to the full result (lenses recomputed without `⏳ partial`). Baseline: "
        "`json.loads` of every line as a process of its own, measured in the same run, alternating. "
        "Medians of the rounds, with min–max of the ratios.", "", describe_machine(), "",
        "| records | pool | baseline (json.loads process) | first answer | ÷ baseline | load over | full result "
        "| ÷ baseline |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        base = statistics.median(row["baselines"])
        cells = []
        for key in ("first", "loaded", "full"):
            ratios = [run[key] / b for run, b in zip(row["runs"], row["baselines"])]
            cells.append((statistics.median(run[key] for run in row["runs"]), statistics.median(ratios),
                          min(ratios), max(ratios)))
        (first, first_ratio, first_lo, first_hi), loaded, (full, full_ratio, full_lo, full_hi) = cells
        lines.append(f"| {row['runs'][0]['records']:,} | {row['bytes'] / 2**20:.0f} MB | {base:.2f} s | "
                     f"{first:.2f} s | {first_ratio:.1f}× ({first_lo:.1f}–{first_hi:.1f}) | {loaded[0]:.2f} s | "
                     f"{full:.2f} s | {full_ratio:.1f}× ({full_lo:.1f}–{full_hi:.1f}) |")
    partial = all(run["first_partial"] for row in rows for run in row["runs"])
    lines += ["", f"First answers said `⏳ partial`: {'all' if partial else 'not all'} of them. "
              "Targets (issue 22): the first answer at once; the full result ≤ 5× the baseline."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None, help="pool sizes (default 1000,10000,100000; 100000 with "
                                                      "--first-load)")
    parser.add_argument("--hovers", type=int, default=200)
    parser.add_argument("--first-load", action="store_true", help="measure the first load instead (issue 22)")
    parser.add_argument("--rounds", type=int, default=3, help="--first-load: alternating rounds")
    parser.add_argument("--write", type=Path, help="replace the ## LSP section (## LSP first load) of this "
                                                   "Markdown file")
    parser.add_argument("--pools", type=Path, help="where generated pools are kept (default: .cache/bench/)")
    args = parser.parse_args()
    if args.first_load:
        sizes = [int(s) for s in (args.sizes or "100000").split(",")]
        with tempfile.TemporaryDirectory(prefix="soma-bench-lsp-") as tmp:
            text = render_first_load(first_load(sizes, args.rounds, Path(tmp), args.pools),
                                     "python bench/lsp.py " + " ".join(sys.argv[1:]))
        print(text)
        if args.write:
            replace_section(args.write, "## LSP first load", text)
        return
    sizes = [int(s) for s in (args.sizes or "1000,10000,100000").split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="soma-bench-lsp-") as tmp:
        os.environ["SOMA_CACHE_DIR"] = str(Path(tmp) / "cache")  # the servers'; never the user's cache
        for n in sizes:
            workspace = make_workspace(Path(tmp), n, args.pools)
            result = asyncio.run(measure(workspace, args.hovers, during_reindex=n == sizes[-1]))
            rows.append(summarize(n, result))
            print(rows[-1], flush=True)
    text = render(rows, args.hovers, "python bench/lsp.py " + " ".join(sys.argv[1:]))
    print(text)
    if args.write:
        replace_section(args.write, "## LSP", text)


if __name__ == "__main__":
    main()
