"""An MLflow file store (`mlruns/`) written by the real mlflow client, read as a pool: the mapping, live
updates through the follower, and bad data (half-written runs, invalid soma tags)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from soma_lsp.pool.trackers import FileStore
from soma_lsp.pool.trackers.follow import TrackerFollower
from soma_lsp.records import Status
from trackers_support import HERE, mlflow_server, pool_of, tracker_home, wait_for, worker  # noqa: F401

FIXTURE_RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "workspace" / "mlruns"
ROPE_TAGS = {"soma.code": "model/rope.py::RotaryEmbedding", "soma.baseline.val_loss": "3.3",
             "soma.goal.val_loss": "min", "soma.architecture": "RotaryEmbedding, Attention", "team": "nlp"}


def head() -> str | None:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def log_rope(worker, uri, **overrides):
    arguments = dict(uri=uri, experiment="rope", name="rope-500k", status="FAILED",
                     description="theta 500k diverges at 2k steps\nloss spikes from step 1.8k",
                     params={"rope_theta": 500000, "lr": 3e-4},
                     metrics=[["val_loss", 3.5, 0], ["val_loss", 4.1, 1]], tags=ROPE_TAGS)
    arguments.update(overrides)
    return worker("mlflow_run", **arguments)["run_id"]


def test_file_store_runs_become_records(worker, tmp_path):
    store = tmp_path / "mlruns"
    uri = store.as_uri()
    failed = log_rope(worker, uri)
    done = worker("mlflow_run", uri=uri, experiment="rope", name="baseline", status="FINISHED")["run_id"]
    killed = worker("mlflow_run", uri=uri, experiment="other", name="k", status="KILLED",
                    tags={"soma.status": "regressed"})["run_id"]
    pool = pool_of(store)
    assert [type(s) for s in pool.trackers] == [FileStore] and pool.roots == []
    assert len(pool) == 3 and pool.summary()["errors"] == 0
    record = pool.get(failed)
    assert record.name == "rope-500k" and record.status is Status.FAILED
    assert record.headline == "theta 500k diverges at 2k steps"
    assert "loss spikes from step 1.8k" in record.notes and "rope_theta=500000" in record.notes.split()
    assert record.architecture == (("RotaryEmbedding", 1.0), ("Attention", 1.0))
    (metric,) = record.metrics
    assert (metric.name, metric.value, metric.baseline, metric.goal, metric.moved_wrong_way) == \
        ("val_loss", 4.1, 3.3, "min", True)
    assert [str(t) for t in record.code] == ["model/rope.py::RotaryEmbedding"]
    assert record.commit == head()  # mlflow.source.git.commit: the worker script lives in this repository
    assert record.tags == ("team=nlp",)
    assert record.origin == f"MLflow file store {store} · experiment rope"
    assert record.source.path.endswith(f"{failed}/meta.yaml")
    assert record.created_at is not None and record.finished_at >= record.created_at
    assert pool.get(done).status is Status.SUCCEEDED and pool.get(done).notes is None
    assert pool.get(killed).status is Status.REGRESSED  # soma.status wins over KILLED


def test_file_store_live_add_change_delete(worker, tmp_path):
    store = tmp_path / "mlruns"
    uri = store.as_uri()
    first = log_rope(worker, uri)
    other = worker("mlflow_run", uri=uri, experiment="rope", name="baseline")["run_id"]
    pool = pool_of(store)
    kept = pool.get(other)
    with TrackerFollower(pool):
        added = worker("mlflow_run", uri=uri, experiment="rope", name="added")["run_id"]
        wait_for(lambda: pool.get(added) is not None, "a run logged")
        worker("mlflow_tag", uri=uri, run_id=first, key="soma.conclusion", value="theta too large")
        wait_for(lambda: pool.get(first).headline == "theta too large", "a tag edited")
        assert pool.get(other) is kept  # an unchanged run is not read again
        worker("mlflow_delete", uri=uri, run_id=first)
        wait_for(lambda: pool.get(first) is None, "a run deleted")
        worker("mlflow_rename_experiment", uri=uri, experiment="rope", name="rope-sweep")
        wait_for(lambda: pool.get(other).origin.endswith("· experiment rope-sweep"), "an experiment renamed")
        worker("mlflow_delete_experiment", uri=uri, experiment="rope-sweep")
        wait_for(lambda: len(pool) == 0, "an experiment deleted")
    assert pool.summary()["errors"] == 0


def test_half_written_run_and_bad_tags_are_reported_and_the_rest_loads(worker, tmp_path):
    store = tmp_path / "mlruns"
    uri = store.as_uri()
    good = log_rope(worker, uri)
    bad_code = log_rope(worker, uri, name="bad-code", tags={"soma.code": "/etc/passwd"})
    experiment = next(p for p in store.iterdir() if (p / good).is_dir())
    half = experiment / "0123456789abcdef0123456789abcdef"
    (half / "tags").mkdir(parents=True)
    (half / "meta.yaml").write_text("run_id: 0123456789abcdef\nstatus: [3, \n")  # cut off mid-write
    (experiment / "fedcba9876543210fedcba9876543210").mkdir()  # a folder MLflow has not filled yet
    pool = pool_of(store)
    assert [r.id for r in pool.records()] == [good]
    problems = pool.problems
    (code_problem,) = problems[str(experiment / bad_code / "meta.yaml")]
    assert code_problem.field == "code[0]" and "relative to the workspace root" in code_problem.message
    (half_problem,) = problems[str(half / "meta.yaml")]
    assert half_problem.severity == "warning" and "incomplete MLflow run folder" in half_problem.message
    with TrackerFollower(pool):  # MLflow finishes writing the run: it loads
        (half / "meta.yaml").write_text(f"run_id: {half.name}\nrun_name: late\nstatus: 3\n"
                                        "lifecycle_stage: active\nstart_time: 1700000000000\n")
        wait_for(lambda: pool.get(half.name) is not None, "the completed run")
    assert pool.get(half.name).name == "late" and str(half / "meta.yaml") not in pool.problems


def test_invalid_commit_is_a_clear_record_error(worker, tmp_path):
    store = tmp_path / "mlruns"
    run = log_rope(worker, store.as_uri(), tags={"mlflow.source.git.commit": "not-a-sha"})
    pool = pool_of(store)
    (problem,) = [p for ps in pool.problems.values() for p in ps]
    assert pool.get(run) is None and problem.field == "commit" and "'not-a-sha'" in problem.message


def test_tracker_folders_inside_a_record_folder_are_skipped_with_a_warning(worker, tmp_path):
    """docs/spec.md §1.1: an `mlruns/` or `wandb/` below a folder of soma records is not read as
    records (a run's meta.yaml or wandb-summary.json is none); each is one `not-records` warning, and
    files written into it later are not read either."""
    pool_dir = tmp_path / "pool"
    pool_dir.mkdir()
    (pool_dir / "exp-1.json").write_text('{"id": "exp-1", "name": "kept"}')
    log_rope(worker, (pool_dir / "mlruns").as_uri())
    worker("wandb_run", dir=str(pool_dir), name="w", config={"lr": 1})
    pool = pool_of(pool_dir)
    assert [r.id for r in pool.records()] == ["exp-1"] and pool.trackers == []
    problems = [p for found in pool.problems.values() for p in found if p.kind == "not-records"]
    assert sorted((p.path, p.severity) for p in problems) == [
        (str(pool_dir / "mlruns"), "warning"), (str(pool_dir / "wandb"), "warning")]
    assert "an MLflow file store inside a folder of soma records" in \
        next(p.message for p in problems if p.path.endswith("mlruns"))
    log_rope(worker, (pool_dir / "mlruns").as_uri(), name="later")
    pool.apply([pool_dir / "mlruns"])
    assert [r.id for r in pool.records()] == ["exp-1"] and pool.summary()["errors"] == 0


def test_a_hidden_folder_in_an_experiment_is_no_run_when_an_event_names_it(tmp_path):
    """A folder event scans only the runs it names: a hidden one (a copy being written aside, an editor's
    temporary) is left out there too, as a full scan leaves it out."""
    store = tmp_path / "mlruns"
    shutil.copytree(FIXTURE_RUNS, store)
    run = next(p.parent for p in sorted(store.glob("*/*/meta.yaml")))
    hidden = run.parent / f".{run.name}"
    shutil.copytree(run, hidden)
    source = FileStore(str(store))
    assert source.scan([str(hidden / "meta.yaml")]).runs == {}
    assert str(run / "meta.yaml") in source.scan([str(run / "meta.yaml")]).runs
    assert len(source.scan().runs) == 5
