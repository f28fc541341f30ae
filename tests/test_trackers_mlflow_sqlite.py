"""An MLflow SQLite store written by the real mlflow client, read read-only with the standard library:
the mapping, the schema check, live updates (tag edits leave no timestamp), a locked or damaged
database (last good records kept), and a restart from the snapshot that rebuilds nothing."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool, pool_roots
from soma_lsp.pool.trackers import SqliteStore
from soma_lsp.pool.trackers.follow import TrackerFollower
from soma_lsp.pool.trackers import mlflow_sqlite
from soma_lsp.pool.trackers.mlflow_sqlite import KNOWN_VERSIONS
from soma_lsp.records import Status
from soma_lsp.retrieval import LiveIndex
from trackers_support import pool_of, tracker_home, wait_for, worker  # noqa: F401


def sqlite_uri(path: Path) -> str:
    return f"sqlite:///{path}"  # an absolute path after three slashes: four in all, as SQLAlchemy reads it


def two_runs(worker, db: Path) -> tuple[str, str]:
    uri = sqlite_uri(db)
    failed = worker("mlflow_run", uri=uri, experiment="rope", name="rope-500k", status="FAILED",
                    description="theta 500k diverges", params={"rope_theta": 500000},
                    metrics=[["val_loss", 3.5, 0], ["val_loss", 4.1, 1]],
                    tags={"soma.baseline.val_loss": "3.3", "soma.goal.val_loss": "min",
                          "soma.code": "model/rope.py::RotaryEmbedding"})["run_id"]
    done = worker("mlflow_run", uri=uri, experiment="rope", name="baseline", status="FINISHED")["run_id"]
    return failed, done


def test_sqlite_store_runs_become_records(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    failed, done = two_runs(worker, db)
    pool = pool_of(sqlite_uri(db))
    assert [type(s) for s in pool.trackers] == [SqliteStore]
    record = pool.get(failed)
    assert record.status is Status.FAILED and record.headline == "theta 500k diverges"
    assert "rope_theta=500000" in record.notes.split()
    assert record.metrics[0].moved_wrong_way is True and record.metrics[0].value == 4.1
    assert record.source.path == f"sqlite:///{db}#{failed}" and record.origin.endswith("· experiment rope")
    assert pool.get(done).status is Status.SUCCEEDED
    with sqlite3.connect(db) as c:  # opened read-only: nothing was written
        assert c.execute("SELECT count(*) FROM runs").fetchone() == (2,)


def test_sqlite_uri_relative_and_absolute_as_mlflow_reads_them(tmp_path):
    folder = tmp_path / "ws"
    assert pool_roots([folder], "sqlite:///mlflow.db", {}) == [f"sqlite:///{folder}/mlflow.db"]
    assert pool_roots([folder], f"sqlite:///{tmp_path}/x.db", {}) == [f"sqlite:///{tmp_path}/x.db"]


def test_sqlite_live_add_tag_edit_delete(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    uri = sqlite_uri(db)
    failed, done = two_runs(worker, db)
    pool = pool_of(uri)
    kept = pool.get(done)
    with TrackerFollower(pool, sqlite_seconds=0.05):
        added = worker("mlflow_run", uri=uri, experiment="rope", name="added")["run_id"]
        wait_for(lambda: pool.get(added) is not None, "a run logged")
        worker("mlflow_tag", uri=uri, run_id=failed, key="mlflow.note.content", value="a new note")
        wait_for(lambda: pool.get(failed).headline == "a new note", "a note edited (no timestamp moves)")
        assert pool.get(done) is kept
        worker("mlflow_rename_experiment", uri=uri, experiment="rope", name="rope-sweep")
        wait_for(lambda: pool.get(done).origin.endswith("· experiment rope-sweep"),
                 "an experiment renamed (its runs' rows unchanged)")
        worker("mlflow_delete", uri=uri, run_id=failed)
        wait_for(lambda: pool.get(failed) is None, "a run deleted")
    assert len(pool) == 2


def test_locked_database_keeps_the_last_good_records_and_recovers(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    failed, _ = two_runs(worker, db)
    pool = pool_of(sqlite_uri(db))
    (source,) = pool.trackers
    source.busy_seconds = 0.1
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        message = pool.sync_tracker(source)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert "is locked by a writer" in message and len(pool) == 2
    (problem,) = pool.problems[source.entry]
    assert problem.kind == "tracker" and problem.message == message
    assert pool.sync_tracker(source) is None and source.entry not in pool.problems and len(pool) == 2


def test_damaged_database_keeps_the_last_good_records(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    two_runs(worker, db)
    pool = pool_of(sqlite_uri(db))
    (source,) = pool.trackers
    db.write_bytes(b"this is no longer a database" * 200)
    message = pool.sync_tracker(source)
    assert "is damaged or not a database" in message and len(pool) == 2
    fresh = pool_of(sqlite_uri(db))  # a first load of a damaged store: a problem, no records, no crash
    assert len(fresh) == 0 and fresh.problems[source.entry][0].message == message


def test_unknown_schema_version_is_refused_by_name(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    two_runs(worker, db)
    with sqlite3.connect(db) as c:
        c.execute("UPDATE alembic_version SET version_num = 'f00dfeedbeef'")
    pool = pool_of(sqlite_uri(db))
    (problem,) = pool.problems[f"sqlite:///{db}"]
    assert len(pool) == 0 and "schema version 'f00dfeedbeef'" in problem.message


def test_missing_database_and_not_an_mlflow_database(tmp_path):
    pool = pool_of(sqlite_uri(tmp_path / "nothing.db"))
    assert pool.problems[f"sqlite:///{tmp_path}/nothing.db"][0].message.startswith("no MLflow database at")
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    pool = pool_of(sqlite_uri(tmp_path / "other.db"))
    assert "not an MLflow database" in pool.problems[f"sqlite:///{tmp_path}/other.db"][0].message


def test_restart_from_the_snapshot_rebuilds_no_run(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    failed, _ = two_runs(worker, db)
    first = LivePool([sqlite_uri(db)], LiveIndex(), cache_dir=tmp_path / "cache")
    first.load()
    assert first.save_snapshot()
    again = LivePool([sqlite_uri(db)], LiveIndex(), cache_dir=tmp_path / "cache")
    changes = []
    again.subscribe(changes.append)
    again.load()  # the database was written just now: every run is read, and none has changed
    assert [c.added for c in changes if c.added] == [] and [c.removed for c in changes if c.removed] == []
    assert again.get(failed) == first.get(failed) and again.get(failed).origin == first.get(failed).origin


def test_restart_on_a_settled_database_reads_nothing(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    failed, _ = two_runs(worker, db)
    old = db.stat().st_mtime_ns - 60 * 10**9
    os.utime(db, ns=(old, old))  # as a database last written a minute ago
    first = LivePool([sqlite_uri(db)], LiveIndex(), cache_dir=tmp_path / "cache")
    first.load()
    assert first.save_snapshot()
    again = LivePool([sqlite_uri(db)], LiveIndex(), cache_dir=tmp_path / "cache")
    again.load()
    assert not again.unsaved and again.get(failed) == first.get(failed)  # the files' stat said: unchanged
    (source,) = again.trackers
    assert not source.changed()  # seen as it is: the follower's first poll reads nothing either
    (added,) = add_runs(db, 1)
    assert source.changed() and again.sync_tracker(source, "runs") is None and again.get(added) is not None
    worker("mlflow_tag", uri=sqlite_uri(db), run_id=failed, key="soma.conclusion", value="seen after all")
    third = LivePool([sqlite_uri(db)], LiveIndex(), cache_dir=tmp_path / "cache")
    third.load()
    assert third.get(failed).headline == "seen after all"


def test_known_schema_versions_are_the_installed_mlflow_migrations():
    spec = importlib.util.find_spec("mlflow")
    if spec is None:
        pytest.skip("mlflow is not installed")
    versions = Path(spec.origin).parent / "store" / "db_migrations" / "versions"
    installed = {line.split("=", 1)[1].strip().strip("'\"") for path in versions.glob("*.py")
                 for line in path.read_text().splitlines() if line.startswith("revision = ")}
    assert installed <= KNOWN_VERSIONS, f"new MLflow schema versions to check and add: {installed - KNOWN_VERSIONS}"


def test_a_nan_metric_stays_nan(worker, tmp_path):
    db = tmp_path / "mlflow.db"
    run = worker("mlflow_run", uri=sqlite_uri(db), experiment="nan", name="diverged", status="FAILED",
                 metrics=[["val_loss", 3.0, 0], ["val_loss", float("nan"), 1]],
                 tags={"soma.baseline.val_loss": "3.3", "soma.goal.val_loss": "min"})["run_id"]
    (metric,) = pool_of(sqlite_uri(db)).get(run).metrics
    assert metric.value != metric.value and metric.moved_wrong_way is True  # NaN, not MLflow's stored 0


def test_a_runs_tags_params_and_metrics_come_in_key_order_whatever_order_they_were_written(worker, tmp_path):
    """SQLite hands a run's rows over in its `run_uuid` index's order (the order they were written);
    the record lists them by key, as the file store and the server give them."""
    db = tmp_path / "mlflow.db"
    failed, _ = two_runs(worker, db)
    with sqlite3.connect(db) as c:  # written after the client's rows, last keys first
        c.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                      [("zeta", "1", failed), ("alpha", "2", failed)])
        c.executemany("INSERT INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                      [("zz_width", "8", failed), ("aa_depth", "4", failed)])
        c.executemany("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                      "VALUES (?, ?, 0, 0, 0, ?)", [("zz_acc", 0.5, failed), ("aa_ppl", 9.0, failed)])
    record = pool_of(sqlite_uri(db)).get(failed)
    assert record.tags == ("alpha=2", "zeta=1")
    assert [metric.name for metric in record.metrics] == ["aa_ppl", "val_loss", "zz_acc"]
    words = record.notes.split()
    assert words.index("aa_depth=4") < words.index("rope_theta=500000") < words.index("zz_width=8")


def add_runs(db: Path, n: int, status: str = "FINISHED") -> list[str]:
    """`n` runs of experiment "rope" written as rows (as `bench/_stores.py` does), their ids."""
    runs = [uuid.uuid4().hex for _ in range(n)]
    with sqlite3.connect(db) as c:
        (experiment,) = c.execute("SELECT experiment_id FROM experiments WHERE name = 'rope'").fetchone()
        c.executemany("INSERT INTO runs (run_uuid, name, source_type, status, start_time, lifecycle_stage, "
                      "experiment_id) VALUES (?, 'bare', 'LOCAL', ?, 1, 'active', ?)",
                      [(run, status, experiment) for run in runs])
    return runs


def test_a_quick_poll_costs_the_new_and_open_runs_not_the_stores_size(worker, tmp_path, monkeypatch):
    """A quick poll reads the runs added since (by `rowid`) and the runs still open (an update may end
    them), each by its index: SQLite's steps for one new run are the same at 10 runs and at 3000. What
    else changes in a finished run's row (here: deleted) is the next full sync's."""
    db = tmp_path / "mlflow.db"
    uri = sqlite_uri(db)
    two_runs(worker, db)
    (running,) = add_runs(db, 1, "RUNNING")
    finished = add_runs(db, 7)
    pool = pool_of(uri)
    (source,) = pool.trackers
    connect, steps = SqliteStore._connect, []

    def counted(self):
        connection = connect(self)
        connection.set_progress_handler(lambda: steps.append(1) and 0, 1)  # (0: go on)
        return connection

    def quick_poll_steps() -> int:
        (added,) = add_runs(db, 1)
        steps.clear()
        with monkeypatch.context() as m:
            m.setattr(SqliteStore, "_connect", counted)
            assert pool.sync_tracker(source, "runs") is None
        assert pool.get(added) is not None
        return len(steps)

    small = quick_poll_steps()
    add_runs(db, 3000)
    pool.sync_tracker(source)
    assert len(pool) == 3011
    assert 0 < quick_poll_steps() <= small * 1.1
    with sqlite3.connect(db) as c:
        c.execute("UPDATE runs SET status = 'FINISHED', end_time = 2 WHERE run_uuid = ?", (running,))
        c.execute("UPDATE runs SET lifecycle_stage = 'deleted' WHERE run_uuid = ?", (finished[0],))
    pool.sync_tracker(source, "runs")
    assert pool.get(running).status is Status.SUCCEEDED and pool.get(finished[0]) is not None
    pool.sync_tracker(source)
    assert pool.get(finished[0]) is None and len(pool) == 3011


def test_a_full_read_lets_a_writer_commit_between_its_parts_and_misses_nothing(worker, tmp_path, monkeypatch):
    """A full read holds SQLite's read lock one part (`READ_RUNS` runs) at a time: MLflow, writing meanwhile,
    waits for a part, not for the whole store (whose read takes seconds at 100k runs, past the 5 s an MLflow
    connection waits before "database is locked"). What it wrote is read next time."""
    db = tmp_path / "mlflow.db"
    two_runs(worker, db)
    add_runs(db, 40)
    pool = pool_of(sqlite_uri(db))
    (source,) = pool.trackers
    monkeypatch.setattr(mlflow_sqlite, "READ_RUNS", 10)
    read_all, parts_read, writes = SqliteStore._read_all, [], []

    def write() -> None:  # (its connection waits for the lock as long as it takes)
        writes.extend(add_runs(db, 1))
        writes.append(len(parts_read))

    writer = threading.Thread(target=write)

    def part(self, connection, rowids):
        parts_read.append(rowids)
        if len(parts_read) == 1:  # the writer comes while the first part is read
            writer.start()
            time.sleep(0.2)  # (for it to be waiting on the lock)
        return read_all(self, connection, rowids)

    monkeypatch.setattr(SqliteStore, "_read_all", part)
    pool.sync_tracker(source)
    writer.join()
    added, parts_before_commit = writes
    assert len(parts_read) == 5 and parts_before_commit < len(parts_read)  # committed between parts
    assert pool.get(added) is not None and len(pool) == 43  # (in the last part, which reaches past the end)
    monkeypatch.setattr(SqliteStore, "_read_all", read_all)
    assert source.changed()
