"""A first read of an MLflow SQLite store shared with a child process (`mlflow_sqlite_apart`): the same
loads, records and fingerprints as a read here alone; the store followed as ever after it; nothing lost
when the child fails or sends anything malformed."""

from __future__ import annotations

import logging
import marshal
import os
import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool
from soma_lsp.pool.apart import Child, idle_cores
from soma_lsp.pool.trackers import SqliteStore, mlflow_sqlite_apart as apart
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from test_trackers_mlflow_sqlite import sqlite_uri, two_runs
from trackers_support import tracker_home, worker  # noqa: F401

COPIES = 30


@pytest.fixture
def shared(monkeypatch) -> list[int]:
    """Every first read shared in chunks of 3 runs, this process slowed to 0.2 s a chunk so that the
    child reads some; gives the number of runs of each chunk built from what the child sent."""
    monkeypatch.setattr(apart, "APART_RUNS", 1)
    monkeypatch.setattr(apart, "CHUNK_RUNS", 3)
    monkeypatch.setattr(apart, "spare_cores", lambda: 1)
    monkeypatch.setattr(apart, "idle_cores", lambda spare: spare)
    scan = SqliteStore.scan

    def slow(self, hint=None):
        if isinstance(hint, range):
            time.sleep(0.2)
        return scan(self, hint)

    monkeypatch.setattr(SqliteStore, "scan", slow)
    received: list[int] = []
    loads = apart.Share._loads

    def spy(self, runs):
        built = loads(self, runs)
        received.append(len(built))
        return built

    monkeypatch.setattr(apart.Share, "_loads", spy)
    return received


@pytest.fixture
def store(worker, tmp_path) -> Path:
    """Two runs logged by the real client, then `COPIES` copies of the failed one as rows — one tagged
    with an importance that is no number (a validation problem, not a record)."""
    db = tmp_path / "mlflow.db"
    failed, _ = two_runs(worker, db)
    with sqlite3.connect(db) as c:
        for i in range(COPIES):
            run = uuid.uuid4().hex
            for table in ("runs", "tags", "params", "latest_metrics"):
                cursor = c.execute(f"SELECT * FROM {table} WHERE run_uuid = ?", (failed,))
                columns = [d[0] for d in cursor.description]
                rows = [tuple(run if name == "run_uuid" else value for name, value in zip(columns, row))
                        for row in cursor]
                c.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                              rows)
            c.execute("INSERT INTO tags (key, value, run_uuid) VALUES ('run.index', ?, ?)", (str(i), run))
            if i == 7:
                c.execute("INSERT INTO tags (key, value, run_uuid) VALUES ('soma.importance', 'high', ?)", (run,))
    return db


def read_alone(db: Path, monkeypatch) -> SqliteStore:
    with monkeypatch.context() as m:
        m.setattr(apart, "APART_RUNS", 10**9)
        alone = SqliteStore(str(db))
        alone.loads = alone.sync({})
    return alone


def runs_of(changes: dict, store: SqliteStore) -> dict:
    return {key: load for key, load in changes.items() if key != store.entry}


def test_a_shared_first_read_builds_what_a_read_here_builds(store, shared, monkeypatch):
    reader = SqliteStore(str(store))
    loads = runs_of(reader.sync({}), reader)
    alone = read_alone(store, monkeypatch)
    assert sum(shared) > 0  # the child read some chunks
    expected = runs_of(alone.loads, alone)
    assert loads.keys() == expected.keys() and len(loads) == COPIES + 2
    for key, load in expected.items():
        assert (loads[key].records, loads[key].problems, loads[key].stamp) == (load.records, load.problems, load.stamp)
        assert all(a.origin == b.origin and a.created_at == b.created_at
                   for a, b in zip(loads[key].records, load.records))
    assert sum(1 for load in loads.values() if not load.records and load.problems) == 1  # the bad importance
    assert (reader._open, reader._last_rowid) == (alone._open, alone._last_rowid)


def test_after_a_shared_first_read_the_store_is_followed_as_ever(store, shared):
    reader = SqliteStore(str(store))
    loads = runs_of(reader.sync({}), reader)
    known = {key: load.stamp for key, load in loads.items()}
    assert runs_of(reader.sync(known, "runs"), reader) == {}  # a quick poll: every run's row as read
    assert runs_of(reader.sync(known), reader) == {}  # a full sync: every run's fingerprint as read
    # a copy of the failed run, which has a note to edit (not the `baseline` run, which has none, nor
    # the copy whose importance is no number, which makes no record): keys are random uuids
    edited = next(key for key, load in sorted(loads.items())
                  if load.records and load.records[0].headline == "theta 500k diverges")[len(reader.prefix):]
    with sqlite3.connect(store) as c:
        c.execute("UPDATE tags SET value = 'a new note' WHERE key = 'mlflow.note.content' AND run_uuid = ?", (edited,))
    (changed,) = runs_of(reader.sync(known), reader).values()
    assert changed.path == reader.prefix + edited and changed.records[0].headline == "a new note"


def test_a_pool_committing_a_shared_read_as_it_comes_holds_every_record(store, shared, monkeypatch):
    pool = LivePool([sqlite_uri(store)], LiveIndex(), batch_records=4)
    pool.load()
    with monkeypatch.context() as m:
        m.setattr(apart, "APART_RUNS", 10**9)
        alone = LivePool([sqlite_uri(store)], LiveIndex())
        alone.load()
    assert sum(shared) > 0
    assert sorted(pool.records(), key=lambda r: r.id) == sorted(alone.records(), key=lambda r: r.id)
    assert len(pool) == COPIES + 1 and pool.problems == alone.problems
    query = RetrievalQuery(text="theta diverges", limit=None, now=None)
    assert [(r.record.id, r.score) for r in pool.index.rank(query)] == \
        [(r.record.id, r.score) for r in alone.index.rank(query)] != []


def test_a_child_that_fails_leaves_its_chunks_here_and_says_why(store, shared, monkeypatch, caplog):
    monkeypatch.setattr(apart, "Child", lambda module, args, what: Child("soma_lsp.no_such_module", args, what))
    reader = SqliteStore(str(store))
    with caplog.at_level(logging.WARNING):
        loads = runs_of(reader.sync({}), reader)
    alone = read_alone(store, monkeypatch)
    assert shared == [] and loads.keys() == runs_of(alone.loads, alone).keys()
    assert "apart failed (exit 1)" in caplog.text and "no_such_module" in caplog.text
    assert (reader._open, reader._last_rowid) == (alone._open, alone._last_rowid)


class Written:
    """A child that has written `data` and ended."""

    what = "a child in a test"

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, at: int, size: int, wait: bool = True) -> bytes | None:
        return self.data[at:at + size] if at + size <= len(self.data) else None

    def close(self) -> None:
        pass


def frame(value) -> bytes:
    body = marshal.dumps(value)
    return apart._LENGTH.pack(len(body)) + body


@pytest.mark.parametrize("data", [lambda last: frame((0, [], [])), lambda last: apart._LENGTH.pack(5) + b"junk!",
                                  lambda last: frame((10**6, [("a", b"", None, ())], [])),
                                  lambda last: frame((last, [("a", b"")], [])),
                                  lambda last: frame((last, [], [()]))],
                         ids=["the first chunk first", "no marshal", "no such chunk", "no run", "no runs row"])
def test_a_child_that_sends_anything_malformed_leaves_its_chunks_here(store, shared, monkeypatch, caplog, data):
    # (args: the database, the busy timeout, then each chunk's start but the first's)
    monkeypatch.setattr(apart, "Child", lambda module, args, what: Written(data(len(args) - 2)))
    reader = SqliteStore(str(store))
    with caplog.at_level(logging.ERROR):
        loads = runs_of(reader.sync({}), reader)
    alone = read_alone(store, monkeypatch)
    assert sum(shared) == 0 and loads.keys() == runs_of(alone.loads, alone).keys()
    assert "its answer is malformed; read here" in caplog.text


@pytest.mark.parametrize("load, idle", [(0.2, 1), (1.4, 1), (1.6, 0), (3.0, 0)])
def test_a_child_only_on_a_core_left_idle(monkeypatch, load, idle):
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert idle_cores(1) == idle and idle_cores(0) == 0
