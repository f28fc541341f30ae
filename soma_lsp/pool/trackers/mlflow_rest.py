"""An MLflow tracking server (`http://host:port`, `https://…`) over its REST API, with the standard library.

A full scan pages through `POST api/2.0/mlflow/experiments/search` and `runs/search` (`page_token`),
active experiments and runs only. A server answers one page in time proportional to its runs (≈ 0.7
ms a run for MLflow's own), and a team's server runs several workers (MLflow's default: 4), so a
store of more than one page is read `CONCURRENCY` requests at a time: the newest page first, then the
oldest run's start time (one run), then the start times between cut into windows
(`attributes.start_time` ranges, which every MLflow server filters on), each paged on its own.
Between full scans the follower polls (`scan("poll")`): three small requests — the experiments (a new
one means a full scan), runs started after the newest start seen, runs ended after the newest end
seen — so a poll that finds nothing new costs three requests whatever the pool's size. Tag and note
edits and deletions touch no time MLflow can filter on; the periodic full scan catches them.

Credentials as MLflow's own client takes them: `MLFLOW_TRACKING_TOKEN` (bearer), else
`MLFLOW_TRACKING_USERNAME` / `MLFLOW_TRACKING_PASSWORD` (basic). They go only into the request header,
never into a message or a log; redirects are not followed (they could carry the header elsewhere).
TLS is verified (`MLFLOW_TRACKING_SERVER_CERT_PATH` names a CA bundle, as for MLflow); every request
has a timeout.
"""

from __future__ import annotations

import base64
import json
import math
import os
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from .mapping import Run, run_load
from .source import Scan, TrackerError, TrackerSource, everything, fingerprint

TIMEOUT_SECONDS = 30.0  # per request
#: runs per page: MLflow allows 50000; its server takes ≈ 0.6–0.8 ms of CPU a run whatever the page size
#: (smaller pages cost ≈ 20 ms a request more over HTTP), so 1000 answer in about a second.
#: A page that times out is asked again at half the size (down to `MIN_PAGE`) before the server is
#: reported slow: a loaded server still answers, in smaller pieces.
PAGE, MIN_PAGE = 1000, 50
#: requests in flight at once while a store of many pages is read (a server with fewer workers queues
#: them: no slower than one at a time)
CONCURRENCY = 4
#: a window of start times is cut to hold about this share of a page, so that most windows take one
#: request (the runs per millisecond of the first page's older half estimate the rest), and at most
#: this many windows
WINDOW_SHARE, MAX_WINDOWS = 0.5, 4 * CONCURRENCY
NEWEST_FIRST, OLDEST_FIRST = "attributes.start_time DESC", "attributes.start_time ASC"
#: how MLflow (protobuf's JSON) writes the floats JSON has no number for
SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a 3xx becomes an HTTPError: credentials never follow a redirect


class TrackingServer(TrackerSource):
    kind = "MLflow tracking server"
    follow = "server"

    def __init__(self, url: str, environ: Mapping[str, str] | None = None, *,
                 timeout: float = TIMEOUT_SECONDS) -> None:
        base = url.rstrip("/")
        super().__init__(base, base + "/#/experiments/")
        self.base = base
        self.timeout = timeout
        environ = os.environ if environ is None else environ
        self._headers = {"Content-Type": "application/json", "User-Agent": "soma-lsp"}
        if environ.get("MLFLOW_TRACKING_TOKEN"):
            self._headers["Authorization"] = "Bearer " + environ["MLFLOW_TRACKING_TOKEN"]
        elif environ.get("MLFLOW_TRACKING_USERNAME"):
            pair = f"{environ['MLFLOW_TRACKING_USERNAME']}:{environ.get('MLFLOW_TRACKING_PASSWORD', '')}"
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        context = ssl.create_default_context(cafile=environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH") or None)
        self._opener = urllib.request.build_opener(_NoRedirect(), urllib.request.HTTPSHandler(context=context))
        self._experiments: dict[str, str] = {}
        self._newest_start = 0
        self._newest_end = 0
        self.requests = 0  # requests made (what a poll costs is measured by tests)
        self._counting = threading.Lock()  # (requests are made from several threads)

    def run_url(self, experiment_id: str, run_id: str) -> str:
        return f"{self.prefix}{experiment_id}/runs/{run_id}"

    # -- requests --------------------------------------------------------------------------------

    def _post(self, endpoint: str, body: dict) -> dict:
        request = urllib.request.Request(f"{self.base}/api/2.0/mlflow/{endpoint}", data=orjson.dumps(body),
                                         headers=self._headers, method="POST")
        with self._counting:
            self.requests += 1
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return _decode(response.read())
        except urllib.error.HTTPError as error:
            raise TrackerError(self._refused(error)) from None
        except (TimeoutError, socket.timeout):
            raise Slow(f"the MLflow tracking server {self.base} did not answer within {self.timeout:g} s") from None
        except urllib.error.URLError as error:
            reason = error.reason
            if isinstance(reason, TimeoutError | socket.timeout):
                raise Slow(f"the MLflow tracking server {self.base} did not answer within "
                           f"{self.timeout:g} s") from None
            raise TrackerError(f"cannot reach the MLflow tracking server {self.base}: {reason}") from None
        except (OSError, ValueError) as error:
            raise TrackerError(f"the MLflow tracking server {self.base} gave no usable answer: {error}") from None

    def _refused(self, error: urllib.error.HTTPError) -> str:
        if error.code in (401, 403):
            given = "the credentials given" if "Authorization" in self._headers else "no credentials"
            return (f"the MLflow tracking server {self.base} refused {given} (HTTP {error.code}); set "
                    "MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")
        try:
            detail = json.loads(error.read()).get("message", "")
        except Exception:  # noqa: BLE001 - a body that is not MLflow's JSON error
            detail = ""
        if 300 <= error.code < 400:
            detail = f"redirected to {error.headers.get('Location')}; not followed (use that address)"
        return f"the MLflow tracking server {self.base} answered HTTP {error.code} {error.reason}" + \
            (f": {detail[:200]}" if detail else "")

    def _pages(self, endpoint: str, body: dict, items: str) -> list[dict]:
        """Every item, page after page (`page_token`)."""
        found, token, size = [], None, body["max_results"]
        while True:
            page, token, size = self._page(endpoint, body, items, token, size)
            found.extend(page)
            if not token:
                return found

    def _page(self, endpoint: str, body: dict, items: str, token: str | None, size: int
              ) -> tuple[list[dict], str | None, int]:
        """One page: its items, the next page's token (None: the last) and the size it was asked at —
        a page that times out is asked again at half the size (a page token holds the offset, not
        the size, so the pages still join up)."""
        while True:
            try:
                answer = self._post(endpoint, {**body, "max_results": size, **({"page_token": token} if token else {})})
            except Slow:
                if size <= MIN_PAGE:
                    raise
                size = max(size // 2, MIN_PAGE)
                continue
            return answer.get(items, []), answer.get("next_page_token") or None, size

    # -- scanning --------------------------------------------------------------------------------

    def scan(self, hint: Any = None) -> Scan:
        experiments = {e["experiment_id"]: e.get("name", e["experiment_id"]) for e in
                       self._pages("experiments/search", {"max_results": PAGE}, "experiments")}
        if hint == "poll" and experiments == self._experiments:
            runs = []
            for field, newest in (("start_time", self._newest_start), ("end_time", self._newest_end)):
                for page in self._runs(experiments, f"attributes.{field} > {newest}"):
                    runs += page
            found = self._found(runs, experiments)
            return Scan(found, lambda key: False)  # a poll sees only what is new: nothing is gone
        self._experiments = experiments
        found = {}
        for page in self._runs(experiments, ""):  # (each page's runs taken in while the next are asked)
            found.update(self._found(page, experiments))
        return Scan(found, everything)

    def _runs(self, experiments: dict[str, str], where: str) -> Iterator[list[dict]]:
        """The active runs of `experiments` (matching `where`), a page or a window at a time: the
        newest page; if there are more, the rest in windows of start time read `CONCURRENCY` at once
        (`_windows`). A run at the edge of the first page may come twice (keyed by id after)."""
        if not experiments:
            return
        body = {"experiment_ids": sorted(experiments), "max_results": PAGE, "run_view_type": "ACTIVE_ONLY",
                "order_by": [NEWEST_FIRST]}
        runs, token, size = self._page("runs/search", _where(body, where), "runs", None, PAGE)
        yield runs
        if not token:
            return
        oldest, _, _ = self._page("runs/search", {**_where(body, where), "order_by": [OLDEST_FIRST]}, "runs", None, 1)
        windows = _windows(_start(oldest[0]) if oldest else 0, [_start(run) for run in runs])
        if len(windows) < 2:  # (the rest started within one millisecond: read on, one page at a time)
            while token:
                runs, token, size = self._page("runs/search", _where(body, where), "runs", token, size)
                yield runs
            return
        body["max_results"] = size
        with ThreadPoolExecutor(CONCURRENCY, thread_name_prefix="soma-mlflow") as workers:
            pending = [workers.submit(self._pages, "runs/search", _where(body, where, window), "runs")
                       for window in windows]
            try:
                for future in pending:
                    yield future.result()
            finally:  # (a failed window: the others not begun are not asked)
                for future in pending:
                    future.cancel()

    def _found(self, runs: list[dict], experiments: dict[str, str]) -> dict:
        found = {}
        for raw in runs:
            info = raw.get("info", {})
            experiment_id, run_id = info.get("experiment_id"), info.get("run_id") or info.get("run_uuid")
            if experiment_id not in experiments or not run_id or info.get("lifecycle_stage") == "deleted":
                continue
            self._newest_start = max(self._newest_start, int(info.get("start_time") or 0))
            self._newest_end = max(self._newest_end, int(info.get("end_time") or 0))
            key, experiment = self.run_url(experiment_id, run_id), experiments[experiment_id]
            stamp = fingerprint(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS), experiment)
            found[key] = (stamp, lambda key=key, raw=raw, name=experiment, stamp=stamp: self._load(key, raw, name, stamp))
        return found

    def _load(self, key: str, raw: dict, experiment: str, stamp: bytes):
        info, data = raw.get("info", {}), raw.get("data", {})
        pairs = lambda name: {item["key"]: item.get("value", "") for item in data.get(name, ()) if "key" in item}  # noqa: E731
        run = Run(id=info.get("run_id") or info.get("run_uuid"), name=info.get("run_name") or None,
                  status=info.get("status"), start_ms=_ms(info.get("start_time")), end_ms=_ms(info.get("end_time")),
                  tags=pairs("tags"), params=pairs("params"),
                  metrics={m["key"]: _number(m.get("value")) for m in data.get("metrics", ())
                           if "key" in m and _number(m.get("value")) is not None},
                  url=key, origin=f"{self.kind} {self.base} · experiment {experiment}")
        return run_load(key, run, stamp)


def _where(body: dict, where: str, window: tuple[int | None, int] | None = None) -> dict:
    """`body` with `where` as its filter, and-ed with a window of start times (`_windows`)."""
    clauses = [where] if where else []
    if window is not None:
        low, high = window
        clauses += ([f"attributes.start_time >= {low}"] if low is not None else []) + \
            [f"attributes.start_time <= {high}"]
    return {**body, "filter": " AND ".join(clauses)} if clauses else body


def _windows(oldest: int, starts: list[int]) -> list[tuple[int | None, int]]:
    """The start times not read yet — from `oldest` up to the first page's edge (the last of its runs'
    `starts`, newest first), edge included, as a run there may not all be on the page — cut into
    consecutive windows (inclusive, in milliseconds), enough for each to hold about `WINDOW_SHARE` of a
    page if the rest is as dense as the first page's older half; the first window is open below
    (whatever started before the oldest run seen is read too). The older half, not the whole page: one
    run far newer than the rest (started today on a store of last year's runs) would make the rest look
    empty, cut it into too few windows, and leave each to be read page after page, one request in
    flight at the end instead of `CONCURRENCY`."""
    edge = starts[-1]
    span = edge - oldest + 1
    if span < 2:
        return [(None, edge)]
    older = starts[len(starts) // 2:]
    density = len(older) / max(older[0] - edge, 1)  # runs per millisecond near the edge
    count = min(max(CONCURRENCY, math.ceil(density * span / (WINDOW_SHARE * PAGE))), MAX_WINDOWS, span)
    cuts = [oldest + span * i // count for i in range(count + 1)]
    return [(None if i == 0 else cuts[i], cuts[i + 1] - 1) for i in range(count)]


def _start(raw: dict) -> int:
    return _ms(raw.get("info", {}).get("start_time")) or 0


class Slow(TrackerError):
    """A request that timed out (the caller may ask for less)."""


def _decode(body: bytes) -> dict:
    """An answer's JSON: orjson (fast), else the standard library, which also reads the bare `NaN`
    a server other than MLflow's own may send."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def _number(value: Any) -> float | None:
    """A metric's value: a number, or the string protobuf's JSON writes for NaN and ±Infinity (a
    diverged run's loss is NaN: that is what makes it a dead end). Anything else is no value."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return SPECIAL.get(value) if isinstance(value, str) else None


def _ms(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
