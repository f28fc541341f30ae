"""Counting a big .jsonl file's records in a child process (`pool.counting`): the same index as
counting here, and counting here whenever the child's count cannot be trusted."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soma_lsp.pool import LivePool, counting, loader
from soma_lsp.records import RecordError, document_texts, parse_architecture, parse_record
from soma_lsp.retrieval import RetrievalQuery
from soma_lsp.retrieval.documents import CountedLines, Counts, DocumentCounter, bag_triples, csr
from soma_lsp.retrieval.index import LiveIndex, document_fields
from soma_lsp.retrieval.terms import component_bag
from pool_files import rec, write
from record_lines import json_lines

QUERIES = [RetrievalQuery(text=text, architecture=arch, now=None, limit=limit)
           for text, arch, limit in (("rotary warmup spike", ["Attention"], 5), ("naïve größe run", None, None),
                                     ("loss diverged 7", ["RMSNorm", "SwiGLU"], 10))]


@pytest.fixture(autouse=True)
def counted_apart_and_quick(monkeypatch):
    """Every .jsonl file is counted apart (not only those of 32 MiB and more), as on two cores, and
    stamps are trusted 50 ms after a change, not 2 s."""
    monkeypatch.setattr(counting, "APART_BYTES", 0)
    monkeypatch.setattr(counting.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(loader, "RACY_NS", 50_000_000)


@pytest.fixture
def used(monkeypatch) -> list:
    """What each child's count came to: the count, or None when it was counted here."""
    seen = []
    counts = counting.Counting.counts

    def spy(self, load):
        result = counts(self, load)
        seen.append(result)
        return result

    monkeypatch.setattr(counting.Counting, "counts", spy)
    return seen


def lines_file(path: Path, n: int = 60) -> Path:
    """Records of every document shape, among lines that are no record or no valid one."""
    lines = []
    for i in range(n):
        shape = i % 6
        if shape == 0:
            record = rec(i, conclusion="rotary warmup spike", notes="   ")
        elif shape == 1:
            record = rec(i, conclusion={"headline": "naïve Größe", "details": f"loss diverged {i}"},
                         architecture={"Attention": 2, "torch.nn.RMSNorm": 1})
        elif shape == 2:
            record = rec(i, notes="ScaledDotProduct attention_v2 x86_64", architecture=["SwiGLU", "Attention"],
                         metrics={"loss": "NaN"})
        elif shape == 3:
            record = rec(i, conclusion={"headline": " "}, status="failed")
        elif shape == 4:
            record = rec(i, name=f"run {i} \x01 mark", notes="ＦＵＬＬ width")
        else:
            record = {"id": f"bad-{i}", "name": ""}  # invalid: not loaded
        lines.append(json.dumps(record, ensure_ascii=i % 2 == 0))
        if i % 10 == 3:
            lines += ["", "not json", "[1, 2]", '{"id": "nan", "name": "n", "metrics": {"m": NaN}}']
    write(path, "\ufeff" + "\n".join(lines) + "\n")
    return path


def settle(root: Path) -> None:
    past = time.time() - 60
    for path in root.rglob("*"):
        os.utime(path, (past, past))
    time.sleep(loader.RACY_NS / 1e9 + 0.01)


def answers(index: LiveIndex) -> list:
    return [(r.record.id, r.score, r.components) for q in QUERIES for r in index.rank(q)]


def loaded(root: Path) -> LiveIndex:
    index = LiveIndex()
    LivePool([root], index).load()
    return index


def counted_here(root: Path, monkeypatch) -> LiveIndex:
    with monkeypatch.context() as m:
        m.setattr(counting, "APART_BYTES", 1 << 62)
        return loaded(root)


# -- the count --------------------------------------------------------------------------------

def bag(csr, vocabulary: dict[str, int]) -> dict[tuple[str, int], float]:
    terms = {key: term for term, key in vocabulary.items()}
    indptr, rows, counts = csr
    return {(terms[key], int(rows[i])): float(counts[i])
            for key in range(indptr.size - 1) for i in range(indptr[key], indptr[key + 1])}


def count_file(path) -> tuple[CountedLines, tuple[bytes, bytes]]:
    """Every line of `path` counted in one block, as the child counts a file not cut into parts, and
    the file's stamp before and after."""
    (block,) = counting.count_parts(str(path), loader.MAX_JSON_BYTES, iter(()))
    return block.counted, block.stamps


def test_the_child_counts_each_record_as_the_loader_would(tmp_path):
    path = lines_file(tmp_path / "runs.jsonl")
    load = loader.load_file(path)
    counted, (before, after) = count_file(path)
    assert before == after == loader.stamp_of(os.stat(path))
    wire, stamps = counting.decode(counting.encode(counted, (before, after)))
    assert stamps == (before, after) and list(wire.terms.names) == list(counted.terms.names)
    lines = np.array([r.source.line for r in load.records])
    vocabulary, expected_vocabulary = {"warmup": 0, "zzz": 1}, {"warmup": 0, "zzz": 1}
    expected = DocumentCounter(expected_vocabulary).count([document_fields(r) for r in load.records])
    assert bag(wire.terms.select(lines, vocabulary), vocabulary) == bag(expected, expected_vocabulary)
    bags = [component_bag(r.architecture) for r in load.records]
    components, expected_components = {"attention": 0}, {"attention": 0}
    expected = csr(*bag_triples(bags, expected_components), len(expected_components))
    assert bag(wire.components.select(lines, components), components) == bag(expected, expected_components)
    assert wire.arch_total[lines].tolist() == [sum(b.values()) for b in bags] and any(bags)
    for counts in (counted.terms, counted.components):  # every row, into an empty vocabulary: as it came
        whole = {}
        assert bag(counts.select(np.arange(counts.size), whole), whole) == bag(
            (counts.indptr, counts.rows, counts.counts), dict(zip(counts.names, range(len(counts.names)))))


def blocks(path: Path, skip_first: bool) -> list[tuple]:
    """Each block of a count cut at lines 20, 60, 140 …, as comparable values."""
    return [(b.first, b.last, b.counted.terms.size, list(b.counted.terms.names), b.counted.terms.indptr.tolist(),
             b.counted.terms.rows.tolist(), b.counted.components.rows.tolist(), b.counted.arch_total.tolist())
            for b in counting.count_parts(str(path), loader.MAX_JSON_BYTES, counting.parts.part_ends(20),
                                          skip_first=skip_first)]


def test_the_child_leaves_the_first_part_to_the_loader_and_counts_the_rest_alike(tmp_path):
    counted, skipped = blocks(lines_file(tmp_path / "runs.jsonl"), False), blocks(tmp_path / "runs.jsonl", True)
    assert len(skipped) == len(counted) > 2 and skipped[1:] == counted[1:]
    first = skipped[0]
    assert first[:3] == counted[0][:3] == (0, False, 20) and first[5] == first[6] == [] and counted[0][5]


@pytest.mark.parametrize("why", ["the file ends in its first part", "its first part is too big to hold"])
def test_the_child_counts_the_first_part_after_all_when_it_must(tmp_path, monkeypatch, why):
    path = lines_file(tmp_path / "runs.jsonl", 12 if why.startswith("the file") else 60)  # (12: 16 lines)
    if why.startswith("its"):
        monkeypatch.setattr(counting, "SKIP_BYTES", 500)
    assert blocks(path, True) == blocks(path, False) and blocks(path, True)[0][5]


TEXT = st.one_of(st.text(max_size=8), st.sampled_from(["", " ", "\u3000", "a b"]))
ANY = st.one_of(TEXT, TEXT, TEXT, st.none(), st.integers())  # mostly text: most records are valid


@settings(max_examples=300)
@given(st.fixed_dictionaries({"id": TEXT, "name": TEXT}, optional={
    "notes": ANY, "conclusion": st.one_of(ANY, st.fixed_dictionaries({}, optional={"headline": ANY, "details": ANY}))}))
def test_document_texts_are_the_record_s_document(mapping):
    try:
        record = parse_record(mapping)
    except RecordError:
        return
    assert document_texts(mapping) == document_fields(record)


@settings(max_examples=1000)
@given(json_lines())
def test_the_child_reads_a_record_s_document_and_architecture_as_the_loader_decodes_them(line):
    """The child decodes only what it counts (`counting.line_document`): for every line the loader
    makes a record of, the texts and the bag of the line as the loader decodes it."""
    try:
        value = loader.decode_line(line)
        parse_record(value)
    except (ValueError, RecursionError):  # (RecordError is a ValueError)
        return
    texts, architecture = counting.line_document(line)
    assert texts == document_texts(value)
    assert component_bag(architecture) == component_bag(value.get("architecture"))


NAME = st.one_of(st.text(max_size=8), st.sampled_from(["torch.nn.LayerNorm", "LayerNorm", "layer_norm", ""]))
COUNT = st.one_of(st.integers(-3, 2**70), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), TEXT,
                  st.none())


@settings(max_examples=300)
@given(st.one_of(st.lists(st.one_of(NAME, NAME, NAME, st.integers())), st.dictionaries(NAME, COUNT), ANY))
def test_the_child_bags_an_architecture_unvalidated_as_the_record_s(architecture):
    """The child bags a line's architecture without `parse_architecture`: the same bag for every
    architecture a record may have (one it refuses makes no record, whose row the index never takes)."""
    try:
        parsed = parse_architecture(architecture)
    except RecordError:
        return
    assert component_bag(architecture) == component_bag(parsed)


@pytest.mark.parametrize("spoil", [b"", b"SOMACNT1", b"garbage" * 20, "cut", "trailing", "rows"])
def test_a_malformed_count_is_refused(tmp_path, spoil):
    path = lines_file(tmp_path / "runs.jsonl", 12)
    data = counting.encode(*count_file(path))
    spoilt = {"cut": data[:-3], "trailing": data + b"\0\0\0\0"}.get(spoil, spoil)
    if spoil == "rows":  # a row past the lines counted
        counted, stamps = counting.decode(data)
        terms = counted.terms
        spoilt = counting.encode(CountedLines(Counts(1, terms.names, terms.indptr, terms.rows, terms.counts),
                                              counted.components, counted.arch_total[:1]), stamps)
    with pytest.raises((ValueError, Exception)):
        counting.decode(spoilt)


# -- the pool -----------------------------------------------------------------------------------

def test_a_pool_counted_apart_ranks_exactly_as_one_counted_here(tmp_path, monkeypatch, used):
    lines_file(tmp_path / "p" / "runs.jsonl")
    write(tmp_path / "p" / "other.json", rec(900, conclusion="rotary warmup", architecture=["Attention"]))
    lines_file(tmp_path / "p" / "z.jsonl", 20)  # duplicates of ids, later in path order: ignored
    settle(tmp_path / "p")
    index = loaded(tmp_path / "p")
    assert len(used) == 1 and used[0] is not None  # (one spare core: one child, for the first big file)
    here = counted_here(tmp_path / "p", monkeypatch)
    assert answers(index) == answers(here) and answers(here)
    assert len(index) == len(here)
    index.update(remove=[r.id for r in index.records()[::3]])  # and it updates as ever
    here.update(remove=[r.id for r in here.records()[::3]])
    assert answers(index) == answers(here)


def test_a_file_written_just_now_is_counted_here(tmp_path, monkeypatch, used):
    lines_file(tmp_path / "p" / "runs.jsonl")  # racy: its stamp proves nothing
    index = loaded(tmp_path / "p")
    assert used == [None]
    assert answers(index) == answers(counted_here(tmp_path / "p", monkeypatch))


def test_a_file_changed_after_the_child_read_it_is_counted_here(tmp_path, monkeypatch, used):
    path = lines_file(tmp_path / "p" / "runs.jsonl")
    settle(tmp_path / "p")
    start = counting.start

    def then_change(files, max_line, **options):
        children = start(files, max_line, **options)
        for child in children.values():
            child._child._process.wait()  # it has read the file and sent its count (its output file holds it)
        write(path, json.dumps(rec(1, notes="rotary only now")) + "\n" + path.read_text())
        settle(tmp_path / "p")
        return children

    monkeypatch.setattr(counting, "start", then_change)
    index = loaded(tmp_path / "p")
    assert used == [None]
    assert answers(index) == answers(counted_here(tmp_path / "p", monkeypatch))
    assert index.get("exp-1").source.line == 0


def test_a_child_that_fails_is_stopped_or_cannot_start_leaves_the_counting_here(tmp_path, monkeypatch, used,
                                                                                  caplog):
    caplog.set_level(logging.INFO, counting.__name__)
    lines_file(tmp_path / "p" / "runs.jsonl")
    settle(tmp_path / "p")
    expected = answers(counted_here(tmp_path / "p", monkeypatch))
    start = counting.start

    def stopped(files, max_line, **options):
        children = start(files, max_line, **options)
        for child in children.values():
            child.close()
        return children

    with monkeypatch.context() as m:
        m.setattr(counting.sys, "executable", "/bin/false")  # a child that exits 1, saying nothing
        assert answers(loaded(tmp_path / "p")) == expected
    assert "failed (exit 1)" in caplog.text
    with monkeypatch.context() as m:
        m.setattr(counting, "start", stopped)
        assert answers(loaded(tmp_path / "p")) == expected
    assert "apart was stopped" in caplog.text
    with monkeypatch.context() as m:
        m.setattr(counting.sys, "executable", str(tmp_path / "no-such-python"))
        assert answers(loaded(tmp_path / "p")) == expected
    assert "could not start counting" in caplog.text
    assert used == [None, None]


def test_no_child_on_one_core_or_for_small_files(tmp_path, monkeypatch):
    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    monkeypatch.setattr(counting.os, "sched_getaffinity", lambda pid: {0})
    assert counting.start([(str(big), 1 << 30)], 1 << 20) == {}
    monkeypatch.setattr(counting.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(counting, "APART_BYTES", 1 << 20)
    write(big, "")
    children = counting.start([(str(small), 100), (str(tmp_path / "a.json"), 1 << 30), (str(big), 1 << 30)],
                              1 << 20)
    assert list(children) == [str(big)]
    children[str(big)].close()


@settings(max_examples=300)
@given(st.data())
def test_selecting_rows_of_counts_made_elsewhere_gives_their_postings_keyed_here(data):
    """`Counts.select` against the postings read one by one: any rows, names with no postings, a
    vocabulary that already holds some of the names (in another order) and others."""
    size = data.draw(st.integers(1, 12))
    names = data.draw(st.lists(st.text("abc", min_size=1, max_size=3), unique=True, max_size=8))
    postings = [sorted(data.draw(st.sets(st.integers(0, size - 1), max_size=size))) for _ in names]
    counts = Counts(size, names, np.cumsum([0, *map(len, postings)]),
                    np.array([r for rows in postings for r in rows], dtype=np.int32),
                    np.array([float(1 + i) for i in range(sum(map(len, postings)))], dtype=np.float32))
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, size - 1)))), dtype=np.int64)
    held = data.draw(st.permutations(names + ["zz", "yy"]).map(lambda ns: ns[:data.draw(st.integers(0, len(ns)))]))
    vocabulary = {name: key for key, name in enumerate(held)}
    expected, at = {}, 0
    new_row = {int(r): i for i, r in enumerate(rows)}
    for name, its_rows in zip(names, postings):
        for r in its_rows:
            if r in new_row:
                expected[(name, new_row[r])] = float(counts.counts[at])
            at += 1
    selected = counts.select(rows, vocabulary)
    assert set(held) <= set(vocabulary) and sorted(vocabulary.values()) == list(range(len(vocabulary)))
    assert bag(selected, vocabulary) == expected
    indptr, out_rows, _ = selected
    assert all(np.all(np.diff(out_rows[indptr[k]:indptr[k + 1]]) > 0) for k in range(indptr.size - 1))
