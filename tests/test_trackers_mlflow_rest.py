"""An MLflow tracking server over REST: a real `mlflow server` (SQLite backend) on 127.0.0.1 shared by the
session, runs logged through it by the real client; polls that cost three requests; and a tiny local
HTTP server for what a real one does only on a bad day (HTTP 500, refused credentials, going down)."""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soma_lsp.pool import pool_roots
from soma_lsp.pool.trackers import TrackingServer, mlflow_rest, split_entries
from soma_lsp.pool.trackers.follow import TrackerFollower
from soma_lsp.records import Status
from soma_lsp.retrieval import dead_end_reason
from soma_lsp.server.hover_view import HoverView, render_markdown, render_plain
from trackers_support import free_port, mlflow_server, pool_of, tracker_home, wait_for, worker  # noqa: F401


def test_soma_pool_keeps_uris_whole(tmp_path):
    text = ":".join(["http://127.0.0.1:5000", "/data/pool", "sqlite:////abs/mlflow.db", "https://mlflow.example.org",
                     "rel", "http://host:8080/prefix"])
    assert split_entries(text, ":") == ["http://127.0.0.1:5000", "/data/pool", "sqlite:////abs/mlflow.db",
                                        "https://mlflow.example.org", "rel", "http://host:8080/prefix"]
    roots = pool_roots([tmp_path], None, {"SOMA_POOL": "http://127.0.0.1:5000/:rel"})
    assert roots == ["http://127.0.0.1:5000", tmp_path / "rel"]


def test_server_runs_become_records_with_their_url(worker, mlflow_server):
    failed = worker("mlflow_run", uri=mlflow_server, experiment="rest-map", name="rope-500k", status="FAILED",
                    description="theta 500k diverges", params={"rope_theta": 500000},
                    metrics=[["val_loss", 4.1, 1]], tags={"soma.code": "model/rope.py::RotaryEmbedding"})
    pool = pool_of(mlflow_server)
    assert [type(s) for s in pool.trackers] == [TrackingServer]
    record = pool.get(failed["run_id"])
    assert record.status is Status.FAILED and "rope_theta=500000" in record.notes.split()
    assert record.url == f"{mlflow_server}/#/experiments/{failed['experiment_id']}/runs/{failed['run_id']}"
    assert record.source.path == record.url
    assert record.origin == f"MLflow tracking server {mlflow_server} · experiment rest-map"
    assert [str(t) for t in record.code] == ["model/rope.py::RotaryEmbedding"]
    # the hover's "from" line says how to open it: the run page, inert (defanged, never a link)
    view = HoverView(card=record)
    plain = render_plain(view)
    assert f"from: {record.origin.replace('http://', 'http[:]//')} · run page " \
           f"{record.url.replace('http://', 'http[:]//')}" in plain
    markdown = render_markdown(view)
    assert "· run page http[:]/\\/127.0.0.1:" in markdown and "http://" not in markdown


def test_polls_find_new_and_finished_runs_in_three_requests_and_full_syncs_the_rest(worker, mlflow_server):
    first = worker("mlflow_run", uri=mlflow_server, experiment="rest-live", name="first")["run_id"]
    pool = pool_of(mlflow_server)
    (source,) = pool.trackers
    before, version = source.requests, pool.version
    assert pool.sync_tracker(source, "poll") is None
    assert source.requests - before == 3  # experiments, runs started since, runs ended since
    assert pool.version == version  # and nothing was rebuilt or re-indexed
    added = worker("mlflow_run", uri=mlflow_server, experiment="rest-live", name="added")["run_id"]
    pool.sync_tracker(source, "poll")
    assert pool.get(added) is not None
    worker("mlflow_end", uri=mlflow_server, run_id=added, status="FAILED")  # a later end time
    pool.sync_tracker(source, "poll")
    assert pool.get(added).status is Status.FAILED
    worker("mlflow_tag", uri=mlflow_server, run_id=first, key="soma.conclusion", value="edited")
    worker("mlflow_delete", uri=mlflow_server, run_id=added)
    pool.sync_tracker(source, "poll")  # neither moves a time the server can filter on
    assert pool.get(added) is not None and pool.get(first).headline is None
    pool.sync_tracker(source)  # the periodic full sync catches both
    assert pool.get(added) is None and pool.get(first).headline == "edited"
    worker("mlflow_rename_experiment", uri=mlflow_server, experiment="rest-live", name="rest-renamed")
    pool.sync_tracker(source, "poll")  # the experiments' answer differs: the poll reads every run again
    assert pool.get(first).origin.endswith("· experiment rest-renamed")


def test_follower_polls_the_server(worker, mlflow_server):
    pool = pool_of(mlflow_server)
    with TrackerFollower(pool, poll_seconds=0.1, full_every=3):
        run = worker("mlflow_run", uri=mlflow_server, experiment="rest-follow", name="polled")["run_id"]
        wait_for(lambda: pool.get(run) is not None, "a run logged on the server")
        worker("mlflow_delete", uri=mlflow_server, run_id=run)
        wait_for(lambda: pool.get(run) is None, "a run deleted on the server (full sync)")


class Quiet(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a slow answer whose reader gave up (the client timed out, as a test wants)


class Fake:
    """A tiny HTTP server on 127.0.0.1 speaking just enough of MLflow's REST API, or failing on purpose."""

    def __init__(self) -> None:
        self.status = 200
        self.token: str | None = None  # when set: the bearer token (or `user:password`) it wants
        self.seen: list[str | None] = []
        self.total = 1  # runs it holds: r1 ("from the fake"), r2, …
        self.slow_above: int | None = None  # a runs page larger than this takes `delay` seconds
        self.delay = 0.0
        self.sizes: list[int] = []  # max_results of each runs/search asked
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                given = self.headers.get("Authorization")
                fake.seen.append(given)
                if fake.token is not None and given not in (f"Bearer {fake.token}", "Basic " +
                                                            base64.b64encode(fake.token.encode()).decode()):
                    return self.answer(401, {"error_code": "UNAUTHENTICATED", "message": "wrong token"})
                if fake.status != 200:
                    return self.answer(fake.status, {"error_code": "INTERNAL_ERROR", "message": "database is gone"})
                if self.path.endswith("experiments/search"):
                    return self.answer(200, {"experiments": [{"experiment_id": "1", "name": "fake"}]})
                size, start = body["max_results"], int(body.get("page_token") or 0)
                fake.sizes.append(size)
                if fake.slow_above is not None and size > fake.slow_above:
                    time.sleep(fake.delay)
                end = min(start + size, fake.total)
                page = {"runs": [{"info": {"run_id": f"r{i + 1}", "experiment_id": "1", "status": "FAILED",
                                           "run_name": "fake-run", "start_time": 1700000000000},
                                  "data": {"tags": [{"key": "mlflow.note.content", "value": "from the fake"}]}}
                                 for i in range(start, end)]}
                return self.answer(200, {**page, **({"next_page_token": str(end)} if end < fake.total else {})})

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = Quiet(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake(monkeypatch):
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    server = Fake()
    yield server
    server.close()


def test_a_server_failing_keeps_the_last_good_records_reports_once_and_recovers(fake, caplog):
    pool = pool_of(fake.url)
    (source,) = pool.trackers
    assert pool.get("r1").headline == "from the fake"
    fake.status = 500
    with caplog.at_level("WARNING", logger="soma_lsp.pool.live"):
        message = pool.sync_tracker(source)
        version = pool.version
        assert pool.sync_tracker(source) == message and pool.version == version  # nothing new to tell
    assert message == f"the MLflow tracking server {fake.url} answered HTTP 500 Internal Server Error: database is gone"
    assert [r.message for r in caplog.records] == [message]  # reported once, not at every poll
    assert pool.get("r1") is not None and pool.problems[source.entry][0].message == message
    fake.status = 200
    assert pool.sync_tracker(source) is None and source.entry not in pool.problems and pool.get("r1")


def test_wrong_token_is_a_clear_message_that_never_shows_the_token(fake, monkeypatch):
    fake.token = "right-token"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "wrong-secret-token")
    pool = pool_of(fake.url)
    (problem,) = pool.problems[fake.url]
    assert "refused the credentials given (HTTP 401)" in problem.message and "MLFLOW_TRACKING_TOKEN" in problem.message
    assert "wrong-secret-token" not in problem.message and len(pool) == 0
    assert fake.seen[-1] == "Bearer wrong-secret-token"  # sent as MLflow's client sends it
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "right-token")
    assert len(pool_of(fake.url)) == 1


def test_basic_credentials_and_no_credentials(fake, monkeypatch):
    fake.token = "alice:s3cret"
    pool = pool_of(fake.url)
    assert "refused no credentials (HTTP 401)" in pool.problems[fake.url][0].message
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
    assert len(pool_of(fake.url)) == 1


def test_unreachable_server_is_a_clear_message():
    url = f"http://127.0.0.1:{free_port()}"
    pool = pool_of(url)
    assert pool.problems[url][0].message.startswith(f"cannot reach the MLflow tracking server {url}")


def test_a_page_that_times_out_is_asked_again_at_half_the_size(fake):
    """Pages of 1000 runs; a server too slow for one answers in halves (down to 50), and every run loads."""
    pool = pool_of(fake.url)
    (source,) = pool.trackers
    # (a timeout a busy machine's fast pages stay well within, and a delay well past it)
    fake.total, fake.slow_above, fake.delay, fake.sizes = 1200, 300, 3.0, []
    source.timeout = 1.0
    assert pool.sync_tracker(source) is None and len(pool) == 1200
    # (the 1: the oldest run's start time; the fake's runs all started in one millisecond, so the rest
    # is read on page after page, not in windows of start time)
    assert fake.sizes == [1000, 500, 250, 1, 250, 250, 250, 250]
    fake.slow_above = 0  # too slow even for the smallest page: reported, the runs kept
    message = pool.sync_tracker(source)
    assert message == f"the MLflow tracking server {fake.url} did not answer within 1 s" and len(pool) == 1200
    assert fake.sizes[-1] == 50


def test_a_store_of_many_pages_is_read_in_windows_of_start_time_and_whole(worker, mlflow_server, monkeypatch):
    """Pages of 2 runs: the newest page, the oldest run, then windows of start time read concurrently
    (`attributes.start_time` filters on the real server) — every run once, the same records as one
    page after another would give."""
    for i in range(7):
        worker("mlflow_run", uri=mlflow_server, experiment="rest-windows", name=f"windowed-{i}")
    whole = pool_of(mlflow_server)
    monkeypatch.setattr(mlflow_rest, "PAGE", 2)
    windowed = pool_of(mlflow_server)
    (source,) = windowed.trackers
    assert len(windowed) == len(whole) >= 7
    assert {r.id: r for r in windowed.records()} == {r.id: r for r in whole.records()}
    # experiments, the newest page, the oldest run, then at least CONCURRENCY windows
    assert source.requests >= 3 + mlflow_rest.CONCURRENCY


@given(st.integers(0, 10**13), st.integers(0, 10**7), st.lists(st.integers(0, 10**7), max_size=50))
def test_windows_cover_every_start_time_left_once(oldest, below_edge, above_edge):
    edge = oldest + below_edge
    windows = mlflow_rest._windows(oldest, sorted([edge + a for a in above_edge] + [edge], reverse=True))
    assert windows[0][0] is None and windows[-1][1] == edge  # open below; up to the first page's edge
    assert 1 <= len(windows) <= mlflow_rest.MAX_WINDOWS
    for (_, high), (low, _) in zip(windows, windows[1:]):
        assert low == high + 1  # consecutive, no start time twice or never
    assert all(low is None or low <= high for low, high in windows)
    if below_edge >= mlflow_rest.CONCURRENCY:
        assert len(windows) >= mlflow_rest.CONCURRENCY  # as many as requests in flight, at least


def test_one_run_far_newer_than_the_rest_does_not_thin_the_windows():
    """A store of runs a minute apart, and one started a year later (the first page holds it and 999 of
    the others): the rest — 9 pages more, as dense as the page's older runs — is cut into as many
    windows as allowed, not into `CONCURRENCY` windows of several pages each (read one after another)."""
    minute, year = 60_000, 365 * 24 * 3_600_000
    last = 10_000 * minute
    starts = [last + year] + [last - i * minute for i in range(mlflow_rest.PAGE - 1)]
    windows = mlflow_rest._windows(0, starts)
    assert len(windows) == mlflow_rest.MAX_WINDOWS
    spans = [high - (low or 0) + 1 for low, high in windows]
    assert max(spans) * 10_000 // last <= mlflow_rest.PAGE  # each about a page or less at that density


def test_nan_metrics_from_the_server_are_kept(worker, mlflow_server):
    """MLflow writes a NaN metric as the string "NaN" (protobuf's JSON): a diverged run keeps its NaN
    loss, which makes it a dead end against its baseline."""
    run = worker("mlflow_run", uri=mlflow_server, experiment="rest-nan", name="diverged", status="FINISHED",
                 metrics=[["val_loss", float("nan"), 1], ["grad_norm", float("inf"), 1]],
                 tags={"soma.baseline.val_loss": "3.3", "soma.goal.val_loss": "min"})["run_id"]
    record = pool_of(mlflow_server).get(run)
    values = {m.name: m.value for m in record.metrics}
    assert math.isnan(values["val_loss"]) and values["grad_norm"] >= 1.7e308  # (MLflow stores inf as the largest float)
    assert dead_end_reason(record).startswith("every metric moved the wrong way: val_loss nan vs 3.3")
