"""An MLflow SQLite store (`sqlite:///mlflow.db`), read with the standard library, read-only.

The database is opened `mode=ro` and only read. Its schema version (`alembic_version`) must be one
this reader knows — those of MLflow's migrations up to the version named below, all of which keep the
tables and columns read here — else the store is refused with the version named: a newer MLflow
may have moved what we read, and wrong records are worse than none. Tag and note edits touch no
timestamp, so every full sync reads every active run's rows (≈ 20 µs a run) and rebuilds only the
runs whose rows' fingerprint changed; `changed()` is the cheap check the follower polls (the database
and WAL files' stat, `PRAGMA data_version`), and a quick sync (`hint="runs"`) reads only the runs new
since the last read (a `rowid` above the largest seen) and those still open (RUNNING, SCHEDULED) — the
cost of a quick poll is theirs, not the store's size. A first read of a big store may be shared with a
child process (`mlflow_sqlite_apart`; its `main` is here).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import orjson

from ..loader import RACY_NS, FileLoad

from . import mlflow_sqlite_apart
from .mapping import Run, run_load
from .source import Scan, TrackerError, TrackerSource, everything, fingerprint, stat_of

#: `alembic_version.version_num` of every MLflow schema up to MLflow 3.17 (its `db_migrations`)
KNOWN_VERSIONS = frozenset("""
0584bdc529eb 0a8213491aaa 0c779009ac13 17e22815139b 181f10493468 1971f2d9a75b 1a0cddfcaa16 1b5f0d9ad7c1
1bd49d398cd23 27a6a02d2cf1 2b4d017a5e9b 2c33131f4dae 2d6e25af4d3e 3500859a5d39 39d1c3be5f05 3da73c924c2f
400f98739977 4465047574b1 451aebb31d03 534353b11cbc 5b0e9adcef9c 5d2d30f0abce 6953534de441 6f8d9c3b2a1e
71994744cf8e 728d730b5ebd 75868b020152 76601a5f987d 770bee3ae1dd 7ac759974ad8 7d34483879f0 7f2a7d5fae7d
84291f40a231 867495a8f9d4 89d3d66ed43f 89d4b8295536 90e64c465722 97727af70f4d a1b2c3d4e5f6 a5b4c3d2e1f0
a8b9c0d1e2f3 a8c4a736bde6 acf3f17fdcc7 ae8bbe7743c9 b7c8d9e0f1a2 b7e2c1a4d9f3 b7e4c1a90f23 bd07f7e963c5
bda7b8c39065 bf29a5ff90ea c1d2e3f4a5b6 c3d6457b6d8a c3d9e7f1a2b4 c48cb773bb87 c8d9e0f1a2b3 c9d4e5f6a7b8
cbc13b556ace cc1f77228345 cfd24bdc0731 d0e1f2a3b4c5 d3e4f5a6b7c8 da6fb0208061 dc11669786a5 de4033877273
df50e92ffc5e e1f2a3b4c5d6 f5a4f2784254
""".split())

#: every active run with its tags, params and latest metrics, each as a JSON array of [key, value] pairs,
#: built by SQLite: a run is one row, fingerprinted as it comes, and only the runs whose row changed are
#: parsed and mapped. Metric values go as 17 significant digits (exact), NaN as "nan" (MLflow stores NaN
#: as 0 with `is_nan` set). The pairs come in the order of MLflow's `run_uuid` indexes (stable while the
#: rows are); `_load` puts them in key order: sorting them in SQLite (a temporary B-tree per run and
#: table) cost 0.3 s of a 100k-run read, sorting a run's few pairs in Python a tenth of that.
HEADS = "SELECT r.run_uuid, r.name, r.status, r.start_time, r.end_time, r.experiment_id FROM runs AS r"
RUNS = HEADS.replace(" FROM runs AS r", """,
  (SELECT json_group_array(json_array(key, value)) FROM tags WHERE run_uuid = r.run_uuid),
  (SELECT json_group_array(json_array(key, value)) FROM params WHERE run_uuid = r.run_uuid),
  (SELECT json_group_array(json_array(key, CASE WHEN is_nan THEN 'nan' ELSE printf('%!.17g', value) END))
     FROM latest_metrics WHERE run_uuid = r.run_uuid)
FROM runs AS r""")
ACTIVE = " WHERE r.lifecycle_stage != 'deleted'"
SOME = " AND r.run_uuid IN (SELECT value FROM json_each(?))"
ROWIDS = " AND r.rowid >= ? AND r.rowid < ?"
LAST_ROWID = "SELECT ifnull(max(rowid), 0) FROM runs"  # (the table's b-tree end: no scan)
ROWID_SPAN = "SELECT ifnull(min(rowid), 0), ifnull(max(rowid), 0) FROM runs"
#: a run's status while MLflow may still update its `runs` row (end it): a quick poll re-reads these runs'
#: rows; what else changes in a finished run's row (a rename, a deletion, a run resumed) waits for the
#: next full sync, which every change brings within `TrackerFollower.sqlite_full_seconds`
OPEN = ("RUNNING", "SCHEDULED")
#: the runs a quick poll looks at: those added since (a `rowid` above the largest seen: SQLite gives a
#: new row the largest rowid + 1) and those open at the last read, each by its index (the rowid, the
#: primary key), never a scan
NEW_OR_OPEN = f"{HEADS}{ACTIVE} AND r.rowid > ? UNION ALL {HEADS}{ACTIVE}{SOME}"
OPEN_NOW = f"{HEADS}{ACTIVE} AND r.status IN {OPEN}"

BUSY_SECONDS = 2.0  # how long a read waits for a writer's lock before the store is reported locked
READ_RUNS = 2_000  # runs read in one read transaction (`SqliteStore.scan`): what a writer may wait for


class SqliteStore(TrackerSource):
    kind = "MLflow SQLite store"
    follow = "poll"

    def __init__(self, path: str, *, busy_seconds: float = BUSY_SECONDS) -> None:
        entry = "sqlite:///" + path
        super().__init__(entry, entry + "#")
        self.path = path
        self.busy_seconds = busy_seconds
        self._seen: tuple | None = None
        self._last_rowid: int | None = None  # the largest `rowid` of `runs` at the last read (None: none yet)
        self._open: dict[str, tuple] = {}  # run id → its `runs` columns, of the runs OPEN at the last read
        self._watch: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if not os.path.isfile(self.path):
            raise TrackerError(f"no MLflow database at {self.path}")
        try:
            return sqlite3.connect(f"file:{quote(self.path)}?mode=ro", uri=True, timeout=self.busy_seconds,
                                   check_same_thread=False)
        except sqlite3.Error as error:
            raise TrackerError(f"cannot open the MLflow database {self.path}: {error}") from None

    def changed(self) -> bool:
        """Whether the database may have changed since the last scan (its files' stat, or another
        connection's commit as `PRAGMA data_version` sees it). Never raises."""
        return self._state() != self._seen

    def _state(self) -> tuple:
        stats = tuple(stat_of(path) for path in (self.path, self.path + "-wal"))
        try:
            if self._watch is None:
                self._watch = self._connect()
            version = self._watch.execute("PRAGMA data_version").fetchone()[0]
        except (sqlite3.Error, TrackerError):
            self._watch, version = None, None
        return stats, version

    def sync(self, known, hint=None, early=None):
        """As `TrackerSource.sync`, plus a marker at the store's entry whose stamp is the database
        files' stat as of the last full sync: when a full sync finds it unchanged (and settled: older
        than `RACY_NS`), no run is read — a restart from the snapshot costs a `stat` and a look at the
        runs still open, and the store counts as seen (no poll reads it again until it changes). A quick
        sync (`hint="runs"`) drops the marker: it has not seen tag edits; before any read it is a full one."""
        state = _settled(self._state()[0])
        if hint is None and state is not None and known.get(self.entry) == state:
            self._follow_from_here()
            return {}
        if self._last_rowid is None:
            hint = None  # (nothing read yet: "new since" has no meaning)
        first = hint is None and not any(key != self.entry for key in known)  # nothing held yet
        share = mlflow_sqlite_apart.start(self) if first else None  # (None: small store, no idle core)
        if share is not None:
            changes = self._shared_read(share, early)
        else:
            changes = super().sync(known, hint)  # (the marker, never a run, is replaced right after)
        changes[self.entry] = FileLoad(self.entry, stamp=state) if hint is None else None
        return changes

    def _follow_from_here(self) -> None:
        """What a quick poll starts from — the largest `rowid`, the runs open — read now, for a store
        whose runs the pool already holds as they are (the marker matched)."""
        state = self._state()
        self._last_rowid, self._open = self._reading(
            lambda c: (c.execute(LAST_ROWID).fetchone()[0], {head[0]: head for head in c.execute(OPEN_NOW)}))
        self._seen = state

    def _shared_read(self, share: mlflow_sqlite_apart.Share, early=None) -> dict[str, FileLoad | None]:
        """Every run's load, read here and by a child meanwhile (`mlflow_sqlite_apart`); each chunk
        read goes to `early` (when given) at once."""
        state, self._open, changes = self._state(), {}, {}
        self._open.update(share.read(lambda rowids: _built(self.scan(rowids)), early or changes.update))
        self._seen = state  # (as of before the chunks' reads: a change meanwhile is one more to follow)
        self._last_rowid = share.last_rowid  # (a run added meanwhile is above it: the next quick poll reads it)
        return changes

    def owns(self, key: str) -> bool:
        return key == self.entry or key.startswith(self.prefix)

    def scan(self, hint=None) -> Scan:
        """Every active run (`hint` None), those of a `range` of `rowid`s, or a quick scan (`"runs"`).
        Every active run is read `READ_RUNS` at a time, each part in a read transaction of its own: a
        writer (MLflow logging) waits for one part (≈ 40 ms), not for the whole store (seconds at 100k
        runs, past the 5 s MLflow's SQLite connections wait before failing with "database is locked")."""
        state = self._state()
        if hint == "runs":
            experiments, heads, rows, last = self._reading(self._read_new_or_open)
            self._seen = state
            return self._delta(experiments, heads, rows, last)
        found, opened = {}, {}
        for rowids in [hint] if isinstance(hint, range) else self._parts():
            experiments, heads, rows, last = self._reading(lambda c: self._read_all(c, rowids))
            opened.update((head[0], head) for head in heads if head[2] in OPEN)
            for row in rows:
                origin = experiments.get(str(row[5]))
                if origin is not None:  # (None: a run of a deleted experiment)
                    self._found(found, row, origin)
        self._seen = state  # (as of before the parts' reads: a change meanwhile is one more to follow)
        if isinstance(hint, range):
            self._open.update(opened)
        else:  # (the last part reaches past the largest rowid: what was added meanwhile is in it)
            self._open, self._last_rowid = opened, last
        return Scan(found, everything)

    def _parts(self) -> list[range]:
        """`rowid` ranges of about `READ_RUNS` runs each, covering every rowid (`mlflow_sqlite_apart.chunks`)."""
        low, high = self._reading(lambda c: c.execute(ROWID_SPAN).fetchone())
        return mlflow_sqlite_apart.chunks(list(range(low + READ_RUNS, high + 1, READ_RUNS)))

    def _delta(self, experiments: dict[str, str], heads: dict[str, tuple], rows: list[tuple], last: int) -> Scan:
        """A quick scan: the new runs and the open runs whose `runs` columns changed (read whole), and
        the open runs gone — nothing per other run, so it costs what they cost, whatever the store's size."""
        gone = self._open.keys() - heads.keys()
        self._open = {run: head for run, head in heads.items() if head[2] in OPEN}
        self._last_rowid = last
        found = {}
        for row in rows:
            origin = experiments.get(str(row[5]))
            if origin is None:
                gone.add(row[0])
                continue
            self._found(found, row, origin)
        return Scan(found, everything, frozenset(self.prefix + run for run in gone))

    def _found(self, found: dict, row: tuple, origin: str) -> None:
        """Enter one run's row: its fingerprint now (once), its record built only if the pool wants it.
        The fingerprint holds the `origin` too: an experiment renamed changes none of its runs' rows,
        yet every one of its records says where it came from."""
        key, stamp = self.prefix + row[0], fingerprint(row, origin)
        found[key] = (stamp, lambda: self._load(key, row, stamp, origin))

    def _reading(self, read: Callable[[sqlite3.Connection], Any]) -> Any:
        """`read(connection)` in one read transaction (a consistent cut) of the database, its schema
        version checked first; SQLite's errors become `TrackerError`s saying what the user can do."""
        connection = self._connect()
        try:
            self._check_version(connection)
            with connection:
                connection.execute("BEGIN")
                return read(connection)
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise TrackerError(f"the MLflow database {self.path} is locked by a writer "
                                   f"(waited {self.busy_seconds:g} s); keeping the runs read before") from None
            raise TrackerError(f"cannot read the MLflow database {self.path}: {error}") from None
        except sqlite3.DatabaseError as error:
            raise TrackerError(f"the MLflow database {self.path} is damaged or not a database: {error}") from None
        finally:
            connection.close()

    def _check_version(self, connection: sqlite3.Connection) -> None:
        try:
            (version,) = connection.execute("SELECT version_num FROM alembic_version").fetchone() or (None,)
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                raise TrackerError(f"{self.path} is not an MLflow database (no alembic_version table)") from None
            raise
        if version not in KNOWN_VERSIONS:
            raise TrackerError(f"the MLflow database {self.path} has schema version {version!r}, which this "
                               "soma-lsp does not know (MLflow newer than 3.17?); not read")

    def _experiments(self, connection: sqlite3.Connection) -> dict[str, str]:
        """Each active experiment → its runs' `origin`: one string shared by all of them, not one a run."""
        return {str(e): f"{self.kind} {self.path} · experiment {name}" for e, name, stage in
                connection.execute("SELECT experiment_id, name, lifecycle_stage FROM experiments")
                if stage != "deleted"}

    def _read_all(self, connection: sqlite3.Connection, rowids: range) -> tuple:
        """The rows whole of the active runs of a `range` of rowids."""
        experiments, last = self._experiments(connection), connection.execute(LAST_ROWID).fetchone()[0]
        found = connection.execute(RUNS + ACTIVE + ROWIDS, (rowids.start, rowids.stop)).fetchall()
        return experiments, [row[:6] for row in found], found, last

    def _read_new_or_open(self, connection: sqlite3.Connection) -> tuple:
        """The `runs` columns of the runs new or open (`NEW_OR_OPEN`), and the rows whole of those whose
        columns are not as last read."""
        experiments, last = self._experiments(connection), connection.execute(LAST_ROWID).fetchone()[0]
        heads = {head[0]: head for head in
                 connection.execute(NEW_OR_OPEN, (self._last_rowid, orjson.dumps(list(self._open)).decode()))}
        wanted = [run for run, head in heads.items() if self._open.get(run) != head]
        rows = connection.execute(RUNS + ACTIVE + SOME, (orjson.dumps(wanted).decode(),)).fetchall() \
            if wanted else []
        return experiments, heads, rows, last

    def _load(self, key: str, row: tuple, stamp: bytes, origin: str):
        run_uuid, name, status, start, end, _, tags, params, metrics = row
        run = Run(id=run_uuid, name=name or None, status=status, start_ms=start, end_ms=end,
                  tags={k: v or "" for k, v in _pairs(tags)}, params=dict(_pairs(params)),
                  metrics={k: float(v) for k, v in _pairs(metrics)},
                  origin=origin)
        return run_load(key, run, stamp)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None


def _built(scan: Scan) -> dict[str, FileLoad | None]:
    """Every run of a scan built (a chunk of a first read: nothing held to compare with)."""
    return {key: load for key, (_, build) in scan.runs.items() if (load := build()) is not None}


def _pairs(text: str | None) -> list:
    """A run's [key, value] pairs (`RUNS`), in key order."""
    return sorted(orjson.loads(text)) if text else []


def _settled(stats: tuple) -> bytes | None:
    """The database files' stat as a stamp (`fingerprint`), or None while one was modified less than
    `RACY_NS` ago (a write within the clock's granularity could leave it as it was: the loader's rule
    for files)."""
    now = time.time_ns()
    if any(stat is not None and now - stat[1] < RACY_NS for stat in stats):
        return None
    return fingerprint(stats)


def main() -> None:
    """A child reading a share of a first read (`mlflow_sqlite_apart.Share`)."""
    mlflow_sqlite_apart.serve(lambda path, busy_seconds: SqliteStore(path, busy_seconds=busy_seconds))
