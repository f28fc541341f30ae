"""Ties from git at scale: N records over C distinct commits, first load and restart, as processes.

    python bench/git_ties.py [--records 10000] [--commits 2000] [--files 12] [--repeat 3]

Builds a repository with `git fast-import` (C commits, each changing one or two functions of
`--files` Python files of ~40 functions), then times, each in a fresh interpreter as the server's
background work would run it (interpreter start and imports included):

* **first load** — empty commit cache: resolve the shas, one `git log -p` for every diff, one
  `git cat-file --batch` for every file version, definitions of each, today's tree, the cache saved;
* **restart** — the same with the cache from the first load (only today's tree is read again);
* **baseline** — `git log -p -U0` of the same commits alone (what reading the diffs costs git).

Targets (issue 19): 10k records over 2k commits ≤ 10 s first load, ≤ 0.5 s restart, on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import sys, time
started = time.perf_counter()
from soma_lsp.knobs import knob_settings
from soma_lsp.pool.commit_ties import CommitCache, CommitRun, commit_ties
from soma_lsp.pool.gitrepo import GitRepo
root, runs_file, cache_file = sys.argv[1:4]
runs = []
for line in open(runs_file):
    rid, sha, outcome, text = line.rstrip("\\n").split("\\t")
    runs.append(CommitRun(rid, sha, dead_end=outcome == "dead", succeeded=outcome == "ok",
                          settings=knob_settings(text)))
imported = time.perf_counter()
repo, _ = GitRepo.find(root)
cache = CommitCache(cache_file)
ties = commit_ties(repo, runs, cache)
cache.save()
print(len(ties), time.perf_counter() - imported)
"""


def function(i: int, version: int) -> str:
    return (f"def step_{i}(model, batch, lr={version}e-4):\n"
            f"    loss = model(batch) * {version}\n"
            f"    for k in range({i % 7 + 1}):\n"
            f"        loss = loss + k * lr\n"
            f"    return loss\n\n")


def file_text(versions: list[int]) -> str:
    body = "".join(function(i, v) for i, v in enumerate(versions))
    return f"class Trainer{len(versions)}:\n    pass\n\n\n{body}"


def build_repo(root: str, commits: int, files: int, seed: int = 1) -> list[str]:
    """A repository of `commits` commits made by `git fast-import`; returns their shas, oldest first."""
    rng = random.Random(seed)
    subprocess.run(["git", "init", "-q", "-b", "main", root], check=True)
    versions = [[0] * 40 for _ in range(files)]
    stream = []
    for c in range(commits):
        touched = {rng.randrange(files) for _ in range(rng.choice((1, 1, 2)))}
        stream.append(f"commit refs/heads/main\nmark :{c + 1}\n"
                      f"committer bench <b@example.com> {1_700_000_000 + c * 60} +0000\n"
                      f"data {len(f'c{c}')}\nc{c}\n")
        if c:
            stream.append(f"from :{c}\n")
        for f in (touched if c else range(files)):
            for _ in range(rng.choice((1, 2))):
                versions[f][rng.randrange(40)] += 1
            text = file_text(versions[f])
            stream.append(f"M 644 inline src/mod_{f}.py\ndata {len(text.encode())}\n{text}\n")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="".join(stream).encode(), check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=root, check=True)
    return subprocess.run(["git", "rev-list", "--reverse", "main"], cwd=root, check=True, capture_output=True,
                          text=True).stdout.split()


def write_runs(path: str, shas: list[str], records: int, seed: int = 2) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(records):
            sha = shas[i % len(shas)]
            outcome = rng.choice(("ok", "ok", "dead", "other"))
            f.write(f"run-{i}\t{sha[:rng.choice((7, 12, 40))]}\t{outcome}\tlr={rng.choice((1, 3))}e-4 seed={i}\n")


def child(root: str, runs: str, cache: str) -> tuple[int, float, float]:
    """(ties, the whole process's seconds, the seconds after imports — what a running server spends)."""
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, root, runs, cache], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}).stdout.split()
    return int(out[0]), time.perf_counter() - started, float(out[1])


def baseline(root: str, shas: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(["git", "--no-pager", "log", "--no-walk=unsorted", "--stdin", "-p", "-U0", "-M"], cwd=root,
                   input="\n".join(shas).encode(), check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=2_000)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "repo")
        shas = build_repo(root, args.commits, args.files)
        runs = os.path.join(tmp, "runs.tsv")
        write_runs(runs, shas, args.records)
        firsts, restarts, bases, ties = [], [], [], 0
        for r in range(args.repeat):
            cache = os.path.join(tmp, f"commits-{r}.json")
            bases.append(baseline(root, shas))
            ties, *first = child(root, runs, cache)
            firsts.append(first)
            restarts.append(child(root, runs, cache)[1:])
        base = statistics.median(bases)
        print(f"{args.records} records over {len(shas)} commits, {args.files} files; {ties} ties; "
              f"median of {args.repeat} runs, each a fresh process (whole / after imports, as in a server)")
        print(f"baseline  git log -p of every commit  {base:7.3f} s")
        for name, runs_ in (("first load (empty cache)", firsts), ("restart (cache kept)    ", restarts)):
            whole, part = (statistics.median(r[i] for r in runs_) for i in (0, 1))
            print(f"{name}              {whole:7.3f} s  {whole / base:5.1f}× baseline; "
                  f"after imports {part:6.3f} s")


if __name__ == "__main__":
    main()
