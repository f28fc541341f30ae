"""A big `.jsonl` file read for the first time is committed in parts (`pool.parts`): each part a prefix
of the file, nothing lost, the same index in the end; a file already loaded is re-read atomically."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from soma_lsp.pool import LivePool, PoolChange, counting, loader, parts
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from pool_files import rec, write

QUERY = RetrievalQuery(text="rotary warmup spike attention", architecture=["Attention"], now=None, limit=None)


def big_file(path: Path, n: int, word: str = "rotary") -> Path:
    """`n` lines: records, with a blank line, a bad line and an invalid record now and then."""
    lines = []
    for i in range(n):
        if i % 97 == 5:
            lines.append("")
        elif i % 89 == 7:
            lines.append("{not json")
        elif i % 83 == 11:
            lines.append(json.dumps({"id": f"bad-{i}", "name": ""}))
        else:
            lines.append(json.dumps(rec(i, notes=f"{word} warmup spike {i % 13}", architecture=["Attention"]
                                        if i % 3 else ["RMSNorm"])))
    return write(path, "\n".join(lines) + "\n")


def ranked(index: LiveIndex) -> list:
    return [(r.record.id, r.score) for r in index.rank(QUERY)]


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(parts, "FIRST_PART_LINES", 100)


def test_the_loader_hands_over_prefixes_of_the_file(tmp_path, small_parts):
    path = big_file(tmp_path / "runs.jsonl", 2_500)
    seen = []
    whole = loader.load_file(path, batch=parts.Parts(seen.append))
    assert [len(p.records) for p in seen] == sorted(len(p.records) for p in seen) and len(seen) == 4
    for end, part in zip((100, 300, 700, 1_500), seen):  # the first 100 lines, 300, 700, 1500
        assert part.records == whole.records[:len(part.records)]
        assert all(a is b for a, b in zip(part.records, whole.records))  # the same records, not copies
        assert [r.source.line for r in part.records] == [r.source.line for r in whole.records if r.source.line < end]
        assert part.problems == [p for p in whole.problems if p.line < end]
        assert part.line_records is None and part.stamp == whole.stamp
    assert whole.problems and len(whole.records) > 2_300
    assert loader.load_file(path) == whole  # cut or not, the same load


def loads_seen(pool: LivePool, index: LiveIndex) -> list[tuple[PoolChange, list[str]]]:
    """Each change, with the ids the index held right after it."""
    seen = []
    pool.subscribe(lambda change: seen.append((change, [r.id for r in index.records()])))
    return seen


@pytest.mark.parametrize("apart", [False, True], ids=["counted-here", "counted-apart"])
def test_a_first_load_commits_growing_prefixes_and_ends_as_a_plain_load(tmp_path, small_parts, monkeypatch, apart):
    root = tmp_path / "p"
    path = big_file(root / "runs.jsonl", 2_500)
    write(root / "a.json", rec(100_000, notes="rotary attention"))
    write(root / "z.jsonl", json.dumps(rec(8, notes="a duplicate, later in path order")) + "\n")
    monkeypatch.setattr(loader, "RACY_NS", 0)  # (stamps trusted at once: the child's count is used)
    if apart:
        monkeypatch.setattr(counting, "APART_BYTES", 0)
        monkeypatch.setattr(counting.os, "sched_getaffinity", lambda pid: {0, 1})
    index = LiveIndex()
    pool = LivePool([root], index)
    seen = loads_seen(pool, index)
    pool.load()
    whole = loader.load_file(path)
    order = {r.id: r.source.line for r in whole.records}
    prefixes = [[i for i in ids if i in order] for _, ids in seen]
    assert len(seen) >= 5  # a.json, then four parts of runs.jsonl, then the rest with z.jsonl
    for before, after in zip(prefixes, prefixes[1:]):
        assert set(before) <= set(after)
    for ids in prefixes[:-1]:  # each state holds the file's first records, all of them
        lines = sorted(order[i] for i in ids)
        assert lines == [r.source.line for r in whole.records][:len(lines)]
    plain_index = LiveIndex()
    with monkeypatch.context() as m:
        m.setattr(parts, "FIRST_PART_LINES", 1 << 40)
        m.setattr(counting, "APART_BYTES", 1 << 62)
        plain = LivePool([root], plain_index)
        plain.load()
    assert ranked(index) == ranked(plain_index) and len(ranked(index)) > 1_000
    assert pool.problems == plain.problems and pool.summary() == plain.summary()
    assert index.get("exp-8").source.path == str(path)  # the duplicate in z.jsonl stays ignored


def test_the_first_part_does_not_wait_for_a_child_still_starting(tmp_path, small_parts, monkeypatch):
    root = tmp_path / "p"
    big_file(root / "runs.jsonl", 2_500)
    late = tmp_path / "late-python"  # the child's interpreter, a second late: the first part is read before
    late.write_text(f"#!/bin/sh\nsleep 1\nexec {sys.executable} \"$@\"\n")
    late.chmod(0o755)
    monkeypatch.setattr(loader, "RACY_NS", 0)
    monkeypatch.setattr(counting, "APART_BYTES", 0)
    monkeypatch.setattr(counting.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(counting.sys, "executable", str(late))
    seen = []
    counts, counted_here = counting.Counting.counts, counting.Counting.counted_here

    def spy(self, load):
        result = counts(self, load)
        seen.append((len(load.records), "child", result is not None))
        return result

    def spy_here(self, load):
        seen.append((len(load.records), "here", False))
        return counted_here(self, load)

    monkeypatch.setattr(counting.Counting, "counts", spy)
    monkeypatch.setattr(counting.Counting, "counted_here", spy_here)
    index = LiveIndex()
    LivePool([root], index).load()
    firsts = {n: (where, used) for n, where, used in seen}
    assert list(firsts.values())[0] == ("here", False)  # the first part: counted here, at once
    assert all(where == "child" and used for where, used in list(firsts.values())[1:]) and len(firsts) == 5
    plain = LiveIndex()
    with monkeypatch.context() as m:
        m.setattr(counting, "APART_BYTES", 1 << 62)
        LivePool([root], plain).load()
    assert ranked(index) == ranked(plain)


def test_a_re_read_of_a_loaded_file_is_one_update(tmp_path, small_parts, monkeypatch):
    root = tmp_path / "p"
    path = big_file(root / "runs.jsonl", 2_500)
    monkeypatch.setattr(counting, "APART_BYTES", 0)
    index = LiveIndex()
    pool = LivePool([root], index)
    pool.load()
    old = set(r.id for r in index.records())
    big_file(path, 2_600, word="cosine")  # every record changed, and more of them
    seen = loads_seen(pool, index)
    stop = threading.Event()
    states = []

    def watch():  # what a query sees meanwhile: the old file or the new, never a mix
        while not stop.is_set():
            records = index.records()
            states.append(({r.id for r in records}, {r.notes.split()[0] for r in records}))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        pool.load()  # a reload: the file is read again, whole
        pool.apply([path])  # a change seen by the watcher: read again (the same records)
    finally:
        stop.set()
        watcher.join()
    assert seen[0][0].files == (str(path),) and all(not c.added and not c.removed for c, _ in seen[1:])
    new = set(seen[0][1])
    assert len(new) > len(old)
    assert all((ids, words) in ((old, {"rotary"}), (new, {"cosine"})) for ids, words in states)


def test_a_pool_that_answers_once_loaded_reads_a_big_file_as_one_update(tmp_path, small_parts, monkeypatch):
    """`in_parts=False` (the CLI's: nobody queries while it loads): one commit, counted apart as one
    block that the index takes, the same ranking as in parts."""
    root = tmp_path / "p"
    big_file(root / "runs.jsonl", 2_500)
    monkeypatch.setattr(loader, "RACY_NS", 0)
    monkeypatch.setattr(counting, "APART_BYTES", 0)
    monkeypatch.setattr(counting.os, "sched_getaffinity", lambda pid: {0, 1})
    taken = []
    counts = counting.Counting.counts
    index, parted = LiveIndex(), LiveIndex()
    pool = LivePool([root], index, in_parts=False)
    seen = loads_seen(pool, index)
    with monkeypatch.context() as m:
        m.setattr(counting.Counting, "counts", lambda self, load: taken.append(counts(self, load)) or taken[-1])
        pool.load()
    assert len(seen) == 1 and len(seen[0][1]) > 2_300
    assert len(taken) == 1 and taken[0] is not None and taken[0].terms.size == 2_500  # the child's, whole
    LivePool([root], parted).load()
    assert ranked(index) == ranked(parted)
