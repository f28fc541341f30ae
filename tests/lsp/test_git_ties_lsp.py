"""Ties from git end to end: a repository made here, records that name only the commit they ran at."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from conftest import Session, TIMEOUT
from git_support import MODEL, commit as commit_files, git
from test_diagnostics import soma



def commit(root, message: str, text: str) -> str:
    return commit_files(root, message, {"model.py": text})


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, "first", MODEL)
    theta = commit(root, "theta 1e6", MODEL.replace("10000.0", "1e6"))
    norm = commit(root, "norm", MODEL.replace("10000.0", "1e6").replace("x / 2", "x / 3"))
    records = [
        {"id": "exp-1", "name": "rope-theta-1e6", "status": "failed", "commit": theta[:10],
         "conclusion": "theta 1e6 diverges at 2k steps", "finished_at": "2026-11-01T00:00:00Z"},
        {"id": "exp-2", "name": "norm-third", "status": "succeeded", "commit": norm,
         "notes": "lr=3e-4", "finished_at": "2026-11-02T00:00:00Z"},
        {"id": "exp-3", "name": "norm-third-hot", "status": "failed", "commit": norm,
         "notes": "lr=3e-3 diverged", "finished_at": "2026-11-02T00:00:00Z"},
    ]
    pool = root / ".soma" / "pool"
    pool.mkdir(parents=True)
    (pool / "runs.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (root / ".gitignore").write_text(".soma/\n")
    return root


async def test_a_dead_end_warns_on_the_definition_its_commit_changed(start_session, repo):
    session: Session = await start_session(workspace=repo)
    uri = session.open("model.py")
    found = await session.diagnostics(uri, lambda d: bool(soma(d, "exp-1")))
    [warning] = soma(found, "exp-1")
    line, col = session.line_of("model.py", "def __init__")
    assert warning.range.start.line == line and warning.range.start.character == col + 4
    assert "ran at" in warning.message and "(1 commit ago), which changed RotaryEmbedding.__init__" in warning.message
    assert "unchanged since" in warning.message
    # exp-3 failed at the same code where exp-2 succeeded: the code is not blamed
    assert not soma(found, "exp-3")
    theta_line, theta_col = session.line_of("model.py", "self.theta = theta")
    hover = await session.hover(uri, theta_line, theta_col + 6)
    text = hover.contents.value
    assert "rope-theta-1e6" in text and "⚓ tied to this code" in text
    assert "(1 commit ago), which changed `RotaryEmbedding.__init__` · unchanged since" in text
    norm_line, norm_col = session.line_of("model.py", "class RMSNorm")
    text = (await session.hover(uri, norm_line, norm_col + 7)).contents.value
    assert "1 run at `" in text and "succeeded; this one differs in lr=3e-3: not blamed on the code" in text


async def test_changed_since_after_a_later_commit(start_session, repo):
    commit(repo, "theta again", MODEL.replace("10000.0", "5e5").replace("x / 2", "x / 3"))
    session: Session = await start_session(workspace=repo)
    uri = session.open("model.py")
    found = await session.diagnostics(uri, lambda d: bool(soma(d, "exp-1")))
    [warning] = soma(found, "exp-1")
    assert "(2 commits ago)" in warning.message and "this code changed since" in warning.message


async def test_commit_warnings_have_their_own_severity(start_session, repo):
    session: Session = await start_session(workspace=repo, init_options={"deadEnds": {"commitSeverity": "off"}})
    uri = session.open("model.py")
    line, col = session.line_of("model.py", "self.theta = theta")

    async def hover_text() -> str:
        hover = await session.hover(uri, line, col + 6)
        return hover.contents.value if hover is not None else ""

    text = await hover_text()
    for _ in range(int(TIMEOUT / 0.1)):  # the ties arrive in the background
        if "ran at" in text:
            break
        await asyncio.sleep(0.1)
        text = await hover_text()
    assert "ran at" in text  # the tie is there …
    assert not soma(await session.diagnostics(uri), "exp-1")  # … but warns not


async def test_no_repository_no_commit_ties_and_nothing_else_disturbed(start_session, repo):
    shutil.rmtree(repo / ".git")
    session: Session = await start_session(workspace=repo)
    uri = session.open("model.py")
    found = await session.diagnostics(uri)
    assert not soma(found)
    listed = await session.command("soma.findRelatedExperiments", {"text": "theta diverges"})
    assert "exp-1" in {r["id"] for r in listed}
