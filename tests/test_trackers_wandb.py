"""W&B run folders written by the real wandb client (offline mode): offline runs read from their binary
log, online-style runs from `files/` (which win), the `latest-run` symlink not counted twice, a damaged
log reported with the run skipped, and live updates through the follower."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from soma_lsp.pool.trackers import WandbFolder, wandb_log
from soma_lsp.pool.trackers.wandb_dir import app_url
from soma_lsp.pool.trackers.follow import TrackerFollower
from soma_lsp.records import Status
from trackers_support import pool_of, tracker_env, tracker_home, wait_for, worker  # noqa: F401


def offline_run(worker, root: Path, name: str, **arguments) -> tuple[str, Path]:
    arguments.setdefault("notes", "theta 500k diverges at 2k steps\nloss spikes")
    answer = worker("wandb_run", dir=str(root), name=name, **arguments)
    run, folder = answer["run_id"], Path(answer["folder"])
    log = folder / f"run-{run}.wandb"  # wandb's core process may still be flushing after finish()
    wait_for(lambda: wandb_log.read(log.read_bytes()).exit_code is not None, "the run's exit record")
    return run, folder


def make_online(folder: Path, *, config: str, summary: dict, metadata: dict) -> Path:
    """An online run's folder as W&B leaves it: `run-…` with files/config.yaml, wandb-summary.json and
    wandb-metadata.json (an online run needs a W&B server; its log is the same as an offline run's)."""
    online = folder.with_name(folder.name.replace("offline-run-", "run-"))
    folder.rename(online)
    (online / "files").mkdir(exist_ok=True)
    (online / "files" / "config.yaml").write_text(config)
    (online / "files" / "wandb-summary.json").write_text(json.dumps(summary))
    (online / "files" / "wandb-metadata.json").write_text(json.dumps(metadata))
    return online


def test_offline_and_online_runs_become_records(worker, tmp_path):
    failed, _ = offline_run(worker, tmp_path, "rope-500k", tags=["rope", "dead-end"],
                            config={"rope_theta": 500000, "lr": 3e-4}, metrics=[{"val_loss": 3.5}, {"val_loss": 4.1}],
                            exit_code=1)
    done, folder = offline_run(worker, tmp_path, "baseline", notes=None, config={"lr": 1e-3},
                               metrics=[{"val_loss": 3.0}], exit_code=0, entity="team")
    online = make_online(folder, config="wandb_version: 1\n_wandb:\n  value: {}\nlr:\n  desc: null\n  value: 0.002\n",
                         summary={"val_loss": 2.5, "_runtime": 3, "_step": 0},
                         metadata={"git": {"remote": "https://example.org/team/model.git",
                                           "commit": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"},
                                   "startedAt": "2026-03-01T12:00:00.000000Z"})
    wandb = tmp_path / "wandb"
    assert (wandb / "latest-run").is_symlink()
    (wandb / "settings").write_text("[default]\nbase_url = https://api.ml.example.org\n")  # a team's W&B server
    pool = pool_of(wandb)
    assert [type(s) for s in pool.trackers] == [WandbFolder]
    assert len(pool) == 2 and pool.summary()["errors"] == 0  # latest-run is not a third run
    record = pool.get(failed)
    assert record.name == "rope-500k" and record.status is Status.FAILED
    assert record.headline == "theta 500k diverges at 2k steps" and "loss spikes" in record.notes
    assert {"rope_theta=500000", "lr=0.0003"} <= set(record.notes.split())
    assert record.tags == ("rope", "dead-end") and record.metrics[0].value == 4.1
    assert record.commit is None or len(record.commit) == 40  # (the worker's cwd is not a git work tree)
    assert record.origin == f"W&B run folder {wandb} · project soma"
    assert record.url is None  # an offline run has no page
    other = pool.get(done)
    assert other.status is Status.SUCCEEDED and other.source.path == str(online)
    assert "lr=0.002" in other.notes.split() and [(m.name, m.value) for m in other.metrics] == [("val_loss", 2.5)]
    assert other.commit == "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
    assert other.repo == "https://example.org/team/model.git"
    assert other.created_at.isoformat().startswith("2026-03-01T12:00:00")
    assert other.url == f"https://app.ml.example.org/team/soma/runs/{done}"  # the UI, as wandb derives it


def test_damaged_log_skips_that_run_by_name_and_loads_the_others(worker, tmp_path):
    good, _ = offline_run(worker, tmp_path, "good")
    bad, folder = offline_run(worker, tmp_path, "bad")
    log = folder / f"run-{bad}.wandb"
    data = bytearray(log.read_bytes())
    data[20] ^= 0xFF  # a flipped byte inside the first record: its checksum fails
    log.write_bytes(bytes(data))
    pool = pool_of(tmp_path / "wandb")
    assert [r.id for r in pool.records()] == [good]
    (problem,) = pool.problems[str(folder)]
    assert problem.kind == "tracker" and f"W&B run {bad} skipped" in problem.message
    assert "checksum mismatch" in problem.message


def test_unreadable_summary_is_a_warning_and_the_run_still_loads(worker, tmp_path):
    run, folder = offline_run(worker, tmp_path, "half")
    online = make_online(folder, config="lr: {value: 1}\n", summary={}, metadata={})
    (online / "files" / "wandb-summary.json").write_text('{"val_loss": 2.')  # being written
    pool = pool_of(tmp_path / "wandb")
    assert pool.get(run) is not None
    (problem,) = pool.problems[str(online)]
    assert problem.severity == "warning" and "wandb-summary.json unreadable" in problem.message


def test_wandb_folder_live_add_change_delete(worker, tmp_path):
    first, folder = offline_run(worker, tmp_path, "first")
    pool = pool_of(tmp_path / "wandb")
    with TrackerFollower(pool):
        second, _ = offline_run(worker, tmp_path, "second", exit_code=1)
        wait_for(lambda: pool.get(second) is not None and pool.get(second).status is Status.FAILED, "a new run")
        online = make_online(folder, config="lr: {value: 5}\n", summary={"val_loss": 1.5}, metadata={})
        wait_for(lambda: pool.get(first) is not None and pool.get(first).metrics
                 and pool.get(first).metrics[0].value == 1.5, "a run's summary written")
        shutil.rmtree(online)
        wait_for(lambda: pool.get(first) is None, "a run folder removed")
    assert len(pool) == 1 and os.path.isdir(tmp_path / "wandb")


def test_a_log_spanning_many_blocks_reads_whole(worker, tmp_path):
    long_text = "x" * 100_000  # one config record over several 32 KiB blocks (first, middle, last chunks)
    run, folder = offline_run(worker, tmp_path, "long", config={"blob": long_text, "rope_theta": 10000},
                              metrics=[{"step_loss": float(i)} for i in range(2000)])
    assert (folder / f"run-{run}.wandb").stat().st_size > 3 * 32 * 1024
    record = pool_of(tmp_path / "wandb").get(run)
    assert "rope_theta=10000" in record.notes.split() and f"blob={long_text}" in record.notes.split()
    assert [(m.name, m.value) for m in record.metrics] == [("step_loss", 1999.0)]


def test_a_run_on_uncommitted_code_carries_its_patch_to_the_commit_ties(worker, tmp_path):
    """W&B keeps a run's uncommitted changes as files/diff.patch; the record points at it (kept through
    a snapshot), and the commit ties read it — a FIFO in its place is not waited for."""
    from soma_lsp.server.commit_service import run_of
    from soma_lsp.stored import RecordStore, encode

    run, folder = offline_run(worker, tmp_path, "norm-eps", config={"lr": 3e-4}, exit_code=1)
    online = make_online(folder, config="wandb_version: 1\n", summary={},
                         metadata={"git": {"commit": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"}})
    patch = online / "files" / "diff.patch"
    patch.write_bytes(b"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n")
    record = pool_of(tmp_path / "wandb").get(run)
    assert record.patch == str(patch) and run_of(record).patch == patch.read_bytes()
    blob = encode(record)
    store = RecordStore(blob, np.array([0, len(blob)]), [(0, record.source.path)])
    assert store[0].patch == str(patch)  # what a restart from the snapshot gives back
    patch.unlink()
    os.mkfifo(patch)
    assert run_of(record).patch is None


def test_the_run_page_address_is_derived_from_the_folders_settings_as_wandb_does(tmp_path):
    assert app_url(str(tmp_path)) == "https://wandb.ai"  # no settings: W&B's cloud
    for base, app in [("https://api.wandb.ai", "https://wandb.ai"),
                      ("https://api.ml.example.org/", "https://app.ml.example.org"),
                      ("http://localhost:8080", "http://localhost:8080")]:
        (tmp_path / "settings").write_text(f"[default]\nbase_url = {base}\n")
        assert app_url(str(tmp_path)) == app
    (tmp_path / "settings").write_text("not ini at all [")
    assert app_url(str(tmp_path)) == "https://wandb.ai"


LIVE_RUN = """
import sys, time, wandb
run = wandb.init(project="soma", name="killed", notes="killed mid-run", dir=sys.argv[1], mode="offline")
run.log({"val_loss": 3.0})
print(run.id, flush=True)
time.sleep(600)
"""


def test_a_run_killed_without_an_exit_record_is_crashed_once_its_log_is_still(tracker_home, tmp_path):
    """A real run process killed with SIGKILL (the job and wandb's own service process, as a scheduler
    or the OOM killer does) leaves no exit record: running while its log is fresh, crashed once the log
    has been still for `still_seconds` — found by the follower's periodic full scan, with no event."""
    process = subprocess.Popen([sys.executable, "-c", LIVE_RUN, str(tmp_path)], env=tracker_env(tracker_home),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        run = process.stdout.readline().strip()
        assert run, "the run process did not start"
        pool = pool_of(tmp_path / "wandb")
        wait_for(lambda: pool.sync_tracker(pool.trackers[0]) is None and pool.get(run) is not None
                 and pool.get(run).headline == "killed mid-run", "the live run's run record")
        assert pool.get(run).status is Status.RUNNING
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    (source,) = pool.trackers
    source.still_seconds, source.rescan_seconds = 2.0, 0.2  # (instead of 5 minutes and 60 s)
    with TrackerFollower(pool):
        wait_for(lambda: pool.get(run).status is Status.CRASHED, "the killed run marked crashed")
    assert pool.get(run).headline == "killed mid-run"


def test_the_field_numbers_decoded_by_hand_are_those_of_the_installed_wandb(worker):
    """The log is decoded without wandb (docs/decisions.md): the numbers it reads must be W&B's own.
    Protobuf keeps a field's number for good; this catches a wandb that broke that rule."""
    read = {"Record.history": wandb_log.R_HISTORY, "Record.summary": wandb_log.R_SUMMARY,
            "Record.config": wandb_log.R_CONFIG, "Record.run": wandb_log.R_RUN, "Record.exit": wandb_log.R_EXIT,
            "Record.environment": wandb_log.R_ENVIRONMENT, "RunRecord.run_id": wandb_log.RUN_ID,
            "RunRecord.entity": wandb_log.RUN_ENTITY, "RunRecord.project": wandb_log.RUN_PROJECT,
            "RunRecord.config": wandb_log.RUN_CONFIG, "RunRecord.display_name": wandb_log.RUN_NAME,
            "RunRecord.notes": wandb_log.RUN_NOTES, "RunRecord.tags": wandb_log.RUN_TAGS,
            "RunRecord.start_time": wandb_log.RUN_START, "RunRecord.git": wandb_log.RUN_GIT,
            "ConfigItem.key": wandb_log.ITEM_KEY, "ConfigItem.nested_key": wandb_log.ITEM_NESTED,
            "ConfigItem.value_json": wandb_log.ITEM_JSON, "SummaryItem.key": wandb_log.ITEM_KEY,
            "SummaryItem.nested_key": wandb_log.ITEM_NESTED, "SummaryItem.value_json": wandb_log.ITEM_JSON,
            "HistoryItem.key": wandb_log.ITEM_KEY, "HistoryItem.nested_key": wandb_log.ITEM_NESTED,
            "HistoryItem.value_json": wandb_log.ITEM_JSON, "ConfigRecord.update": wandb_log.UPDATE,
            "ConfigRecord.remove": wandb_log.REMOVE, "SummaryRecord.update": wandb_log.UPDATE,
            "SummaryRecord.remove": wandb_log.REMOVE, "HistoryRecord.item": wandb_log.UPDATE,
            "RunExitRecord.exit_code": wandb_log.EXIT_CODE, "EnvironmentRecord.git": wandb_log.ENV_GIT,
            "GitRepoRecord.remote_url": wandb_log.GIT_REMOTE, "GitRepoRecord.commit": wandb_log.GIT_COMMIT}
    assert worker("wandb_fields", fields=sorted(read)) == read
