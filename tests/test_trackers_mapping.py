"""The one mapping from tracker runs to soma records (docs/trackers.md), the record fields it fills
(`repo`, `origin`), and the W&B log framing's refusals — no tracker needed."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

from soma_lsp.pool.trackers import wandb_log
from soma_lsp.pool.trackers.mapping import Run, record_mapping, run_load
from soma_lsp.records import RecordError, Status, parse_record
from soma_lsp.results import location
from soma_lsp.stored import RecordStore, encode


def test_repo_and_origin_are_optional_text_fields():
    record = parse_record({"id": "a", "name": "x", "commit": "1A2B3C4", "repo": "https://example.org/r.git",
                           "origin": "MLflow tracking server http://h:5000 · experiment e"})
    assert (record.commit, record.repo, record.origin) == ("1a2b3c4", "https://example.org/r.git",
                                                           "MLflow tracking server http://h:5000 · experiment e")
    assert record.extra == {}
    for field in ("repo", "origin"):
        with pytest.raises(RecordError) as error:
            parse_record({"id": "a", "name": "x", field: 7})
        assert error.value.field == field and "expected a string" in error.value.problem
    assert parse_record({"id": "a", "name": "x", "repo": " "}).repo is None


def test_repo_and_origin_survive_the_snapshot_encoding():
    record = parse_record({"id": "a", "name": "x", "repo": "r", "origin": "o"})
    blob = encode(record)
    store = RecordStore(blob, np.array([0, len(blob)]), [(0, "sqlite:////db#a")])
    assert (store[0].repo, store[0].origin) == ("r", "o") and store[0] == record


@pytest.mark.parametrize("status, expected", [
    ("FINISHED", Status.SUCCEEDED), ("FAILED", Status.FAILED), ("KILLED", Status.CANCELLED),
    ("RUNNING", Status.RUNNING), ("SCHEDULED", Status.PLANNED), ("3", Status.SUCCEEDED), ("4", Status.FAILED),
    ("finished", Status.SUCCEEDED), ("crashed", Status.CRASHED), ("failed", Status.FAILED),
    ("killed", Status.CANCELLED), (None, Status.UNKNOWN),
])
def test_status_map(status, expected):
    assert parse_record(record_mapping(Run(id="r", status=status))).status is expected


def test_soma_tags_and_params_words():
    run = Run(id="r", name=None, status="FINISHED", notes=None, params={"lr": 0.001, "optimizer": "adam w"},
              tags={"mlflow.runName": "from-tag", "mlflow.note.content": "first line\nsecond",
                    "soma.status": "regressed", "soma.goal.loss": "min", "soma.baseline.loss": "2.0",
                    "soma.importance": "0.9", "soma.code": "a.py::A, b.py", "label": ""},
              metrics={"loss": 2.5, "acc": 0.7})
    record = parse_record(record_mapping(run))
    assert record.name == "from-tag" and record.status is Status.REGRESSED and record.importance == 0.9
    assert record.headline == "first line" and record.notes == "first line\nsecond\n\nlr=0.001 optimizer=adam_w"
    assert [(m.name, m.baseline, m.goal) for m in record.metrics] == [("loss", 2.0, "min"), ("acc", None, None)]
    assert [str(t) for t in record.code] == ["a.py::A", "b.py"] and record.tags == ("label",)
    assert parse_record(record_mapping(Run(id="r", tags={"soma.conclusion": "said"}))).headline == "said"


def test_a_bad_soma_tag_is_the_usual_record_error_on_that_run():
    load = run_load("key", Run(id="r", metrics={"loss": 1.0}, tags={"soma.baseline.loss": "high"}), (1,))
    (problem,) = load.problems
    assert load.records == [] and problem.field == "metrics.loss.baseline" and "'high'" in problem.message


def test_a_tracker_location_keeps_its_uri():
    record = parse_record({"id": "r", "name": "x"}, source=None)
    assert location(record) is None
    load = run_load("http://h:5000/#/experiments/1/runs/r", Run(id="r"), (1,))
    assert location(load.records[0]) == {"uri": "http://h:5000/#/experiments/1/runs/r", "line": 0}


def chunk(kind: int, data: bytes) -> bytes:
    return struct.pack("<IHB", zlib.crc32(data, zlib.crc32(bytes([kind]))), len(data), kind) + data


def test_log_framing_refuses_what_it_cannot_follow():
    with pytest.raises(wandb_log.LogError, match="not a W&B run log"):
        wandb_log.read(b":W&B" + struct.pack("<HB", 0xBEE1, 1))  # version 1
    record = bytes([0x8A, 0x01, 2, 0x0A, 0])  # Record.run (17) holding RunRecord.run_id = ""
    assert wandb_log.read(wandb_log.HEADER + chunk(1, record)).id is None
    with pytest.raises(wandb_log.LogError, match="unknown chunk type 9"):
        wandb_log.read(wandb_log.HEADER + chunk(9, record))
    torn = wandb_log.HEADER + chunk(1, record) + chunk(1, record)[:-2]  # a writer mid-record
    assert wandb_log.read(torn) == wandb_log.RunLog()


def test_the_product_reads_trackers_without_importing_mlflow_or_wandb(tmp_path):
    """A file store, a SQLite store, a W&B folder and a server URL loaded in a fresh process: neither
    client is imported (both are heavy and write files on import)."""
    store = tmp_path / "mlruns" / "1"
    (store / "abc1234def" / "tags").mkdir(parents=True)
    (store / "meta.yaml").write_text("experiment_id: '1'\nname: e\nlifecycle_stage: active\n")
    (store / "abc1234def" / "meta.yaml").write_text("run_id: abc1234def\nrun_name: r\nstatus: 4\n"
                                                    "lifecycle_stage: active\nstart_time: 1700000000000\n")
    (store / "abc1234def" / "tags" / "soma.code").write_text("model.py::Block")
    (tmp_path / "wandb" / "offline-run-20260101_000000-w1").mkdir(parents=True)
    code = ("import sys\nfrom soma_lsp.pool import LivePool\n"
            f"pool = LivePool([{str(tmp_path / 'mlruns')!r}, 'sqlite:///{tmp_path}/none.db', "
            f"{str(tmp_path / 'wandb')!r}, 'http://127.0.0.1:9'])\npool.load()\n"
            "assert pool.get('abc1234def').status.value == 'failed', pool.problems\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlflow', 'wandb', 'google')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
