"""Tracker pools benchmark (issue 18): an MLflow SQLite store of N runs and a tracking server of M runs.

    .venv/bin/python bench/trackers.py                    # N = 100k (SQLite), M = 10k (server)
    .venv/bin/python bench/trackers.py --n 20000 --m 2000 # smaller smoke run
    .venv/bin/python bench/trackers.py --sqlite-only      # no tracking server

The schema is made by the real mlflow client (one run logged), then N runs are inserted as rows
(logging them through the client takes ≈ 15 s per 1000): each with a run name, a note, a git commit,
3 other tags, 4 params and 3 latest metrics. Every measurement runs in a fresh child process (page cache
warm, Python cold). The SQLite measurements run in `--repeat` rounds, each round all three in turn, and
a ratio is taken within its round (median, min–max); the server's, best of `--repeat`:

* baseline: a plain `sqlite3` read of the same rows (runs, tags, params, latest metrics) into tuples;
* first load: `LivePool(["sqlite:///…"], LiveIndex()).load()` — read, map, validate, index; its CPU
  is the loading process's and, apart, with its child's (a first read shared with a child on an idle
  core, `trackers.mlflow_sqlite_apart`);
* restart: the same with a snapshot saved by a previous process (fingerprints compared, nothing rebuilt);
* new run visible: a run inserted (rows committed by another connection) at a random point of the
  follower's period — `TrackerFollower` polls the database every 0.5 s, and a run arrives whenever —:
  time until the pool has it (median of 5; a run inserted as soon as the last was seen would always
  wait a whole period); the same for a run folder renamed into a watched file store
  (`fixtures/workspace/mlruns`);
* server: `mlflow server` over a copy of an M-run store, once per `--workers` count (MLflow's default is
  4, as a team runs it; 1 shows what one worker costs); first load over REST, the server's own CPU
  during it (its processes' `/proc` times: a floor of CPU per run × runs ÷ cores under the wall time),
  and one poll's requests and time when nothing is new.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _machine import describe_machine  # noqa: E402
from _stores import mlflow_sqlite, write_mlflow_store  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "SOMA_POOL"))}
ENV["PYTHONPATH"] = os.pathsep.join([str(REPO), ENV.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def child(code: str, *args: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], env=env or ENV, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


BASELINE = """
import json, sqlite3, sys, time
t, cpu = time.perf_counter(), time.process_time()
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
rows = [c.execute(q).fetchall() for q in (
    "SELECT run_uuid, name, status, start_time, end_time, experiment_id FROM runs WHERE lifecycle_stage != 'deleted'",
    "SELECT run_uuid, key, value FROM tags", "SELECT run_uuid, key, value FROM params",
    "SELECT run_uuid, key, value FROM latest_metrics")]
cpu = time.process_time() - cpu
print(json.dumps({"seconds": time.perf_counter() - t, "cpu": cpu, "all_cpu": cpu, "runs": len(rows[0])}))
"""

LOAD = """
import json, resource, sys, time
from soma_lsp.pool import LivePool
from soma_lsp.retrieval import LiveIndex
cache = sys.argv[2] if len(sys.argv) > 2 else None
t, cpu = time.perf_counter(), time.process_time()
pool = LivePool(["sqlite:///" + sys.argv[1]], LiveIndex(), cache_dir=cache)
pool.load()
seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
saved = pool.save_snapshot() if cache and pool.unsaved else False
children = resource.getrusage(resource.RUSAGE_CHILDREN)  # (the child sharing a first read, ended by now)
print(json.dumps({"seconds": seconds, "cpu": cpu, "all_cpu": cpu + children.ru_utime + children.ru_stime,
                  "records": len(pool), "rebuilt": pool.unsaved or saved}))
"""

LATENCY = """
import json, random, sqlite3, sys, time, uuid
from soma_lsp.pool import LivePool
from soma_lsp.pool.trackers.follow import TrackerFollower
from soma_lsp.retrieval import LiveIndex
pool = LivePool(["sqlite:///" + sys.argv[1]], LiveIndex())
pool.load()
times = []
with TrackerFollower(pool, sqlite_seconds=0.5):
    phase = random.Random(5)
    for i in range(5):
        time.sleep(phase.uniform(0, 0.5))
        run = uuid.uuid4().hex
        with sqlite3.connect(sys.argv[1]) as c:
            experiment = c.execute("SELECT experiment_id FROM experiments WHERE name = 'bench'").fetchone()[0]
            c.execute("INSERT INTO runs (run_uuid, name, source_type, status, start_time, lifecycle_stage, "
                      "experiment_id) VALUES (?, 'new', 'LOCAL', 'RUNNING', 1, 'active', ?)", (run, experiment))
        t = time.perf_counter()
        while pool.get(run) is None:
            time.sleep(0.005)
        times.append(time.perf_counter() - t)
print(json.dumps({"median": sorted(times)[2], "max": max(times)}))
"""

FILES_LATENCY = """
import json, shutil, sys, time, uuid
from pathlib import Path
from soma_lsp.pool import LivePool
from soma_lsp.pool.trackers.follow import TrackerFollower
from soma_lsp.retrieval import LiveIndex
store = Path(sys.argv[1])
model = next(p.parent for p in sorted(store.glob("*/*/meta.yaml")))
pool = LivePool([str(store)], LiveIndex())
pool.load()
times = []
with TrackerFollower(pool):
    for i in range(5):
        run = uuid.uuid4().hex
        copy = store.parent / run  # written aside, then renamed in: a run folder appears whole
        shutil.copytree(model, copy)
        meta = copy / "meta.yaml"
        meta.write_text(meta.read_text().replace(model.name, run))
        t = time.perf_counter()
        copy.rename(model.parent / run)
        while pool.get(run) is None:
            time.sleep(0.005)
        times.append(time.perf_counter() - t)
print(json.dumps({"median": sorted(times)[2], "max": max(times)}))
"""

REST = """
import json, sys, threading, time
from soma_lsp.pool import LivePool
from soma_lsp.pool.trackers import mlflow_rest
from soma_lsp.retrieval import LiveIndex
# the time at least one request is waiting for the server's answer (from the request to its body
# read, before decoding): requests overlap (mlflow_rest.CONCURRENCY), so their union, not their sum
asked, waits, lock = threading.local(), [], threading.Lock()
post, decode = mlflow_rest.TrackingServer._post, mlflow_rest._decode
def timed_post(self, *args):
    asked.at = time.perf_counter()
    return post(self, *args)
def timed_decode(body):
    with lock:
        waits.append((asked.at, time.perf_counter()))
    return decode(body)
mlflow_rest.TrackingServer._post, mlflow_rest._decode = timed_post, timed_decode
def union(intervals):
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        total += max(0.0, b - max(a, end))
        end = max(end, b)
    return total
t = time.perf_counter()
pool = LivePool([sys.argv[1]], LiveIndex())
pool.load()
seconds = time.perf_counter() - t
(source,) = pool.trackers
requests, server_seconds = source.requests, union(waits)
before = source.requests
t = time.perf_counter()
problem = pool.sync_tracker(source, "poll")
poll = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "records": len(pool), "poll_seconds": poll, "server_seconds": server_seconds,
                  "requests": requests, "poll_requests": source.requests - before, "problem": problem}))
"""


def best(repeat: int, code: str, *args: str) -> dict:
    runs = [child(code, *args) for _ in range(repeat)]
    return min(runs, key=lambda r: r["seconds"])


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + system) of the live processes in group `pgid` — the tracking server and its
    workers (Linux `/proc`). The server's work is fixed per run whatever the client asks, so its CPU per
    run × runs ÷ the cores it has is the floor under a load's wall time."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def served(repeat: int, pgid: int, url: str) -> dict:
    """The best of `repeat` REST loads, with the server's CPU during that load (`server_cpu`)."""
    runs = []
    for _ in range(repeat):
        before = group_cpu(pgid)
        runs.append(child(REST, url))
        runs[-1]["server_cpu"] = group_cpu(pgid) - before
    return min(runs, key=lambda r: r["seconds"])


def rounds(repeat: int, *measures: tuple[str, ...]) -> list[list[dict]]:
    """Each measure (code, args…) once per round, `repeat` rounds: a ratio is taken within a round, whose
    measures ran in the same minute (the machine's load shifts between minutes)."""
    return [[child(*measure) for measure in measures] for _ in range(repeat)]


def ratio(results: list[list[dict]], i: int, what: str = "seconds") -> str:
    """`median (min–max)` over the rounds of measure i's seconds (or cpu, or all_cpu: with its children's) ÷
    the round's baseline (measure 0)."""
    ratios = sorted(r[i][what] / r[0][what] for r in results)
    return f"{ratios[len(ratios) // 2]:.1f} ({ratios[0]:.1f}–{ratios[-1]:.1f})"


def median(results: list[list[dict]], i: int) -> dict:
    return sorted((r[i] for r in results), key=lambda r: r["seconds"])[len(results) // 2]


def serve(db: Path, home: Path, workers: int):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(ENV, HOME=str(home), MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1")
    process = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}",
                                "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)], env=env, cwd=home,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return process, url
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("mlflow server did not start")


def warm(url: str, workers: int) -> None:
    """A worker's first request imports lazily (seconds): 2 × `workers` requests at once, so that each
    worker has most likely answered one before anything is timed (the best of `--repeat` too)."""
    def ask(_):
        request = urllib.request.Request(url + "/api/2.0/mlflow/runs/search", method="POST",
                                         data=b'{"experiment_ids": ["0", "1"], "max_results": 10}',
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=300).close()
    with ThreadPoolExecutor(2 * workers) as pool:
        list(pool.map(ask, range(2 * workers)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="runs in the SQLite store")
    parser.add_argument("--m", type=int, default=10_000, help="runs behind the tracking server")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", default="1,4", help="the tracking server's worker processes, one server "
                        "each (comma-separated; MLflow's default is 4)")
    parser.add_argument("--pools", type=Path, help="keep the N-run store here and reuse it (`_stores.mlflow_sqlite`)")
    parser.add_argument("--sqlite-only", action="store_true", help="only the SQLite rounds and new-run latencies "
                        "(no tracking server)")
    args = parser.parse_args()
    scratch = REPO / ".cache" / "bench"  # (gitignored) big generated data stays in the checkout
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trackers-", dir=scratch) as tmp:
        tmp = Path(tmp)
        db = tmp / "mlflow.db"
        if args.pools is None:
            write_mlflow_store(db, args.n, tmp)
        else:  # the kept store is only read: the new-run latency below writes to a copy
            kept = mlflow_sqlite(args.n, args.pools)
            shutil.copyfile(kept, db)
        cache = tmp / "cache"
        child(LOAD, str(db), str(cache))  # writes the snapshot
        sqlite = rounds(args.repeat, (BASELINE, str(db)), (LOAD, str(db)), (LOAD, str(db), str(cache)))
        baseline, first, restart = (median(sqlite, i) for i in range(3))
        latency = child(LATENCY, str(db))
        store = tmp / "mlruns"
        shutil.copytree(REPO / "fixtures" / "workspace" / "mlruns", store)
        files_latency = child(FILES_LATENCY, str(store))
        rest = {}
        small = tmp / "server.db"
        if not args.sqlite_only:
            write_mlflow_store(small, args.m, tmp)
        for workers in [] if args.sqlite_only else map(int, args.workers.split(",")):
            process, url = serve(small, tmp, workers)
            try:
                warm(url, workers)
                rest[workers] = served(args.repeat, process.pid, url)
            finally:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(30)
        shutil.rmtree(cache, ignore_errors=True)
    b = baseline["seconds"]
    print(describe_machine())
    print(f"| measurement ({args.n:,} runs in SQLite; {args.m:,} behind a server) | seconds (median of "
          f"{args.repeat}) | × plain sqlite3, same round: wall · CPU · CPU with its child, median (min–max) |")
    print("|---|---|---|")
    print(f"| plain `sqlite3` read of runs, tags, params, latest metrics | {b:.3f} | 1.0 |")
    print(f"| first load (`LivePool.load`, {first['records']:,} records) | {first['seconds']:.2f} | "
          f"{ratio(sqlite, 1)} · {ratio(sqlite, 1, 'cpu')} · {ratio(sqlite, 1, 'all_cpu')} |")
    print(f"| restart from the snapshot (rebuilt: {restart['rebuilt']}) | {restart['seconds']:.2f} | "
          f"{ratio(sqlite, 2)} · {ratio(sqlite, 2, 'cpu')} · {ratio(sqlite, 2, 'all_cpu')} |")
    print(f"| new run visible (follower polling every 0.5 s, runs inserted at random; median / max of 5) | "
          f"{latency['median']:.2f} / {latency['max']:.2f} | |")
    print(f"| new run visible in a file store (`mlruns/`, watched; median / max of 5) | "
          f"{files_latency['median']:.2f} / {files_latency['max']:.2f} | |")
    for workers, run in rest.items():
        client = run["seconds"] - run["server_seconds"]
        print(f"| tracking server, {workers} worker{'s' if workers > 1 else ''}: first load over REST "
              f"({run['records']:,} records, {run['requests']} requests; best of {args.repeat}) | {run['seconds']:.2f} | |")
        print(f"| … of which a request waiting for the server / the client alone | {run['server_seconds']:.2f} / "
              f"{client:.2f} ({client / run['seconds']:.0%}) | |")
        print(f"| … the server's CPU (its processes' user + system; the poll's 3 requests included) | "
              f"{run['server_cpu']:.2f} ({run['server_cpu'] / run['records'] * 1e3:.2f} ms a run) | |")
        print(f"| … a poll that finds nothing ({run['poll_requests']} requests) | {run['poll_seconds']:.3f} | |")
        if run["problem"]:
            print(f"(the server reported: {run['problem']})")


if __name__ == "__main__":
    main()
