"""1M records through a real LSP session (issue 22, point 5): first load, hovers, restart, memory.

    python bench/million.py [--n 1000000] [--hovers 200] [--pools DIR] [--first-start-only] [--profile DIR]

The pool is `_stores.corpus_jsonl(n)` (one JSONL file, built once and kept), linked into a copy of the
fixture workspace as `bench/lsp.py` does. Every figure is of the process a user starts:

* baseline: a fresh `python` that reads the file and `json.loads` every line (interpreter start included);
* first start on an empty `SOMA_CACHE_DIR` (snapshots on, the default): start → first hover with content,
  start → the full result (`soma.poolStatus` no longer indexing), then the server's snapshot on disk;
* hovers once loaded: one per definition of `model/transformer.py` (new scopes, each computed) and
  `--hovers` cycling over its identifiers (revisits), p50 / p99;
* restart on the unchanged pool, from that snapshot: start → first hover, start → full result;
* memory: the server's peak RSS (VmHWM) and its RSS once loaded, sampled from /proc, against the
  pool's bytes — the peak taken once the server has settled (idle for `SETTLED_S`: the
  background work after a load, the snapshot and the levers' evidence table, runs after the full result
  and after the snapshot is on disk), and the settled RSS reported too.

Progress lines (with the server's RSS, and each new scope's hover in order) go to stderr as they
happen, so a run cut short still tells where it got; the Markdown summary goes to stdout at the end.
`--profile DIR` samples every thread of the server with py-spy during the hovers (py-spy pauses the
server to sample: that run's times are not figures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_seconds, describe_machine  # noqa: E402
from _stores import corpus_jsonl  # noqa: E402
from lsp import SERVER, first_hover, make_workspace, percentile, scope_positions, timed_hovers  # noqa: E402

from soma_lsp.client import start  # noqa: E402

#: The server has settled when it used less than `SETTLED_CPU` of a core over `SETTLED_S` seconds
#: (its background work done: RSS alone pauses while the snapshot and the evidence table take turns).
SETTLED_S, SETTLED_CPU = 5.0, 0.05

BASELINE = "import json, sys\nwith open(sys.argv[1], 'rb') as f:\n    n = sum(1 for line in f if json.loads(line))\n"


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB (empty once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in status)
                    if k in ("VmRSS", "VmHWM")}
    except OSError:
        return {}


class Clock:
    """Seconds since a start, logged with the server's memory."""

    def __init__(self, label: str, pid: int, started: float) -> None:
        self.label, self.pid, self.started = label, pid, started

    def mark(self, event: str) -> float:
        elapsed = time.perf_counter() - self.started
        mem = memory_kb(self.pid)
        print(f"{time.strftime('%H:%M:%S')} [{self.label}] {event} at {elapsed:.1f} s; server RSS "
              f"{mem.get('VmRSS', 0) / 2**20:.2f} GiB, peak {mem.get('VmHWM', 0) / 2**20:.2f} GiB; "
              f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        return elapsed


async def settled_rss_kb(pid: int) -> int:
    """The server's RSS once it idles (its background work after the load done), in KiB."""
    before = cpu_seconds(pid)
    while True:
        await asyncio.sleep(SETTLED_S)
        now = cpu_seconds(pid)
        if now - before < SETTLED_CPU * SETTLED_S:
            return memory_kb(pid).get("VmRSS", 0)
        before = now


@contextlib.contextmanager
def sampled(pid: int, profile: Path | None, name: str):
    """py-spy (not a dependency: on the PATH when `--profile` is given) sampling every thread of the
    server while the block runs, as collapsed stacks in `profile/name.txt`: where a hover's time goes
    through LSP, the background work beside it included."""
    if profile is None:
        yield
        return
    profile.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--threads", "--rate", "1000", "--format", "raw",
                            "--output", str(profile / f"{name}.txt")], stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attached
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait()


async def session(workspace: Path, label: str, hovers: int, profile: Path | None = None) -> dict:
    """Start a server on the workspace; time its first hover and its full result; hover once loaded."""
    started = time.perf_counter()
    client = await start(SERVER, workspace)
    clock = Clock(label, client._server.pid, started)
    try:
        uri, positions = await first_hover(client, workspace)
        out = {"first_hover_s": clock.mark("first hover with content")}
        status = await client.wait_for_pool(polls=10**6, interval=0.2)
        out["full_s"] = clock.mark(f"full result ({status.get('records')} records)")
        out.update(records=status.get("records"), restored=status.get("restored"),
                   loaded_rss_kb=memory_kb(clock.pid).get("VmRSS", 0))
        scopes = scope_positions(workspace / "model" / "transformer.py")
        tag = label.replace(" ", "-")
        with sampled(clock.pid, profile, f"{tag}-scopes"):
            out["scope_ms"] = await timed_hovers(client, uri, scopes, len(scopes))
        print(f"[{label}] new scopes, ms in order: {' '.join(f'{ms:.1f}' for ms in out['scope_ms'])}",
              file=sys.stderr, flush=True)
        with sampled(clock.pid, profile, f"{tag}-revisits"):
            out["hover_ms"] = await timed_hovers(client, uri, positions, hovers)
        clock.mark("hovers done")
        cache = Path(os.environ["SOMA_CACHE_DIR"])
        while not list(cache.glob("*.snapshot")):
            await asyncio.sleep(0.2)
        clock.mark("snapshot on disk")
        out["settled_rss_kb"] = await settled_rss_kb(clock.pid)
        clock.mark("settled")
        out["peak_rss_kb"] = memory_kb(clock.pid).get("VmHWM", 0)
    finally:
        await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--hovers", type=int, default=200)
    parser.add_argument("--pools", type=Path, help="where generated pools are kept (default: .cache/bench/)")
    parser.add_argument("--profile", type=Path, help="sample the server with py-spy during the hovers, into this folder")
    parser.add_argument("--first-start-only", action="store_true",
                        help="no restart (A/B rounds of what a first start does: half the run's time)")
    args = parser.parse_args()
    pool_bytes = corpus_jsonl(args.n, args.pools).stat().st_size
    with tempfile.TemporaryDirectory(prefix="soma-bench-million-") as tmp:
        os.environ["SOMA_CACHE_DIR"] = str(Path(tmp) / "cache")  # empty: a first-ever start
        workspace = make_workspace(Path(tmp), args.n, args.pools)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", BASELINE, str(corpus_jsonl(args.n, args.pools))], check=True)
        baseline = time.perf_counter() - t
        print(f"baseline (python + json.loads of every line): {baseline:.1f} s", file=sys.stderr, flush=True)
        first = asyncio.run(session(workspace, "first start", args.hovers, args.profile))
        again = None
        if not args.first_start_only:
            time.sleep(2.1)  # a file changed in the last 2 s is read again on every restart (loader.RACY_NS)
            again = asyncio.run(session(workspace, "restart", args.hovers, args.profile))
    print(render(pool_bytes, baseline, first, again))


def render(pool_bytes: int, baseline: float, first: dict, again: dict | None) -> str:
    sessions = (("first start", first),) + ((("restart", again),) if again is not None else ())
    gib = lambda kb: kb / 2**20  # noqa: E731
    row = lambda name, s: f"| {name} | {s:.1f} s | {s / baseline:.2f}× |"  # noqa: E731
    lines = [
        "## 1M", "", f"Command: `python bench/million.py {' '.join(sys.argv[1:])}`", "", describe_machine(), "",
        f"Pool: {first['records']:,} records in one JSONL file of {pool_bytes / 1e9:.2f} GB "
        "(`bench/_stores.py`'s corpus), a real stdio session (`soma_lsp.client`), a fresh `SOMA_CACHE_DIR`.", "",
        "| measurement | time | ÷ `json.loads` baseline |", "|---|---:|---:|",
        row("baseline: `python` + `json.loads` of every line", baseline),
        row("first start → first hover with content", first["first_hover_s"]),
        row("first start → full result", first["full_s"])]
    if again is not None:
        lines += [row("restart (snapshot) → first hover", again["first_hover_s"]),
                  row("restart (snapshot) → full result", again["full_s"])]
    lines += ["", "| hovers once loaded | p50 | p99 |", "|---|---:|---:|"]
    for label, r in sessions:
        lines.append(f"| {label}: new scopes ({len(r['scope_ms'])}) | {statistics.median(r['scope_ms']):.1f} ms "
                     f"| {percentile(r['scope_ms'], 0.99):.1f} ms |")
        lines.append(f"| {label}: revisits ({len(r['hover_ms'])}) | {statistics.median(r['hover_ms']):.1f} ms "
                     f"| {percentile(r['hover_ms'], 0.99):.1f} ms |")
    lines += ["", "| server memory | GiB | ÷ the pool's bytes |", "|---|---:|---:|"]
    for label, r in sessions:
        for what, kb in (("peak RSS", r["peak_rss_kb"]), ("RSS once loaded", r["loaded_rss_kb"]),
                         ("RSS settled", r["settled_rss_kb"])):
            lines.append(f"| {label}: {what} | {gib(kb):.2f} | {kb * 1024 / pool_bytes:.1f}× |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
