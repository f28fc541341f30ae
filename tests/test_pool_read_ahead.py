"""Many small pool files read ahead by a child process (`pool.read_ahead`): the same pool as reading
them here, and reading here whatever the child did not read exactly."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool, loader, read_ahead
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from pool_files import rec, write

LIMITS = {"max_json_bytes": 4096, "max_yaml_bytes": 1024}


@pytest.fixture(autouse=True)
def ahead_from_ten_files(monkeypatch):
    """A child reads ahead from 10 files on (not 1000), as on two cores."""
    monkeypatch.setattr(read_ahead, "AHEAD_FILES", 10)
    monkeypatch.setattr(read_ahead.os, "sched_getaffinity", lambda pid: {0, 1})


@pytest.fixture
def finished(monkeypatch):
    """The child has read every file before the loader asks for the first (it never waits for one)."""
    start = read_ahead.ReadAhead.__init__

    def finish(self, *args):
        start(self, *args)
        self._child.wait(timeout=60)

    monkeypatch.setattr(read_ahead.ReadAhead, "__init__", finish)


@pytest.fixture
def taken(monkeypatch) -> list:
    """What each `take` gave: the bytes the child read, or None when the loader read the file."""
    seen = []
    take = read_ahead.ReadAhead.take

    def spy(self, path):
        result = take(self, path)
        seen.append(result and result[2])
        return result

    monkeypatch.setattr(read_ahead.ReadAhead, "take", spy)
    return seen


def mixed_pool(root: Path, n: int = 40) -> Path:
    """Records in every single-record shape, and files with a problem of each kind a read can give."""
    for i in range(n):
        write(root / f"d{i % 3}" / f"exp-{i}.json", rec(i, conclusion=f"rotary warmup {i}", status="failed"))
    write(root / "yaml" / "a.yaml", "id: exp-y\nname: yaml run\nnotes: rope theta\n")
    write(root / "yaml" / "two.yml", "- {id: exp-y2, name: two}\n- {id: exp-y3, name: three, status: nope}\n")
    write(root / "bad" / "broken.json", '{"id": "exp-b", "name": ')
    write(root / "bad" / "not-utf8.json", "")
    (root / "bad" / "not-utf8.json").write_bytes(b'{"id": "exp-u", "name": "caf\xe9"}')
    write(root / "bad" / "empty.json", "")
    write(root / "bad" / "big.json", rec(9000, notes="x" * 5000))  # over max_json_bytes
    write(root / "bad" / "big.yaml", "id: exp-9001\nname: big\nnotes: " + "y" * 2000 + "\n")
    write(root / "bad" / "array.json", [rec(9002), {"id": "exp-9003"}])
    write(root / "dup" / "a.json", rec(1, name="a duplicate of exp-1"))
    return root


def state(pool: LivePool) -> tuple:
    """Everything a load leaves: each file's records (with their source) and problems, and its stamp."""
    loads = pool._files
    return ({path: ([(r, r.source) for r in load.records], load.problems, load.stamp)
             for path, load in loads.items()}, pool.problems, pool.records())


def load(root: Path) -> tuple[LivePool, LiveIndex]:
    index = LiveIndex()
    pool = LivePool([root], index, **LIMITS)
    pool.load()
    return pool, index


def test_a_pool_read_ahead_is_the_pool_read_here(tmp_path, monkeypatch, finished, taken):
    root = mixed_pool(tmp_path / "pool")
    time.sleep(0.1)
    monkeypatch.setattr(loader, "RACY_NS", 50_000_000)
    ahead, ahead_index = load(root)
    assert sum(1 for data in taken if data) >= 40, "the child read the record files"
    monkeypatch.setattr(read_ahead, "AHEAD_FILES", 10**9)
    taken.clear()
    here, here_index = load(root)
    assert not taken
    assert state(ahead) == state(here)
    assert len(state(here)[1]) >= 6 and all(load.stamp for load in here._files.values())
    query = RetrievalQuery(text="rotary warmup", architecture=None, now=None, limit=5)
    assert ahead_index.rank(query) == here_index.rank(query)


def test_files_written_just_now_are_read_ahead_without_a_stamp(tmp_path, finished, taken):
    root = mixed_pool(tmp_path / "pool", 12)
    pool, _ = load(root)  # (RACY_NS: 2 s)
    assert sum(1 for data in taken if data) >= 12
    assert all(load.stamp is None for load in pool._files.values())


def test_what_the_child_will_not_read_is_read_here(tmp_path):
    root = tmp_path / "pool"
    files = [write(root / f"{i}.json", rec(i)) for i in range(3)]
    big = write(root / "big.json", rec(3, notes="x" * 100))
    fifo = root / "fifo.json"
    os.mkfifo(fifo)
    paths = [str(p) for p in [*files, big, fifo, root / "missing.json", root]]
    ahead = read_ahead.ReadAhead(paths, [4096, 4096, 4096, 50, 4096, 4096, 4096], 0)
    try:
        assert ahead._child.wait(timeout=60) == 0  # (never blocked on the FIFO)
        assert ahead.take(paths[0])[2] == files[0].read_bytes()
        assert [ahead.take(p) for p in paths[3:]] == [None] * 4  # over its limit, a FIFO, gone, a directory
    finally:
        ahead.close()


def test_a_file_the_child_has_passed_or_not_reached_is_read_here(tmp_path):
    root = tmp_path / "pool"
    paths = [str(write(root / f"{i}.json", rec(i))) for i in range(20)]
    ahead = read_ahead.ReadAhead(paths, [4096] * 20, 0)
    try:
        ahead._child.wait(timeout=60)
        size, stamp, data = ahead.take(paths[5])
        assert data == Path(paths[5]).read_bytes()
        assert stamp == loader.stamp_of(os.stat(paths[5])) and size == len(data)
        assert ahead.take(paths[2]) is None  # its entry was skipped on the way to the 6th
        assert ahead.take(str(root / "unlisted.json")) is None
        assert ahead.take(paths[19])[2] == Path(paths[19]).read_bytes()
    finally:
        ahead.close()
    ahead = read_ahead.ReadAhead(paths, [4096] * 20, 0)
    ahead.close()  # stopped before it wrote anything, or partway
    assert all(ahead.take(p) is None for p in paths)


def test_a_child_that_fails_or_writes_nonsense_leaves_the_reading_here(tmp_path, monkeypatch, caplog, finished,
                                                                        taken):
    root = mixed_pool(tmp_path / "pool", 12)
    expected = state(load(root)[0])
    real = read_ahead.ReadAhead.__init__

    def spoiled(self, *args):
        real(self, *args)
        os.pwrite(self._out.fileno(), b"\xff" * 64, 0)  # an entry whose state is no state

    monkeypatch.setattr(read_ahead.ReadAhead, "__init__", spoiled)
    taken.clear()
    with caplog.at_level(logging.WARNING, logger=read_ahead.__name__):
        assert state(load(root)[0]) == expected
    assert "reading ahead failed" in caplog.text and not any(taken)

    crashing = tmp_path / "crashing-python"
    crashing.write_text("#!/bin/sh\nexit 3\n")
    crashing.chmod(0o755)
    monkeypatch.setattr(read_ahead.ReadAhead, "__init__", real)
    monkeypatch.setattr(read_ahead.sys, "executable", str(crashing))
    with caplog.at_level(logging.WARNING, logger=read_ahead.__name__):
        assert state(load(root)[0]) == expected
    assert "ended with exit status 3" in caplog.text

    monkeypatch.setattr(read_ahead.sys, "executable", str(tmp_path / "no-python"))
    with caplog.at_level(logging.WARNING, logger=read_ahead.__name__):
        assert state(load(root)[0]) == expected
    assert "could not start reading" in caplog.text


def test_no_child_on_one_core_or_for_a_few_files(tmp_path, monkeypatch, taken):
    root = mixed_pool(tmp_path / "pool", 12)
    monkeypatch.setattr(read_ahead.os, "sched_getaffinity", lambda pid: {0})
    load(root)
    monkeypatch.setattr(read_ahead.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(read_ahead, "AHEAD_FILES", 1000)
    load(root)
    assert not taken
