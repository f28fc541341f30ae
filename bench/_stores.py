"""Big generated pools, built once and kept: a 1M-record pool takes minutes to write (≈ 1.1 GB of JSONL,
≈ 3 GB of MLflow SQLite), so every benchmark that measures at that size reuses the same files.

They live under the worktree's `.cache/bench/` (gitignored), or under the directory a benchmark's
`--pools DIR` names. Each store is built in a temporary sibling and renamed into place when complete,
so an interrupted build is never mistaken for a store (it is built again next time).

* `corpus_jsonl(n)` — `_corpus.generate_mappings(n)` as one JSONL file (what `bench/lsp.py` and
  `bench/rank.py` generate; record i is the same at every n);
* `mlflow_sqlite(n)` — an MLflow SQLite store of n runs (`write_mlflow_store`: the schema from the real
  mlflow client, the runs inserted as rows);
* `cached(name, build)` — any other store, built by `build(directory)` once.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _corpus import generate_mappings  # noqa: E402

CACHE = REPO / ".cache" / "bench"
ENV = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "SOMA_POOL"))}
MLFLOW_WORDS = "rope theta warmup cosine decay batch gradient clip attention rotary embedding dropout adamw bf16".split()
ROWS_AT_ONCE = 20_000  # runs inserted per transaction: bounded memory at any n


def pools_dir(pools: Path | None = None) -> Path:
    """Where stores are kept: `--pools DIR` when given, else the worktree's `.cache/bench/`."""
    return Path(pools).resolve() if pools is not None else CACHE


def cached(name: str, build: Callable[[Path], None], pools: Path | None = None) -> Path:
    """The directory `name` under `pools_dir(pools)`, made by `build(directory)` unless already complete."""
    final = pools_dir(pools) / name
    if final.is_dir():
        return final
    partial = final.with_name(f".{name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        build(partial)
        partial.rename(final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final


def corpus_jsonl(n: int, pools: Path | None = None) -> Path:
    """`runs.jsonl` holding `generate_mappings(n)`, one record a line."""
    def build(directory: Path) -> None:
        with open(directory / "runs.jsonl", "wb") as out:
            for mapping in generate_mappings(n):
                out.write(orjson.dumps(mapping) + b"\n")
    return cached(f"corpus-jsonl-{n}", build, pools) / "runs.jsonl"


def mlflow_sqlite(n: int, pools: Path | None = None) -> Path:
    """`mlflow.db`, an MLflow SQLite store of n runs (see `write_mlflow_store`)."""
    return cached(f"mlflow-sqlite-{n}", lambda d: write_mlflow_store(d / "mlflow.db", n, d), pools) / "mlflow.db"


def write_mlflow_store(db: Path, n: int, home: Path) -> None:
    """The schema from the real mlflow client (one run logged), then `n` runs as rows — logging them
    through the client takes ≈ 15 s per 1000 —, each with a run name, a note, a git commit, 3 other tags,
    4 params and 3 latest metrics; inserted ROWS_AT_ONCE runs per transaction."""
    env = dict(ENV, HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), MLFLOW_DISABLE_TELEMETRY="true",
               DO_NOT_TRACK="1")
    subprocess.run([sys.executable, "-c", "import mlflow,sys; mlflow.set_tracking_uri(sys.argv[1]); "
                    "mlflow.set_experiment('bench'); mlflow.start_run(run_name='schema').__exit__(None,None,None)",
                    f"sqlite:///{db}"], env=env, check=True, cwd=home, capture_output=True)
    with sqlite3.connect(db) as c:
        experiment = c.execute("SELECT experiment_id FROM experiments WHERE name = 'bench'").fetchone()[0]
        for first in range(0, n, ROWS_AT_ONCE):
            _insert_runs(c, range(first, min(n, first + ROWS_AT_ONCE)), experiment)
            c.commit()


def _insert_runs(c: sqlite3.Connection, numbers: range, experiment: str) -> None:
    runs, tags, params, metrics = [], [], [], []
    for i in numbers:
        run = uuid.uuid4().hex
        start = 1_700_000_000_000 + i * 60_000
        runs.append((run, f"run-{i}", "LOCAL", "train.py", "", "bench", ("FINISHED", "FAILED", "KILLED")[i % 3],
                     start, start + 30_000, "", "active", "", experiment))
        note = " ".join(MLFLOW_WORDS[(i + k) % len(MLFLOW_WORDS)] for k in range(12))
        tags += [("mlflow.runName", f"run-{i}", run), ("mlflow.note.content", note, run),
                 ("mlflow.source.git.commit", f"{i % 2000:040x}", run), ("team", "nlp", run),
                 ("soma.code", f"model/m{i % 50}.py::Block{i % 7}", run), ("mlflow.user", "bench", run)]
        params += [("lr", str(1e-4 * (1 + i % 9)), run), ("rope_theta", str(10000 * (1 + i % 50)), run),
                   ("layers", str(12 + i % 4), run), ("optimizer", "adamw", run)]
        metrics += [(key, float(i % 97) / 10, start, 100, 0, run) for key in ("val_loss", "acc", "ppl")]
    c.executemany("INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, "
                  "status, start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id) "
                  "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", runs)
    c.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?,?,?)", tags)
    c.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?,?,?)", params)
    c.executemany("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                  "VALUES (?,?,?,?,?,?)", metrics)


def main() -> None:
    """Build stores ahead of the benchmarks: `python bench/_stores.py [--pools DIR] jsonl:1000000 mlflow:1000000`."""
    import argparse
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--pools", type=Path)
    parser.add_argument("stores", nargs="+", help="jsonl:N or mlflow:N")
    args = parser.parse_args()
    makers = {"jsonl": corpus_jsonl, "mlflow": mlflow_sqlite}
    for store in args.stores:
        kind, n = store.split(":")
        path = makers[kind](int(n), args.pools)
        print(f"{store}: {path} ({path.stat().st_size / 1e9:.2f} GB)", flush=True)


if __name__ == "__main__":
    main()
