"""Pool benchmark (issue 3): cold load, restart, cold `soma-lsp query`, change latency, peak memory.

    .venv/bin/python bench/pool.py                 # 100k records in both layouts, latency at 10k and 100k
    .venv/bin/python bench/pool.py --n 20000       # smaller smoke run
    .venv/bin/python bench/pool.py --write-docs    # also rewrite the `## Pool` section of docs/benchmarks.md

Two layouts of the same N records (~1 KB each, generated in a temp dir): N single-record `.json` files
in 100 sub-directories, and one `.jsonl` file. Every measurement runs in its own fresh child process
(page cache warm, Python cold), so timings and peak RSS do not bleed into each other; each timing is the
best of `--repeat` runs (3), the baseline's as the others':

* baseline: list the files (`os.walk`) and `json.loads` each file / each line into dicts;
* first load: `LivePool(roots, LiveIndex()).load(progress=...)` — listing, reading, decoding, validating
  (`parse_record`), tokenizing and indexing; also the same load without an index (loader alone). Timed
  after the imports (numpy & co., reported apart), as the baseline's `json` is already imported. A
  `.jsonl` file of 32 MiB or more has its documents counted by a second process meanwhile
  (`pool.counting`) when the machine has a second core;
* snapshot: a first load, then `LivePool.save_snapshot()` (timed apart; the file's size reported);
* restart on the unchanged pool: `LivePool(..., cache_dir=...).load()` in a new process, which stands
  the pool up from that snapshot (files listed and their stamps compared, nothing read), plus its first
  ranked query (the records it shows are built then);
* `soma-lsp query` from a cold process: wall time of `python -m soma_lsp query TEXT --pool DIR`, with
  `--no-snapshot` (reads every file) and with the snapshot in place;
* change latency: the pool loaded and watched by `PoolWatcher` (debounce 50 ms, step 10 ms); one record
  file rewritten; time until the index returns the new record (median and p90 of 25), plus
  `LivePool.apply([path])` alone, at 10k and at N single-record files;
* peak memory: the child's max RSS after the first load.
Ratios are against the baseline of the same layout measured in the same run.
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
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
from _machine import describe_machine  # noqa: E402

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


def generate(base: Path, n: int) -> tuple[Path, Path]:
    """`files/` with n single-record files in 100 sub-directories, and `lines/pool.jsonl`."""
    rng = random.Random(1234)
    files, lines = base / "files", base / "lines"
    lines.mkdir(parents=True)
    for d in range(100):
        (files / f"d{d:02d}").mkdir(parents=True)
    with (lines / "pool.jsonl").open("w") as out:
        for i in range(n):
            text = json.dumps(record(i, rng))
            out.write(text + "\n")
            (files / f"d{i % 100:02d}" / f"exp-{i:06d}.json").write_text(text)
    return files, lines


# -- children ----------------------------------------------------------------------------------

def child(mode: str, root: str) -> dict:
    out: dict = {}
    if mode != "baseline":
        start = time.perf_counter()
        from soma_lsp.pool import LivePool
        from soma_lsp.retrieval.index import LiveIndex
        out["import_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    if mode == "baseline":
        count = 0
        for directory, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(directory, name)
                if name.endswith(".jsonl"):
                    with open(path, "rb") as f:
                        for line in f:
                            if line.strip():
                                json.loads(line)
                                count += 1
                else:
                    with open(path, "rb") as f:
                        json.loads(f.read())
                    count += 1
        out["records"] = count
    elif mode in ("load", "load-noindex", "save", "restart"):
        calls = []
        index = LiveIndex() if mode != "load-noindex" else None
        pool = LivePool([root], index, cache_dir=os.environ["SOMA_CACHE_DIR"] if mode in ("save", "restart") else None)
        pool.load(progress=lambda done, total: calls.append(done))
        out["records"] = len(pool)
        out["progress_calls"] = len(calls)
        out["errors"] = pool.summary()["errors"]
        if mode == "restart":
            from soma_lsp.retrieval import RetrievalQuery
            assert pool.snapshot_path.exists() and not pool.unsaved, "the restart did not use the snapshot"
            t = time.perf_counter()
            assert index.rank(RetrievalQuery(text="rope theta diverged warmup", limit=10))
            out["first_query_seconds"] = time.perf_counter() - t
        if mode == "save":  # (the cache directory is empty: that was a first load)
            out["seconds"] = time.perf_counter() - start
            t = time.perf_counter()
            assert pool.save_snapshot()
            out["save_seconds"] = time.perf_counter() - t
            out["snapshot_mb"] = pool.snapshot_path.stat().st_size / 1e6
            out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            return out
    elif mode == "breakdown":  # where a first load's time goes, stage by stage, on the .jsonl layout
        import orjson

        from soma_lsp.gcpause import collector_paused
        from soma_lsp.records import Source, parse_record
        path = os.path.join(root, "pool.jsonl")
        with open(path, "rb") as f:
            dicts = [orjson.loads(line) for line in f]
        out["decode_orjson"] = time.perf_counter() - start
        t = time.perf_counter()
        with collector_paused():  # as the loader runs it
            records = [parse_record(d, source=Source(path, i)) for i, d in enumerate(dicts)]
        out["parse_record"] = time.perf_counter() - t
        del dicts
        t = time.perf_counter()
        LiveIndex(records)
        out["index"] = time.perf_counter() - t
        t = time.perf_counter()
        pool = LivePool([root])
        pool.load()
        out["loader_no_index"] = time.perf_counter() - t
        out["records"] = len(pool)
    out["seconds"] = time.perf_counter() - start
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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


def cold_query(root: Path, *flags: str) -> float:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "soma_lsp", "query", "rope theta diverged", "--pool", str(root),
                             "--limit", "5", "--now", "none", *flags], capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"soma-lsp query failed:\n{result.stderr}")
    return elapsed


# -- report ------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--latency-small", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timing; the best is kept")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, *rest = args.child
        result = latency_child(rest[0], int(rest[1])) if mode == "latency" else child(mode, rest[0])
        print(json.dumps(result))
        return

    base = Path(tempfile.mkdtemp(prefix="soma-bench-pool-"))
    try:
        t = time.perf_counter()
        files, lines = generate(base, args.n)
        size = (lines / "pool.jsonl").stat().st_size
        print(f"generated {args.n:,} records ({size / 1e6:.0f} MB as JSONL) in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
        time.sleep(2.5)  # files modified in the last 2 s are read again on every restart (loader.RACY_NS)
        cache = base / "cache"
        os.environ["SOMA_CACHE_DIR"] = str(cache)  # the children's and `soma-lsp query`'s
        best = lambda mode, root: min((run_child(mode, str(root)) for _ in range(args.repeat)),  # noqa: E731
                                      key=lambda r: r["seconds"])
        rows = {}
        for layout, root in (("files", files), ("jsonl", lines)):
            baseline = best("baseline", root)
            first = best("load", root)
            loader = best("load-noindex", root)
            query = min(cold_query(root, "--no-snapshot") for _ in range(args.repeat))
            shutil.rmtree(cache, ignore_errors=True)
            saved = run_child("save", str(root))
            restart = best("restart", root)
            query_snapshot = min(cold_query(root) for _ in range(args.repeat))
            assert first["records"] == restart["records"] == baseline["records"] == args.n, (first, baseline)
            rows[layout] = {"baseline": baseline, "first": first, "restart": restart, "loader": loader,
                            "query": query, "saved": saved, "query_snapshot": query_snapshot}
            b = baseline["seconds"]
            print(f"{layout}: baseline {b:.2f} s, first load {first['seconds']:.2f} s "
                  f"({first['seconds'] / b:.1f}x), snapshot written in {saved['save_seconds']:.2f} s "
                  f"({saved['snapshot_mb']:.0f} MB), restart {restart['seconds']:.2f} s "
                  f"({restart['seconds'] / b:.2f}x) + first query {1000 * restart['first_query_seconds']:.0f} ms, "
                  f"loader alone {loader['seconds']:.2f} s ({loader['seconds'] / b:.1f}x), cold query "
                  f"{query:.2f} s ({query / b:.1f}x), with the snapshot {query_snapshot:.2f} s "
                  f"({query_snapshot / b:.1f}x), peak RSS {first['max_rss_mb']:.0f} MB "
                  f"(restart {restart['max_rss_mb']:.0f} MB)", file=sys.stderr)
        breakdown = run_child("breakdown", str(lines))
        print("breakdown (jsonl): " + ", ".join(f"{k} {v:.2f} s" for k, v in breakdown.items()
                                                if k not in ("records", "max_rss_mb")), file=sys.stderr)
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
        report = render(args.n, size, rows, latency, args.latency_small, breakdown, args.repeat)
        print(report)
        if args.write_docs:
            write_section(report)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def render(n: int, size: int, rows: dict, latency: dict, small: int, breakdown: dict, repeat: int) -> str:
    out = ["## Pool", "",
           f"`.venv/bin/python bench/pool.py` ({time.strftime('%Y-%m-%d')}; {describe_machine()}). "
           f"{n:,} generated records of ~{size / n:.0f} bytes ({size / 1e6:.0f} MB as JSONL), as {n:,} "
           "single-record `.json` files in 100 directories and as one `.jsonl` file. Each load and query timing is the best "
           f"of {repeat} runs, each a fresh child process (page cache warm); ratios are against the baseline of the same layout from the same "
           "run: list the files and `json.loads` every file/line into dicts.", "",
           "| layout | baseline (json.loads) | first load (validate + index) | loader alone (no index) | "
           "restart from the snapshot | + its first query | cold `soma-lsp query`, no snapshot | "
           "… with the snapshot | snapshot: written in, size | peak RSS: first load, restart |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for layout, r in rows.items():
        b = r["baseline"]["seconds"]
        cell = lambda s: f"{s:.2f} s ({s / b:.2f}×)"  # noqa: E731
        out.append(f"| {'100k files' if layout == 'files' and n == 100_000 else layout} | {b:.2f} s | "
                   f"{cell(r['first']['seconds'])} | {cell(r['loader']['seconds'])} | "
                   f"{cell(r['restart']['seconds'])} | {1000 * r['restart']['first_query_seconds']:.0f} ms | "
                   f"{cell(r['query'])} | {cell(r['query_snapshot'])} | {r['saved']['save_seconds']:.2f} s, "
                   f"{r['saved']['snapshot_mb']:.0f} MB | {r['first']['max_rss_mb']:.0f} / "
                   f"{r['restart']['max_rss_mb']:.0f} MB |")
    b = rows["jsonl"]["baseline"]["seconds"]
    out += ["", "Targets: first load ≤ 5× baseline; restart ≤ 1×; cold query ≤ 5×. A cold query with the "
                "snapshot in place is the restart plus the interpreter and imports (about 0.3 s here); "
                "without it, the first load.", "",
            "Where a first load goes (the `.jsonl` layout, one child, stage by stage): "
            f"read + `orjson.loads` every line {breakdown['decode_orjson']:.2f} s "
            f"({breakdown['decode_orjson'] / b:.1f}×), `parse_record` on those dicts {breakdown['parse_record']:.2f} s "
            f"({breakdown['parse_record'] / b:.1f}×), `LiveIndex(records)` {breakdown['index']:.2f} s "
            f"({breakdown['index'] / b:.1f}×); the whole loader without an index {breakdown['loader_no_index']:.2f} s "
            f"({breakdown['loader_no_index'] / b:.1f}×).", "",
            "Change latency (a record file rewritten → the index returns the new record; single-record files):", "",
            "| records | through `PoolWatcher` (watchfiles, debounce 50 ms, step 10 ms), median / p90 | "
            "`LivePool.apply([path])` alone, median / p90 |", "|---|---|---|"]
    for count, r in latency.items():
        out.append(f"| {count:,} | {r['watched']['median_ms']:.1f} / {r['watched']['p90_ms']:.1f} ms | "
                   f"{r['apply']['median_ms']:.2f} / {r['apply']['p90_ms']:.2f} ms |")
    w_small, w_big = latency[small]["watched"]["median_ms"], latency[n]["watched"]["median_ms"]
    out += ["", f"Target: ≤ 50 ms, and the {n // 1000}k figure within 2× of the {small // 1000}k one "
                f"(here {w_big / w_small:.2f}×).", ""]
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
