"""A big pool: features answer while it is (re)indexed, from the index's consistent snapshot."""

from __future__ import annotations

import asyncio
import json
import random
import time

from conftest import TIMEOUT, Session, close_session, open_session, server_env, wait_until

TRANSFORMER = "model/transformer.py"
WORDS = ("rope theta attention norm rmsnorm swiglu moe router expert dropout lr warmup cosine adam batch seq "
         "len token loss bf16 fp16 grad clip init embedding head").split()


def big_pool(workspace, n: int) -> None:
    rnd = random.Random(7)
    with open(workspace / ".soma" / "pool" / "big.jsonl", "w") as out:
        for i in range(n):
            out.write(json.dumps({
                "id": f"big-{i:06d}", "name": "-".join(rnd.sample(WORDS, 3)),
                "status": rnd.choice(["succeeded", "failed", "regressed"]),
                "conclusion": " ".join(rnd.sample(WORDS, 8)), "notes": " ".join(rnd.choices(WORDS, k=30)),
                "finished_at": "2026-%02d-%02dT00:00:00Z" % (rnd.randint(1, 11), rnd.randint(1, 28)),
                "architecture": rnd.sample(["Attention", "RMSNorm", "Linear", "SwiGLU", "Embedding"], 3)}) + "\n")


async def test_hover_answers_during_a_reindex(start_session, preset, workspace):
    big_pool(workspace, 20_000)
    session: Session = await start_session(preset, init_options={"snapshot": {"enabled": False}})  # reads it all
    assert (await session.command("soma.poolStatus"))["records"] == 20_074
    uri = session.open(TRANSFORMER)
    line, col = session.line_of(TRANSFORMER, "class RotaryEmbedding")
    before = len(session.statuses)
    reload = asyncio.ensure_future(session.command("soma.reloadPool", {}))
    await asyncio.wait_for(_until(lambda: any(s["indexing"] for s in session.statuses[before:])), TIMEOUT)
    answered = 0
    while not reload.done():
        hover = await session.hover(uri, line, col + 6)
        assert hover is not None and "exp-0042" in hover.contents.value  # the previous index answers
        answered += 1
    assert answered >= 1, "a hover must come back before a 20k-record reindex finishes"
    assert (await asyncio.wait_for(reload, TIMEOUT))["records"] == 20_074
    symbols = await session.command("soma.findRelatedExperiments", {"text": "rope theta", "limit": 5})
    assert len(symbols) == 5


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)


def settle(root) -> None:
    """Wait until the pool's files are old enough for their stamps to be trusted (loader.RACY_NS: 2 s
    since their last change)."""
    newest = max(max(p.stat().st_mtime, p.stat().st_ctime) for p in root.rglob("*"))
    time.sleep(max(0.0, newest + 2.05 - time.time()))


async def test_a_restarted_server_starts_from_the_snapshot_and_sees_what_changed(start_session, workspace, tmp_path):
    cache = tmp_path / "cache"
    env = server_env(SOMA_CACHE_DIR=str(cache))
    pool = workspace / ".soma" / "pool"
    settle(pool)
    first = await start_session("neovim@0.11.0", env=env)
    before = await first.command("soma.poolStatus")
    assert before["restored"] == 0
    await wait_until(lambda: list(cache.glob("*.snapshot")))  # written after the load, off the loop
    (pool / "late.json").write_text(json.dumps({"id": "exp-late", "name": "rope-theta-late"}))
    second = await start_session("visual-studio-code", env=env)
    after = await second.command("soma.poolStatus")
    assert after["restored"] == before["files"] and after["files"] == before["files"] + 1
    assert after["records"] == before["records"] + 1 and after["errors"] == before["errors"]
    uri = second.open("model/transformer.py")
    line, col = second.line_of("model/transformer.py", "class RotaryEmbedding")
    hover = await second.hover(uri, line, col + 6)
    assert hover is not None and "exp-0042" in hover.contents.value
    shown = await second.command("soma.showExperiment", {"id": "exp-late"})
    assert shown["name"] == "rope-theta-late"


async def test_with_snapshots_off_nothing_is_written(start_session, workspace, tmp_path):
    cache = tmp_path / "cache"
    settle(workspace / ".soma" / "pool")
    session = await start_session("visual-studio-code", env=server_env(SOMA_CACHE_DIR=str(cache)),
                                  init_options={"snapshot": {"enabled": False}})
    assert (await session.command("soma.poolStatus"))["records"] > 0
    await session.command("soma.reloadPool", {})
    assert not cache.exists()


async def test_a_server_saves_what_changed_at_shutdown(workspace, tmp_path):
    cache = tmp_path / "cache"
    env = server_env(SOMA_CACHE_DIR=str(cache))
    pool = workspace / ".soma" / "pool"
    settle(pool)
    first = await open_session(workspace, "neovim@0.11.0", env=env)  # the server watches the pool itself
    try:
        await wait_until(lambda: list(cache.glob("*.snapshot")))
        (snapshot,) = cache.glob("*.snapshot")
        saved = snapshot.stat().st_ino
        status = await first.command("soma.poolStatus")
        (pool / "late.json").write_text(json.dumps({"id": "exp-late", "name": "rope-theta-late"}))
        await first.wait_status(lambda s: s["records"] == status["records"] + 1)
    finally:
        await close_session(first)
    assert snapshot.stat().st_ino != saved  # rewritten at shutdown (a write replaces the file): the change came after the load
    second = await open_session(workspace, "visual-studio-code", env=env)
    try:
        again = await second.command("soma.poolStatus")
        # late.json was read less than 2 s after it was written: its stamp is not trusted, it is read again
        assert again["files"] == status["files"] + 1 and again["restored"] == status["files"]
        assert (await second.command("soma.showExperiment", {"id": "exp-late"}))["name"] == "rope-theta-late"
    finally:
        await close_session(second)
