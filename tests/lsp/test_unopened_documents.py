"""Requests naming a document the client has not opened (issue 23 #3): read only when it is a regular
file inside a workspace folder or pool root and at most `MAX_UNOPENED` bytes, never on the event
loop; anything else is answered empty (features) or -32602 (`findRelated`), and the server serves on.
Limits: docs/reliability.md."""

from __future__ import annotations

import os

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from conftest import Session
from soma_lsp.server.guard import Unavailable
from soma_lsp.server.unopened import MAX_UNOPENED, read_unopened

TRANSFORMER = "model/transformer.py"
FIND = "soma.findRelatedExperiments"


async def assert_still_serving(session: Session) -> None:
    """A hover on a file of the workspace that is not open is read from disk and answered."""
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    hover = await session.hover(session.uri(TRANSFORMER), line, col + len("class "))
    assert hover is not None and "rope-theta-500k" in hover.contents.value


def hostile_uris(workspace) -> dict[str, str]:
    fifo = workspace / "model" / "pipe.py"
    os.mkfifo(fifo)
    sparse = workspace / "model" / "huge.py"
    with open(sparse, "wb") as f:
        f.truncate(200 * 1024 * 1024)  # 200 MB, sparse: costs no disk
    (workspace / "model" / "passwd.py").symlink_to("/etc/passwd")
    return {"dev-zero": "file:///dev/zero", "fifo": fifo.as_uri(), "sparse-200mb": sparse.as_uri(),
            "etc-passwd": "file:///etc/passwd", "symlink-out": (workspace / "model" / "passwd.py").as_uri(),
            "not-a-file": "untitled:Untitled-1"}


@pytest.mark.parametrize("name", ["dev-zero", "fifo", "sparse-200mb", "etc-passwd", "symlink-out", "not-a-file"])
async def test_a_hostile_unopened_uri_is_answered_empty_and_the_server_serves_on(start_session, workspace, name):
    """`file:///dev/zero` grew the server ~2 GB/s, a FIFO made it deaf for good, a 200 MB file cost
    1 GB and a 4 s stall, `/etc/passwd` was ranked against the pool."""
    uri = hostile_uris(workspace)[name]
    session = await start_session()
    assert await session.hover(uri, 0, 0) is None
    assert await session.lenses(uri) == []
    with pytest.raises(JsonRpcInvalidParams, match="not open"):
        await session.command(FIND, {"uri": uri, "position": {"line": 0, "character": 0}})
    await assert_still_serving(session)


async def test_an_open_document_outside_the_workspace_is_still_served(start_session, tmp_path):
    """The limits are for reading from disk: what the client sent is served wherever it lives."""
    session = await start_session()
    outside = tmp_path / "elsewhere.py"
    text = (session.workspace / TRANSFORMER).read_text(encoding="utf-8")
    outside.write_text(text, encoding="utf-8")
    uri = session.open(str(outside), text)
    line = next(n for n, l in enumerate(text.splitlines()) if "class RotaryEmbedding" in l)
    hover = await session.hover(uri, line, len("class ") + text.splitlines()[line].index("class "))
    assert hover is not None and "rope-theta-500k" in hover.contents.value


def test_the_size_limit_at_its_edge(tmp_path):
    at = tmp_path / "at.py"
    at.write_bytes(b"x" * MAX_UNOPENED)
    assert len(read_unopened(at.as_uri(), [str(tmp_path)])[1]) == MAX_UNOPENED
    over = tmp_path / "over.py"
    over.write_bytes(b"x" * (MAX_UNOPENED + 1))
    with pytest.raises(Unavailable, match="MiB limit"):
        read_unopened(over.as_uri(), [str(tmp_path)])


def test_pool_roots_count_as_readable_places(tmp_path):
    pool, folder = tmp_path / "pool", tmp_path / "ws"
    pool.mkdir(), folder.mkdir()
    (pool / "notes.py").write_text("x = 1\n", encoding="utf-8")
    assert read_unopened((pool / "notes.py").as_uri(), [str(folder), str(pool)])[1] == "x = 1\n"
    with pytest.raises(Unavailable, match="not inside"):
        read_unopened((pool / "notes.py").as_uri(), [str(folder)])
