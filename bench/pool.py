"""Pool benchmark (issues 3, 22): the first `soma-lsp query`, its restart, peak memory, change latency.

    .venv/bin/python bench/pool.py                 # 100k records in both layouts, latency at 10k and 100k
    .venv/bin/python bench/pool.py --n 20000       # smaller smoke run
    .venv/bin/python bench/pool.py --write-docs    # also rewrite the `## Pool` section of docs/benchmarks.md

Two layouts of the same N records (~1 KB each, generated under `.cache/bench/`): N single-record `.json`
files in 100 sub-directories, and one `.jsonl` file. What a user waits for is timed as the process they
start (interpreter start and imports included), in rounds that alternate the three processes, so that
the machine's load hits them alike; medians and the spread of the per-round ratios are reported:

* baseline: `python -c` listing the files (`os.walk`) and `json.loads`-ing each file / each line;
* first: `python -m soma_lsp query TEXT --pool DIR` with an empty `SOMA_CACHE_DIR` — listing, reading,
  decoding, validating, indexing, ranking, printing; the snapshot is written after the answer by a
  detached process, which the command does not wait for (its time until the file is in place is
  reported apart); a `.jsonl` file of 32 MiB or more is counted by a second process meanwhile
  (`pool.counting`), whose CPU time counts in the command's;
* restart: the same command again once that snapshot is in place;
* wall and CPU time (user + system, the command's waited-for children included) and peak RSS
  (`wait4`), peak RSS also as a multiple of the pool's bytes; the steady RSS of a process holding the
  loaded pool and index (a child of its own, after the load and a collection);
* where an in-process first load goes, stage by stage (the `.jsonl` layout);
* change latency: the pool loaded and watched by `PoolWatcher` (debounce 50 ms, step 10 ms); one record
  file rewritten; time until the index returns the new record (median and p90 of 25), plus
  `LivePool.apply([path])` alone, at 10k and at N single-record files.
Ratios are against the baseline of the same layout measured in the same round.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from _machine import describe_machine  # noqa: E402

LAYOUTS = ("files", "jsonl")
LAYOUT_TEXT = {"files": "{n:,} single-record `.json` files in 100 directories", "jsonl": "one `.jsonl` file"}

WORDS = ("loss learning rate warmup schedule cosine decay batch gradient clip norm layer attention head "
         "rotary rope theta embedding dropout residual rmsnorm layernorm optimizer adam adamw lion momentum "
         "precision bf16 fp8 overflow diverged spike unstable collapse router expert routing capacity "
         "tokens throughput memory checkpoint flash kernel fused compile baseline ablation sweep seed "
         "regressed improved worse better plateau converged distillation finetune lora adapter").split()
ARCH = ["Embedding", "RMSNorm", "RotaryEmbedding", "Attention", "SwiGLU", "Linear", "MoELayer", "TopKRouter",
        "LayerNorm", "Dropout", "GELU", "Conv2d"]
STATUSES = ["succeeded", "failed", "crashed", "regressed", "running", "finished", "cancelled", "planned"]


def record(i: int, rng: random.Random) -> dict:
    words = lambda n: " ".join(rng.choice(WORDS) for _ in range(n))  # noqa: E731
    return {
        "id": f"exp-{i:06d}", "name": "-".join(rng.choice(WORDS) for _ in range(3)) + f"-{i}",
        "status": rng.choice(STATUSES),
        "created_at": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
        "finished_at": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:30:00+02:00",
        "conclusion": {"headline": words(9), "details": words(25)},
        "notes": words(30),
        "architecture": {name: rng.randint(1, 24) for name in rng.sample(ARCH, 4)},
        "metrics": [{"name": "val_loss", "value": round(rng.uniform(2, 4), 4), "baseline": 3.0, "goal": "min"},
                    {"name": "tokens_per_sec", "value": rng.randint(150000, 250000), "baseline": 200000,
                     "goal": "max"}],
        "code": ["model/transformer.py::Attention.forward", f"train.py::train{i % 7}"],
        "commit": f"{rng.getrandbits(40):010x}", "tags": ["sweep", rng.choice(WORDS)],
        "url": f"https://tracker.example/runs/{i}", "owner": "ana", "gpu_hours": round(rng.uniform(1, 500), 1),
    }


def generate(base: Path, n: int, layouts: Sequence[str] = LAYOUTS) -> dict[str, Path]:
    """The pool's root per layout: `files/` with n single-record files in 100 sub-directories,
    `lines/` holding `pool.jsonl` (the same records)."""
    rng = random.Random(1234)
    files, lines = base / "files", base / "lines"
    lines.mkdir(parents=True)
    if "files" in layouts:
        for d in range(100):
            (files / f"d{d:02d}").mkdir(parents=True)
    with (lines / "pool.jsonl").open("w") as out:
        for i in range(n):
            text = json.dumps(record(i, rng))
            out.write(text + "\n")
            if "files" in layouts:
                (files / f"d{i % 100:02d}" / f"exp-{i:06d}.json").write_text(text)
    return {layout: {"files": files, "jsonl": lines}[layout] for layout in layouts}


# -- children ----------------------------------------------------------------------------------

BASELINE = """
import json, os, sys
count = 0
for directory, dirs, names in os.walk(sys.argv[1]):
    dirs.sort()
    for name in sorted(names):
        with open(os.path.join(directory, name), "rb") as f:
            if name.endswith(".jsonl"):
                for line in f:
                    if line.strip():
                        json.loads(line)
                        count += 1
            else:
                json.loads(f.read())
                count += 1
print(count)
"""
QUERY = ("query", "rope theta diverged", "--limit", "5", "--now", "none")


def steady_child(root: str) -> dict:
    """RSS (MiB) of a process holding the loaded pool and its index, once the load is over (as
    `soma-lsp query` loads it: one commit per file), and its peak."""
    import gc

    from soma_lsp.pool import LivePool
    from soma_lsp.retrieval.index import LiveIndex
    pool = LivePool([root], LiveIndex(), in_parts=False)
    pool.load()
    gc.collect()
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {"steady_mb": resident / 2**20, "records": len(pool),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def breakdown_child(root: str) -> dict:
    """Where an in-process first load of the `.jsonl` layout goes, stage by stage (CPU seconds)."""
    import orjson

    from soma_lsp.gcpause import collector_paused
    from soma_lsp.pool import LivePool
    from soma_lsp.records import Source, parse_record
    from soma_lsp.retrieval.index import LiveIndex
    out: dict = {}
    path = os.path.join(root, "pool.jsonl")
    start = time.process_time()
    with open(path, "rb") as f:
        dicts = [orjson.loads(line) for line in f]
    out["decode_orjson"] = time.process_time() - start
    t = time.process_time()
    with collector_paused():  # as the loader runs it
        records = [parse_record(d, source=Source(path, i)) for i, d in enumerate(dicts)]
    out["parse_record"] = time.process_time() - t
    del dicts
    t = time.process_time()
    LiveIndex(records)
    out["index"] = time.process_time() - t
    del records
    t = time.process_time()
    LivePool([root]).load()
    out["loader_no_index"] = time.process_time() - t
    return out


def latency_child(root: str, samples: int) -> dict:
    from soma_lsp.pool import LivePool, PoolWatcher
    from soma_lsp.retrieval import RetrievalQuery
    from soma_lsp.retrieval.index import LiveIndex
    index = LiveIndex()
    pool = LivePool([root], index)
    pool.load()
    paths = sorted(Path(root).rglob("*.json"))
    rng = random.Random(7)
    query = RetrievalQuery(text="rope theta warmup", limit=10)
    index.rank(query)
    watched, applied = [], []
    with PoolWatcher(pool, debounce_ms=50, step_ms=10):
        time.sleep(0.2)
        for k in range(samples):
            path = paths[rng.randrange(len(paths))]
            data = json.loads(path.read_text())
            data["name"] = f"changed-{k}"
            start = time.perf_counter()
            path.write_text(json.dumps(data))
            deadline = start + 10
            while (r := index.get(data["id"])) is None or r.name != data["name"]:
                if time.perf_counter() > deadline:
                    raise SystemExit(f"change to {path} not seen within 10 s")
                time.sleep(0.0005)
            watched.append(time.perf_counter() - start)
            index.rank(query)  # a query in between, as an editor would do
            time.sleep(0.05)
    for k in range(samples):  # apply() alone: re-read one file, update its record
        path = paths[rng.randrange(len(paths))]
        data = json.loads(path.read_text())
        data["name"] = f"applied-{k}"
        path.write_text(json.dumps(data))
        start = time.perf_counter()
        pool.apply([path])
        applied.append(time.perf_counter() - start)
        index.rank(query)
    time.sleep(0.1)

    def stats(xs):
        xs = sorted(xs)
        return {"median_ms": 1000 * statistics.median(xs), "p90_ms": 1000 * xs[int(0.9 * (len(xs) - 1))]}

    return {"records": len(index), "watched": stats(watched), "apply": stats(applied)}


def run_child(*args: str) -> dict:
    result = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                            cwd=REPO)
    if result.returncode:
        raise SystemExit(f"child {args} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def timed_process(argv: list[str], env: dict[str, str]) -> dict:
    """Run one process to its end: wall seconds, CPU seconds (user + system, with the children it
    waited for) and peak RSS in MB (`wait4`: the largest of it and those children)."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{argv} failed:\n{error.decode(errors='replace')}")
    return {"seconds": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def wait_for_snapshot(cache: Path, since: float) -> float:
    """Seconds from `since` until the detached writer has put the snapshot in place."""
    deadline = time.perf_counter() + 300
    while not list(cache.glob("pool-*.snapshot")):
        if time.perf_counter() > deadline:
            raise SystemExit(f"no snapshot in {cache} after 300 s")
        time.sleep(0.02)
    return time.perf_counter() - since


def rounds(root: Path, cache_base: Path, repeat: int) -> dict:
    """`repeat` rounds of baseline, first `soma-lsp query` (empty cache) and its restart."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SOMA_POOL", None)
    query = [sys.executable, "-m", "soma_lsp", *QUERY, "--pool", str(root)]
    out: dict[str, list] = {"baseline": [], "first": [], "restart": [], "snapshot_after": []}
    for r in range(repeat):
        cache = cache_base / f"round{r}"
        shutil.rmtree(cache, ignore_errors=True)
        env["SOMA_CACHE_DIR"] = str(cache)
        out["baseline"].append(timed_process([sys.executable, "-c", BASELINE, str(root)], env))
        first = timed_process(query, env)
        out["first"].append(first)
        out["snapshot_after"].append(wait_for_snapshot(cache, time.perf_counter()))
        out["restart"].append(timed_process(query, env))
        out["snapshot_mb"] = next(cache.glob("pool-*.snapshot")).stat().st_size / 1e6
        shutil.rmtree(cache, ignore_errors=True)
    return out


def summary(runs: dict, pool_bytes: int) -> dict:
    """Medians, and each ratio to the same round's baseline (median, min, max)."""
    med = lambda key, what: statistics.median(run[what] for run in runs[key])  # noqa: E731

    def ratio(key: str, what: str) -> tuple[float, float, float]:
        values = [run[what] / base[what] for run, base in zip(runs[key], runs["baseline"])]
        return statistics.median(values), min(values), max(values)

    return {"baseline": med("baseline", "seconds"), "baseline_cpu": med("baseline", "cpu"),
            **{f"{key}{suffix}": med(key, what) for key in ("first", "restart")
               for suffix, what in (("", "seconds"), ("_cpu", "cpu"), ("_rss", "rss_mb"))},
            **{f"{key}_ratio{suffix}": ratio(key, what) for key in ("first", "restart")
               for suffix, what in (("", "seconds"), ("_cpu", "cpu"))},
            "first_rss_x": med("first", "rss_mb") * 2**20 / pool_bytes,
            "snapshot_after": statistics.median(runs["snapshot_after"]), "snapshot_mb": runs["snapshot_mb"],
            "pool_mb": pool_bytes / 1e6}


# -- report ------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--latency-small", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of baseline, first query, restart")
    parser.add_argument("--no-latency", dest="latency", action="store_false", help="skip the change latency")
    parser.add_argument("--layouts", default=",".join(LAYOUTS),
                        help="of files,jsonl (1M single files take long to write: `--n 1000000 --layouts jsonl`)")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, *rest = args.child
        result = latency_child(rest[0], int(rest[1])) if mode == "latency" else \
            steady_child(rest[0]) if mode == "steady" else breakdown_child(rest[0])
        print(json.dumps(result))
        return

    base = REPO / ".cache" / "bench" / f"pool-{args.n}-{os.getpid()}"
    try:
        t = time.perf_counter()
        roots = generate(base, args.n, args.layouts.split(","))
        sizes = {layout: sum(f.stat().st_size for f in root.rglob("*.json*")) for layout, root in roots.items()}
        lines = base / "lines"
        print(f"generated {args.n:,} records ({(lines / 'pool.jsonl').stat().st_size / 1e6:.0f} MB as JSONL) in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
        time.sleep(2.5)  # files modified in the last 2 s are read again on every restart (loader.RACY_NS)
        rows = {}
        for layout, root in roots.items():
            rows[layout] = r = summary(rounds(root, base / "cache", args.repeat), sizes[layout])
            r["steady"] = run_child("steady", str(root))["steady_mb"]
            print(f"{layout}: baseline {r['baseline']:.2f} s; first query {r['first']:.2f} s "
                  f"({r['first_ratio'][0]:.2f}x, CPU {r['first_ratio_cpu'][0]:.2f}x), peak RSS "
                  f"{r['first_rss']:.0f} MiB ({r['first_rss_x']:.2f}x the pool), steady {r['steady']:.0f} MiB; restart {r['restart']:.2f} s "
                  f"({r['restart_ratio'][0]:.2f}x); snapshot in place {r['snapshot_after']:.2f} s after the "
                  "answer", file=sys.stderr)
        breakdown = run_child("breakdown", str(lines))
        print("breakdown (jsonl): " + ", ".join(f"{k} {v:.2f} s" for k, v in breakdown.items()), file=sys.stderr)
        latency = {}
        if args.latency and "files" in roots:
            files = roots["files"]
            small = base / "small"
            small.mkdir()
            for d in range(100):
                (small / f"d{d:02d}").mkdir()
            for i in range(args.latency_small):
                src = files / f"d{i % 100:02d}" / f"exp-{i:06d}.json"
                shutil.copyfile(src, small / f"d{i % 100:02d}" / src.name)
            latency = {args.latency_small: run_child("latency", str(small), str(args.samples)),
                       args.n: run_child("latency", str(files), str(args.samples))}
            for n, r in latency.items():
                print(f"change latency at {n:,}: watched median {r['watched']['median_ms']:.1f} ms "
                      f"(p90 {r['watched']['p90_ms']:.1f}), apply median {r['apply']['median_ms']:.2f} ms "
                      f"(p90 {r['apply']['p90_ms']:.2f})", file=sys.stderr)
        report = render(args.n, (lines / "pool.jsonl").stat().st_size, rows, latency, breakdown, args.repeat)
        print(report)
        if args.write_docs:
            write_section(report)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def render(n: int, size: int, rows: dict, latency: dict, breakdown: dict, repeat: int) -> str:
    spread = lambda r: f"{r[0]:.2f}× ({r[1]:.2f}–{r[2]:.2f})"  # noqa: E731
    out = ["## Pool", "",
           f"`.venv/bin/python bench/pool.py {' '.join(sys.argv[1:])}` ({time.strftime('%Y-%m-%d %H:%M')}; "
           f"{describe_machine()}). {n:,} generated records of ~{size / n:.0f} bytes ({size / 1e6:.0f} MB as "
           f"JSONL), as {' and as '.join(LAYOUT_TEXT[layout].format(n=n) for layout in rows)}. "
           f"Every figure is a whole process, interpreter start included, the median of {repeat} rounds that "
           "alternate baseline, first query and restart (page cache warm); a ratio is against the baseline "
           "of the same round, median (min–max): `python -c` that lists the files and `json.loads` every "
           f"file/line. The query: `soma-lsp query '{QUERY[1]}' --limit 5 --now none --pool DIR`.", "",
           "| layout | baseline | first query, empty `SOMA_CACHE_DIR`: wall | … CPU (user + sys) | "
           "… peak RSS (× pool bytes) | steady RSS after the load | snapshot in place after the answer | restart: wall | … CPU | … peak RSS |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for layout, r in rows.items():
        out.append(f"| {'100k files' if layout == 'files' and n == 100_000 else layout} | {r['baseline']:.2f} s "
                   f"(CPU {r['baseline_cpu']:.2f} s) | {r['first']:.2f} s, {spread(r['first_ratio'])} | "
                   f"{r['first_cpu']:.2f} s, {spread(r['first_ratio_cpu'])} | {r['first_rss']:.0f} MiB "
                   f"({r['first_rss_x']:.2f}× {r['pool_mb']:.0f} MB) | {r['steady']:.0f} MiB "
                   f"({r['steady'] * 2**20 / (r['pool_mb'] * 1e6):.2f}×) | {r['snapshot_after']:.2f} s "
                   f"({r['snapshot_mb']:.0f} MB) | {r['restart']:.2f} s, {spread(r['restart_ratio'])} | "
                   f"{r['restart_cpu']:.2f} s, {spread(r['restart_ratio_cpu'])} | {r['restart_rss']:.0f} MiB |")
    out += ["", "Targets (issue 22): first query ≤ 5× baseline (wall), restart ≤ 1×, peak RSS of the first "
                "load ≤ 4× the pool's bytes.", "",
            "Where an in-process first load goes (the `.jsonl` layout, CPU seconds, stage by stage): "
            f"read + `orjson.loads` every line {breakdown['decode_orjson']:.2f} s, `parse_record` on those "
            f"dicts {breakdown['parse_record']:.2f} s, `LiveIndex(records)` {breakdown['index']:.2f} s; the "
            f"whole loader without an index {breakdown['loader_no_index']:.2f} s.", ""]
    if latency:
        out += ["Change latency (a record file rewritten → the index returns the new record; single-record files):",
                "", "| records | through `PoolWatcher` (watchfiles, debounce 50 ms, step 10 ms), median / p90 | "
                "`LivePool.apply([path])` alone, median / p90 |", "|---|---|---|"]
        for count, r in latency.items():
            out.append(f"| {count:,} | {r['watched']['median_ms']:.1f} / {r['watched']['p90_ms']:.1f} ms | "
                       f"{r['apply']['median_ms']:.2f} / {r['apply']['p90_ms']:.2f} ms |")
        out.append("")
    return "\n".join(out)


def write_section(section: str) -> None:
    path = REPO / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    notes_marker = "<!-- pool-notes -->"
    match = re.search(r"^## Pool\n.*?(?=^## |\Z)", text, flags=re.S | re.M)
    notes = ""
    if match and notes_marker in match.group(0):
        notes = match.group(0)[match.group(0).index(notes_marker):].rstrip() + "\n"
    new = section.rstrip() + "\n\n" + notes if notes else section.rstrip() + "\n"
    if match:
        text = text[:match.start()] + new + ("\n" if text[match.end():] else "") + text[match.end():]
    else:
        text = text.rstrip() + "\n\n" + new
    path.write_text(text)


if __name__ == "__main__":
    main()
