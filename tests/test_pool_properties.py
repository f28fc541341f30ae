"""Property: whatever mix of valid records, invalid records and garbage a file holds, every valid record
loads, at its own line, and every invalid entry is reported at its line (JSONL, JSON array, YAML list)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from soma_lsp.pool import load_file

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
valid = st.fixed_dictionaries({"name": texts.filter(str.strip)},
                              optional={"status": st.sampled_from(["failed", "ok", "weird"]), "notes": texts,
                                        "metrics": st.dictionaries(texts.filter(str.strip),
                                                                   st.floats(allow_nan=True), max_size=2),
                                        "tags": st.lists(texts, max_size=2)})
invalid = st.one_of(st.just({"name": ""}), st.just({}), st.fixed_dictionaries({"name": st.integers()}),
                    st.fixed_dictionaries({"name": texts.filter(str.strip), "metrics": st.just({"m": "fast"})}))
entries = st.lists(st.tuples(st.booleans(), valid, invalid), min_size=0, max_size=12)


def _expected(items):
    return [(f"r{i}", i) for i, (ok, _, _) in enumerate(items) if ok]


def _records(items):
    out = []
    for i, (ok, good, bad) in enumerate(items):
        out.append({"id": f"r{i}", **good} if ok else {"id": f"r{i}", **bad} if bad else {})
    return out


@settings(max_examples=60)
@given(entries, st.lists(st.sampled_from(["", "{not json", "[1, 2]", "\xff"]), max_size=3))
def test_jsonl_keeps_every_valid_line(items, garbage):
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in _records(items)]
    lines += [b"\xff" if g == "\xff" else g.encode() for g in garbage]  # "\xff": a byte that is not UTF-8
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.jsonl"
        path.write_bytes(b"\n".join(lines))
        load = load_file(path)
    assert [(r.id, r.source.line) for r in load.records] == _expected(items)
    errors = {p.line for p in load.problems if p.severity == "error"}
    assert errors == {i for i, (ok, _, _) in enumerate(items) if not ok} | \
        {len(items) + k for k, g in enumerate(garbage) if g}


@settings(max_examples=60)
@given(entries, st.sampled_from(["json", "yaml"]))
def test_arrays_and_yaml_lists_keep_every_valid_element(items, fmt):
    records = _records(items)
    if fmt == "json":
        text = "[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n"  # one element per line, from line 1
        first = 1
    else:
        text = "".join(yaml.safe_dump([r], allow_unicode=True, width=10_000) for r in records) if records else "[]"
        first = 0
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"p.{fmt}"
        path.write_text(text, encoding="utf-8")
        load = load_file(path)
    assert [r.id for r in load.records] == [i for i, _ in _expected(items)]
    if fmt == "json":
        assert [r.source.line for r in load.records] == [first + i for _, i in _expected(items)]
    invalid = sum(not ok for ok, _, _ in items)  # each has at least one problem (all of its problems)
    errors = len([p for p in load.problems if p.severity == "error"])
    assert invalid <= errors and (errors == 0) == (invalid == 0)
