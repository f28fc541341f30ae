"""The lines' digests of a big `.jsonl` file's first read are taken later (`pool.lines`): once
settled, the same table as one taken while reading; a re-read before that, of a file that changed
meanwhile, is as exact as a fresh read (it reuses nothing); a settled table reuses as before."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from soma_lsp.pool import LivePool, loader
from soma_lsp.pool.loader import load_file
from soma_lsp.retrieval import LiveIndex
from pool_files import rec, write
from record_lines import json_lines

_lines = st.lists(st.one_of(json_lines(), st.sampled_from([b"", b"  ", b"{not json", b"[1]", b'{"id": ""}']),
                            st.builds(lambda i: json.dumps(rec(i % 4)).encode(), st.integers(0, 7))),
                  max_size=8)
_changes = st.sampled_from(["append", "insert", "rewrite", "truncate", "none"])


@pytest.fixture(autouse=True)
def later(monkeypatch):
    """Every `.jsonl` file's digests left for later (and every file's stamp kept: none is too recent)."""
    monkeypatch.setattr(loader, "RACY_NS", 0)
    monkeypatch.setattr(loader, "DIGESTS_LATER_BYTES", 0)


def eager(path, **options) -> loader.FileLoad:
    """The load with the digests taken while reading, as before."""
    with pytest.MonkeyPatch.context() as switch:
        switch.setattr(loader, "DIGESTS_LATER_BYTES", 1 << 62)
        return load_file(path, **options)


def same(a: loader.FileLoad, b: loader.FileLoad) -> bool:
    return [repr(r) for r in a.records] == [repr(r) for r in b.records] and a.problems == b.problems


def write_lines(path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line.replace(b"\n", b" ").replace(b"\r", b" ") + b"\n" for line in lines))


def change(path, how: str) -> None:
    """Change the file so that its stamp moves (its size, or its mtime a second back: a test writes
    within the clock's granularity, which the loader's `RACY_NS` guards against)."""
    lines = path.read_bytes().splitlines()
    new = json.dumps(rec(9999, notes="new")).encode()
    if how == "append":
        lines.append(new)
    elif how == "insert":
        lines.insert(0, new)
    elif how == "rewrite" and lines:
        lines[len(lines) // 2] = new
    elif how == "truncate":
        lines = lines[:len(lines) // 2]
    write_lines(path, lines)
    status = os.stat(path)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns - 1_000_000_000))


@settings(max_examples=150, deadline=None)
@given(_lines)
def test_settled_the_table_is_the_one_taken_while_reading(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("pool") / "runs.jsonl"
    write_lines(path, lines)
    load, before = load_file(path), eager(path)
    assert same(load, before)
    assert load.line_records.pending or not load.records
    assert load.line_records.packed() == before.line_records.packed()
    assert not load.line_records.pending


@settings(max_examples=150, deadline=None)
@given(_lines, _changes, st.booleans())
def test_a_re_read_is_a_fresh_read_whether_the_digests_were_taken_or_not(tmp_path_factory, lines, how, settle):
    path = tmp_path_factory.mktemp("pool") / "runs.jsonl"
    write_lines(path, lines)
    first = load_file(path)
    if settle:
        first.line_records.settle()
    if how != "none":
        change(path, how)
    again = load_file(path, previous=first)
    assert same(again, eager(path))
    assert same(load_file(path, previous=again), again)  # and a re-read of the re-read


def test_a_table_settled_after_its_file_changed_or_went_is_empty(tmp_path):
    path = tmp_path / "runs.jsonl"
    write_lines(path, [json.dumps(rec(i)).encode() for i in range(50)])
    for how in ("append", "rewrite", "gone"):
        first = load_file(path)
        assert len(first.line_records) == len(first.records) >= 50 and first.line_records.pending
        if how == "gone":
            path.unlink()
        else:
            change(path, how)
        first.line_records.settle()
        assert first.line_records.packed() == (b"", b"", b"") and first.line_records.get(b"x" * 16) is None


def test_a_settled_table_keeps_the_records_of_the_unchanged_lines(tmp_path):
    path = tmp_path / "runs.jsonl"
    write_lines(path, [json.dumps(rec(i)).encode() for i in range(200)])
    first = load_file(path)
    first.line_records.settle()
    change(path, "append")
    again = load_file(path, previous=first)
    assert len(again.records) == 201 and all(a is b for a, b in zip(first.records, again.records))
    assert same(again, eager(path))


def test_the_pool_settles_its_tables_and_a_change_then_touches_only_the_new_lines(tmp_path):
    root = tmp_path / "pool"
    path = write(root / "runs.jsonl", "".join(json.dumps(rec(i)) + "\n" for i in range(1000)))
    write(root / "small.jsonl", json.dumps(rec(5000)) + "\n")
    pool = LivePool([root], LiveIndex())
    pool.load()
    before = {r.id: r for r in pool.records()}
    assert all(load.line_records.pending for load in pool._files.values())
    pool.settle_lines()
    assert not any(load.line_records.pending for load in pool._files.values())
    changes = []
    pool.subscribe(changes.append)
    change(path, "append")
    pool.apply([path])
    assert changes[-1].added == ("exp-9999",) and changes[-1].removed == ()
    assert all(pool.get(i) is r for i, r in before.items())  # not re-read


def test_a_pool_changed_before_its_tables_are_settled_reads_the_file_again_exactly(tmp_path):
    root = tmp_path / "pool"
    path = write(root / "runs.jsonl", "".join(json.dumps(rec(i, notes=f"n{i}")) + "\n" for i in range(300)))
    pool = LivePool([root], LiveIndex())
    pool.load()
    change(path, "rewrite")
    pool.apply([path])
    fresh = LivePool([root], LiveIndex())
    fresh.load()
    assert [repr(r) for r in pool.records()] == [repr(r) for r in fresh.records()]
    assert pool.get("exp-9999").notes == "new" and pool.get("exp-150") is None


def test_the_snapshot_settles_the_tables_and_a_restart_reuses_them(tmp_path):
    root, cache = tmp_path / "pool", tmp_path / "cache"
    path = write(root / "runs.jsonl", "".join(json.dumps(rec(i)) + "\n" for i in range(500)))
    pool = LivePool([root], LiveIndex(), cache_dir=cache)
    pool.load()
    assert pool.save_snapshot() and not pool._files[str(path)].line_records.pending
    change(path, "append")
    again = LivePool([root], LiveIndex(), cache_dir=cache)
    changes = []
    again.subscribe(changes.append)
    again.load()
    assert again.restored == 0 and [i for c in changes for i in c.added] == ["exp-9999"]
    assert len(again) == 501
