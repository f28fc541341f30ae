"""The LSP features on top of a tracker pool: a FAILED MLflow run tagged `soma.code` warns on its
definition, with no soma record file anywhere (the pool is only the `mlruns/` folder)."""

from __future__ import annotations

from conftest import close_session, open_session
from test_diagnostics import TRANSFORMER, soma
from trackers_support import tracker_home, worker  # noqa: F401


async def test_failed_mlflow_run_tagged_soma_code_warns_on_its_definition(worker, workspace):
    store = workspace / "mlruns"
    run = worker("mlflow_run", uri=store.as_uri(), experiment="rope", name="rope-from-mlflow", status="FAILED",
                 description="theta 1M diverges at 3k steps",
                 tags={"soma.code": "model/transformer.py::RotaryEmbedding"})["run_id"]
    session = await open_session(workspace, init_options={"pool": str(store)})
    try:
        uri = session.open(TRANSFORMER)
        found = await session.diagnostics(uri, lambda d: bool(soma(d, run)))
        [warning] = soma(found, run)
        line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
        assert warning.range.start.line == line and "theta 1M diverges at 3k steps" in warning.message
        [related] = warning.related_information
        assert related.location.uri.startswith(store.as_uri()) and related.location.uri.endswith(f"{run}/meta.yaml")
    finally:
        await close_session(session)


async def test_a_run_logged_while_the_server_runs_reaches_the_warnings(worker, workspace):
    """Live, through the server's own tracker follower: a failed run logged into an SQLite store after
    the server started warns on its definition without a restart; its hover says where it came from."""
    store = workspace / "mlflow.db"
    worker("mlflow_run", uri=f"sqlite:///{store}", experiment="norm", name="warmup-first", status="FINISHED")
    session = await open_session(workspace, init_options={"pool": f"sqlite:///{store}"})
    try:
        uri = session.open(TRANSFORMER)
        run = worker("mlflow_run", uri=f"sqlite:///{store}", experiment="rope", name="rope-live", status="FAILED",
                     description="theta 2M diverges at 1k steps",
                     tags={"soma.code": "model/transformer.py::RotaryEmbedding"})["run_id"]
        found = await session.diagnostics(uri, lambda d: bool(soma(d, run)))
        [warning] = soma(found, run)
        assert "rope-live" in warning.message
        line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
        text = (await session.hover(uri, line, col + 6)).contents.value
        assert "rope-live" in text and "from MLflow SQLite store" in text and "experiment rope" in text
        status = await session.command("soma.poolStatus")
        assert status["pools"] == [f"sqlite:///{store}"]
    finally:
        await close_session(session)
