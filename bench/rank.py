"""Retrieval benchmark: soma's `LiveIndex` against bm25s on generated pools (issue 2, item 8).

    .venv/bin/python bench/rank.py                    # N = 10k, 100k, 1M (several minutes)
    .venv/bin/python bench/rank.py --quick            # smoke run on a small pool
    .venv/bin/python bench/rank.py --sizes 100000,1000000 --runs 5 --mem-sizes ''

The pool of each size is `_stores.corpus_jsonl(N)` (built once, kept under `.cache/bench/` or `--pools DIR`),
read and validated with `parse_record` as the loader does.

Per pool size N it reports
* build: soma `LiveIndex(records)` end to end (text → index: it tokenizes inside), producing bm25s's
  input (soma's tokenizer + vocabulary ids, with soma's field repetition), and `bm25s.BM25.index` on
  those ids; ratios against bm25s's input + index and against its index alone;
* query latency p50/p99 for 3-term and 40-term queries: soma's full four-term `rank` (text,
  architecture bag of 5 components, `now`, limit 10), soma lexical-only `rank` (for reference),
  bm25s `get_scores` + numpy `argpartition` top-10, and bm25s `retrieve(k=10)`; `--runs` times over
  (each run `--rounds` passes over the queries), every run's ratios to `retrieve` reported, not the best;
* peak and steady memory while indexing (at the sizes of `--mem-sizes`), each system in its own
  forked child: peak = VmHWM − RSS before indexing (VmHWM reset via /proc/self/clear_refs just
  before), steady = RSS after indexing (after gc and malloc_trim) − RSS before;
* a cross-check that soma's lexical-only top-10 equals bm25s's top-10 (ties aside).
Ratios are soma / bm25s from the same run.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bm25s  # noqa: E402
from bm25s.tokenization import Tokenized  # noqa: E402

import orjson  # noqa: E402

from _corpus import NOW, generate_queries, iter_fields  # noqa: E402
from _stores import corpus_jsonl  # noqa: E402
from soma_lsp.gcpause import collector_paused  # noqa: E402
from soma_lsp.records import parse_record  # noqa: E402
from soma_lsp.retrieval import LiveIndex, RetrievalQuery, tokenize  # noqa: E402
from soma_lsp.retrieval.index import tuning  # noqa: E402

# What is measured is a ranking computed, as for a question never asked: no answer kept, and no
# query's bm25 reused by the next (a query's full and lexical-only ranks share their words).
tuning.ANSWERS_KEPT = tuning.APPROXIMATIONS_KEPT = 0

# bm25s's documents are tokenized with soma's fastest tokenizer of a single text (the bag of docs/spec.md §2.1's
# `tokenize`; `document_terms`, when the soma_lsp measured has it): a baseline not slowed by a slower tokenizer
DOC_TOKENIZE = getattr(importlib.import_module("soma_lsp.retrieval.tokenize"), "document_terms", tokenize)
LEXICAL_ONLY = {"lexical": 1.0, "structural": 0.0, "recency": 0.0, "importance": 0.0}
K = 10


# -- memory ---------------------------------------------------------------------------------------

def _status_kb() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0])
    return out


def _settle() -> int:
    """RSS in MiB after a full gc and returning freed heap to the OS."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
    return _status_kb()["VmRSS"] // 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _in_child(fn) -> dict:
    """Run fn() in a forked child (sharing the parent's pool copy-on-write); return its JSON result."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            payload = json.dumps(fn())
        except BaseException as exc:  # report, never fall back into the parent's code
            payload = json.dumps({"error": repr(exc)})
        with os.fdopen(write_fd, "w") as w:
            w.write(payload)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as r:
        data = r.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def _measure_build(build) -> dict:
    before = _settle()
    _reset_peak()
    t0 = time.perf_counter()
    index = build()
    seconds = time.perf_counter() - t0
    peak = _status_kb()["VmHWM"] // 1024
    after = _settle()
    del index
    return {"rss_before_mib": before, "peak_mib": peak, "rss_after_mib": after,
            "peak_delta_mib": peak - before, "steady_delta_mib": after - before, "build_s": seconds}


# -- building ------------------------------------------------------------------------------------

def stored_records(n: int, pools: Path | None) -> list:
    """The records of `_stores.corpus_jsonl(n)` (`_corpus.generate_mappings(n)` as JSONL), read back as
    the loader reads a pool (decode, `parse_record`)."""
    with open(corpus_jsonl(n, pools), "rb") as lines, collector_paused():
        return [parse_record(orjson.loads(line)) for line in lines]


def bm25s_input(records) -> tuple[list[list[int]], dict[str, int], float, float]:
    """Token ids per record (name ×3, headline ×2, notes and details once) and the vocabulary;
    also the seconds spent in `tokenize` alone and in the whole conversion."""
    vocab: dict[str, int] = {}
    ids: list[list[int]] = []
    t_tok = 0.0
    perf = time.perf_counter
    t0 = perf()
    for record in records:
        doc: list[int] = []
        for text, repeats in iter_fields(record):
            if not text:
                continue
            s = perf()
            terms = DOC_TOKENIZE(text)
            t_tok += perf() - s
            field = [vocab.setdefault(t, len(vocab)) for t in terms]
            doc.extend(field * repeats)
        ids.append(doc)
    return ids, vocab, t_tok, perf() - t0


def bm25s_build(ids, vocab) -> bm25s.BM25:
    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75, backend="numpy")
    retriever.index(Tokenized(ids=ids, vocab=dict(vocab)), show_progress=False)
    return retriever


# -- querying ------------------------------------------------------------------------------------

def bm25s_topk(retriever: bm25s.BM25, terms: list[str], k: int = K) -> np.ndarray:
    scores = retriever.get_scores(terms)
    k = min(k, scores.size)
    top = np.argpartition(scores, -k)[-k:]
    return top[np.argsort(-scores[top], kind="stable")]


def bm25s_retrieve(retriever: bm25s.BM25, terms: list[str], k: int = K):
    return retriever.retrieve([terms], k=k, show_progress=False, n_threads=0)


def time_queries(index: LiveIndex, retriever: bm25s.BM25, queries, rounds: int) -> dict[str, np.ndarray]:
    """Latency samples (ms) per system; systems interleaved per query so they share the noise, in a
    seeded random order per query: in a fixed order one system always runs right after another on
    the same query and data (bm25s retrieve after get_scores), on warm caches (at 100k that made
    retrieve ~8% faster, and soma's full rank, first after the previous query's bm25s, ~10% slower)."""
    full = [RetrievalQuery(text=q.text, architecture=list(q.architecture), now=NOW, limit=K) for q in queries]
    lexical = [RetrievalQuery(text=q.text, limit=K, weights=LEXICAL_ONLY) for q in queries]
    terms = [list(q.terms) for q in queries]
    runs = {
        "soma_full": lambda i: index.rank(full[i]),
        "soma_lexical": lambda i: index.rank(lexical[i]),
        "bm25s_get_scores": lambda i: bm25s_topk(retriever, terms[i]),
        "bm25s_retrieve": lambda i: bm25s_retrieve(retriever, terms[i]),
    }
    for fn in runs.values():  # warm-up
        for i in range(min(3, len(queries))):
            fn(i)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    perf, order, shuffle = time.perf_counter, list(runs), random.Random(len(queries)).shuffle
    for _ in range(rounds):
        for i in range(len(queries)):
            shuffle(order)
            for name in order:
                t0 = perf()
                runs[name](i)
                samples[name].append((perf() - t0) * 1e3)
    return {name: np.asarray(v) for name, v in samples.items()}


def cross_check(index: LiveIndex, retriever: bm25s.BM25, queries) -> dict:
    """soma lexical-only top-10 vs bm25s top-10: the bm25s scores of soma's top-10, in soma's order,
    must equal bm25s's own sorted top-10 scores (so order matches up to ties), and soma's lexical
    must be a constant multiple of bm25s's score (no (k1+1) in Lucene; soma divides by the max)."""
    checked, identical, ok = 0, 0, True
    problems = []
    for q in queries:
        ranked = index.rank(RetrievalQuery(text=q.text, limit=K, weights=LEXICAL_ONLY))
        scores = retriever.get_scores(list(q.terms))
        ours = np.array([int(r.record.id.split("-")[1]) for r in ranked])  # record i sits at slot i
        theirs = bm25s_topk(retriever, list(q.terms))
        lex = np.array([r.components.lexical for r in ranked])
        positive = scores[ours] > 0
        same_scores = np.allclose(scores[ours], np.sort(scores)[::-1][:K], rtol=2e-5, atol=1e-7)
        factor = lex[positive] / scores[ours][positive]
        proportional = factor.size == 0 or np.allclose(factor, factor[0], rtol=2e-5)
        checked += 1
        identical += bool(np.array_equal(ours, theirs))
        if not (same_scores and proportional):
            ok = False
            problems.append({"query": q.text[:80], "ours": ours.tolist(), "theirs": theirs.tolist()})
    return {"queries": checked, "identical_id_lists": identical, "order_matches_up_to_ties": ok,
            "problems": problems[:3]}


# -- reporting -----------------------------------------------------------------------------------

def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                  if line.startswith("model name")), platform.processor())
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "numpy": np.__version__, "bm25s": bm25s.__version__,
            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}


def pct(a: np.ndarray) -> tuple[float, float]:
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def human(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else (
        f"{n // 1000}k" if n % 1000 == 0 else str(n))


def run_size(n: int, args) -> dict:
    out: dict = {"n": n}
    t0 = time.perf_counter()
    records = stored_records(n, args.pools)
    out["read_s"] = time.perf_counter() - t0
    log(f"[{human(n)}] read {n} records in {out['read_s']:.1f}s")

    ids, vocab, t_tok, t_ids = bm25s_input(records)
    out["tokens"] = int(sum(len(d) for d in ids))
    out["vocabulary"] = len(vocab)
    log(f"[{human(n)}] bm25s input: {out['tokens']} tokens, {len(vocab)} terms, {t_ids:.1f}s "
        f"(tokenize {t_tok:.1f}s)")

    if n in args.mem_sizes:
        out["memory"] = {
            "soma": _in_child(lambda: _measure_build(lambda: LiveIndex(records))),
            "bm25s": _in_child(lambda: _measure_build(lambda: bm25s_build(ids, vocab))),
        }
        log(f"[{human(n)}] memory: {json.dumps(out['memory'])}")

    gc.collect()
    t0 = time.perf_counter()
    index = LiveIndex(records)
    soma_build = time.perf_counter() - t0
    index.warm([])  # what the server does at the end of every load (`PoolService._warm`): the bit planes among it
    gc.collect()
    t0 = time.perf_counter()
    retriever = bm25s_build(ids, vocab)
    bm25s_index = time.perf_counter() - t0
    out["build"] = {
        "soma_end_to_end_s": soma_build,
        "bm25s_input_tokenize_s": t_tok,
        "bm25s_input_s": t_ids,
        "bm25s_index_s": bm25s_index,
        "bm25s_end_to_end_s": t_ids + bm25s_index,
    }
    b = out["build"]
    b["ratio_end_to_end"] = b["soma_end_to_end_s"] / b["bm25s_end_to_end_s"]
    b["ratio_vs_index_alone"] = b["soma_end_to_end_s"] / b["bm25s_index_s"]
    log(f"[{human(n)}] build: soma {soma_build:.2f}s | bm25s index {bm25s_index:.2f}s (+ input "
        f"{t_ids:.2f}s, of which tokenize {t_tok:.2f}s) | ratios vs bm25s e2e {b['ratio_end_to_end']:.2f}, "
        f"vs bm25s index alone {b['ratio_vs_index_alone']:.2f}")
    del ids
    gc.collect()
    gc.freeze()  # the pool's objects are long-lived: keep full collections out of the timings

    out["cross_check"] = cross_check(index, retriever, generate_queries(5, 3, seed=7)
                                     + generate_queries(5, 40, seed=7))
    log(f"[{human(n)}] cross-check: {out['cross_check']}")

    out["latency"] = {n_terms: [] for n_terms in (3, 40)}
    for run in range(args.runs):
        for n_terms in (3, 40):
            samples = time_queries(index, retriever, generate_queries(args.queries, n_terms), args.rounds)
            row = {name: dict(zip(("p50_ms", "p99_ms"), pct(v))) for name, v in samples.items()}
            for system in ("soma_full", "soma_lexical"):
                for q in ("p50", "p99"):
                    row[f"{system}_{q}_ratio"] = row[system][f"{q}_ms"] / row["bm25s_retrieve"][f"{q}_ms"]
            row["samples"] = int(samples["soma_full"].size)
            row["load"] = os.getloadavg()[0]
            out["latency"][n_terms].append(row)
            log(f"[{human(n)}] run {run + 1} {n_terms}-term: " + ", ".join(
                f"{k} {v['p50_ms']:.2f}/{v['p99_ms']:.2f}" for k, v in row.items() if isinstance(v, dict))
                + f" | full/retrieve p50 {row['soma_full_p50_ratio']:.2f} p99 {row['soma_full_p99_ratio']:.2f}"
                + f" | load {row['load']:.1f}")
    gc.unfreeze()
    del index, retriever, records
    gc.collect()
    return out


def markdown(results: list[dict], info: dict, command: str) -> str:
    lines = [f"Command: `{command}`", "",
             f"Machine: {info['nproc']} cores, {info['cpu']}; Python {info['python']}, numpy "
             f"{info['numpy']}, bm25s {info['bm25s']}; OPENBLAS_CORETYPE={info['OPENBLAS_CORETYPE']}, "
             f"OPENBLAS_L2_SIZE={info['OPENBLAS_L2_SIZE']}", ""]
    lines += ["### Build (seconds)", "",
              "| N | tokens | soma `LiveIndex(records)` (text → index) | bm25s input (soma tokenize + ids) "
              "| bm25s index (ids → index) | ratio vs bm25s input + index | ratio vs bm25s index alone |",
              "|---|---|---|---|---|---|---|"]
    for r in results:
        b = r["build"]
        lines.append(f"| {human(r['n'])} | {r['tokens']:,} | {b['soma_end_to_end_s']:.2f} | {b['bm25s_input_s']:.2f} "
                     f"| {b['bm25s_index_s']:.2f} | {b['ratio_end_to_end']:.2f} | {b['ratio_vs_index_alone']:.2f} |")
    lines += ["", "### Query latency: soma ÷ bm25s `retrieve` (k=10), every run", "",
              "Each run: the queries × rounds, the systems interleaved per query in a shuffled order; "
              "p50 and p99 of each system in that run, then their ratio. Load: the 1-minute load average "
              "at the end of the run.", "",
              "| N | terms | run | soma full p50 / p99 (ms) | soma lexical-only | bm25s retrieve "
              "| bm25s get_scores+argpartition | full ÷ retrieve p50 | p99 | lexical ÷ retrieve p50 | p99 | load |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for n_terms, runs in r["latency"].items():
            for i, row in enumerate(runs, 1):
                cell = lambda k: f"{row[k]['p50_ms']:.2f} / {row[k]['p99_ms']:.2f}"  # noqa: E731
                lines.append(f"| {human(r['n'])} | {n_terms} | {i} | {cell('soma_full')} | {cell('soma_lexical')} "
                             f"| {cell('bm25s_retrieve')} | {cell('bm25s_get_scores')} "
                             f"| {row['soma_full_p50_ratio']:.2f} | {row['soma_full_p99_ratio']:.2f} "
                             f"| {row['soma_lexical_p50_ratio']:.2f} | {row['soma_lexical_p99_ratio']:.2f} "
                             f"| {row['load']:.1f} |")
    lines += ["", "| N | terms | full ÷ retrieve p50: median (range) | p99: median (range) |", "|---|---|---|---|"]
    for r in results:
        for n_terms, runs in r["latency"].items():
            spread = lambda key: (f"{np.median([x[key] for x in runs]):.2f} "  # noqa: E731
                                  f"({min(x[key] for x in runs):.2f}–{max(x[key] for x in runs):.2f})")
            lines.append(f"| {human(r['n'])} | {n_terms} | {spread('soma_full_p50_ratio')} "
                         f"| {spread('soma_full_p99_ratio')} |")
    mem = [r for r in results if "memory" in r]
    if mem:
        lines += ["", "### Memory while indexing (MiB)", "",
                  "| N | system | RSS before | peak − before | steady − before | build in child (s) |",
                  "|---|---|---|---|---|---|"]
        for r in mem:
            for system in ("soma", "bm25s"):
                m = r["memory"][system]
                if "error" in m:
                    lines.append(f"| {human(r['n'])} | {system} | error: {m['error']} | | | |")
                    continue
                lines.append(f"| {human(r['n'])} | {system} | {m['rss_before_mib']:,} | {m['peak_delta_mib']:,} "
                             f"| {m['steady_delta_mib']:,} | {m['build_s']:.1f} |")
            s, b = r["memory"]["soma"], r["memory"]["bm25s"]
            if "error" not in s and "error" not in b:
                lines.append(f"| {human(r['n'])} | ratio soma/bm25s | | {s['peak_delta_mib'] / b['peak_delta_mib']:.2f} "
                             f"| {s['steady_delta_mib'] / max(b['steady_delta_mib'], 1):.2f} | |")
    lines += ["", "Cross-check (soma lexical-only top-10 vs bm25s top-10, 10 queries per size): " + "; ".join(
        f"{human(r['n'])}: {'order matches' if r['cross_check']['order_matches_up_to_ties'] else 'MISMATCH'}"
        f" ({r['cross_check']['identical_id_lists']}/{r['cross_check']['queries']} identical id lists)"
        for r in results)]
    return "\n".join(lines)


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated pool sizes")
    parser.add_argument("--mem-sizes", default="1000000",
                        help="sizes at which to measure indexing memory in forked children ('' for none)")
    parser.add_argument("--queries", type=int, default=50, help="queries per kind (3-term, 40-term)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the queries, per run")
    parser.add_argument("--runs", type=int, default=3, help="latency runs per size, each reported")
    parser.add_argument("--pools", type=Path, help="where generated pools are kept (default: .cache/bench/)")
    parser.add_argument("--quick", action="store_true", help="smoke run: N=2000, 10 queries, 1 round")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.mem_sizes, args.queries, args.rounds, args.runs = "2000", "2000", 10, 1, 2
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.mem_sizes = {int(s) for s in args.mem_sizes.split(",") if s}
    info = machine()
    log(f"machine: {info}")
    results = [run_size(n, args) for n in args.sizes]
    command = " ".join(["python", "bench/rank.py", *(argv if argv is not None else sys.argv[1:])])
    print(markdown(results, info, command))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "results": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
