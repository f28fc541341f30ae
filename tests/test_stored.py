"""Records kept as bytes (`soma_lsp.stored`): every field comes back as it was parsed."""

from __future__ import annotations

from datetime import timedelta, timezone

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from soma_lsp.records import RecordError, Source, parse_record
from soma_lsp.stored import RecordList, RecordStore, encode

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 200, 2 ** 200),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                      max_leaves=10)
zones = st.one_of(st.none(), st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23)).map(timezone))
stamps = st.one_of(st.none(), st.datetimes(timezones=zones).map(lambda d: d.isoformat()),
                   st.datetimes(timezones=zones).map(lambda d: d.replace(fold=0)))  # as YAML gives them
numbers = st.one_of(st.integers(-10 ** 6, 10 ** 6), st.floats(allow_nan=True), st.sampled_from(["NaN", "-inf"]))
texts = st.text(max_size=6)
mappings = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=4).filter(str.strip), "name": st.text(min_size=1, max_size=4).filter(str.strip)},
    optional={
        "status": st.sampled_from(["finished", "weird", "failed", "RUNNING"]), "created_at": stamps,
        "finished_at": stamps, "notes": texts,
        "conclusion": st.one_of(texts, st.fixed_dictionaries({}, optional={"headline": texts, "details": texts})),
        "architecture": st.one_of(st.lists(st.text(max_size=3), max_size=3),
                                  st.dictionaries(st.text(max_size=3), st.integers(0, 9) | st.floats(0, 9), max_size=3)),
        "metrics": st.dictionaries(st.text(min_size=1, max_size=3).filter(str.strip), st.one_of(
            numbers, st.fixed_dictionaries({"value": numbers}, optional={"baseline": numbers,
                                                                          "goal": st.sampled_from(["min", "maximize"])})),
            max_size=3),
        "code": st.lists(st.sampled_from(["a.py", "b/c.py::X.y", "d.py::  "])
                         | st.fixed_dictionaries({"path": st.just("e.py")}, optional={"symbol": st.sampled_from(["S", None])}),
                         max_size=3),
        "commit": st.sampled_from(["abcdef1", "ABCDEF12345"]), "tags": st.lists(st.text(max_size=3), max_size=3),
        "url": texts, "importance": st.one_of(st.none(), st.floats(0, 1), st.integers(0, 1)),
        "owner": values, "gpu_hours": values})


def stored(records: list, path: str = "/pool/runs.jsonl") -> RecordStore:
    chunks = [encode(r) for r in records]
    return RecordStore(b"".join(chunks), np.cumsum([0, *map(len, chunks)]), [(0, path)])


def everything(record) -> str:
    """Every field, as text (a NaN metric is not == to itself)."""
    return repr((record, record.extra, record.source, record.warnings, record.created_at, record.finished_at))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(mappings, st.integers(0, 10 ** 6)), min_size=1, max_size=4))
def test_every_field_comes_back_as_parsed(items):
    records = []
    for mapping, line in items:
        try:
            records.append(parse_record(mapping, source=Source("/pool/runs.jsonl", line)))
        except RecordError:
            pass
    if not records:
        return
    store = stored(records)
    assert [everything(store[i]) for i in range(len(records))] == [everything(r) for r in records]
    assert [store[i].time for i in range(len(records))] == [r.time for r in records]


@pytest.mark.parametrize("extra", ["v: !!binary aGVsbG8=", "v: !!set {x, y}", "v: [&x {k: 1}, *x]", "v: .nan\nw: -0.0",
                                   "1: 2", "v: 1e400"])
def test_yaml_values_in_extra_come_back(extra):
    record = parse_record(yaml.safe_load(f"id: a\nname: b\n{extra}\n"), source=Source("/pool/r.yaml", 3))
    assert everything(stored([record], "/pool/r.yaml")[0]) == everything(record)


def test_a_value_marshal_cannot_hold_is_refused_not_mangled():
    record = parse_record(yaml.safe_load("id: a\nname: b\nsince: 2025-01-02\n"))
    with pytest.raises(ValueError):
        encode(record)


def test_one_record_per_position_and_sources_from_the_file_ranges():
    records = [parse_record({"id": f"r{i}", "name": "n"}, source=Source("/p/any", i)) for i in range(5)]
    chunks = [encode(r) for r in records]
    files = [(0, "/p/a.json"), (2, "/p/no-records.json"), (2, "/p/b.jsonl"), (5, "/p/no-records-either.json")]
    store = RecordStore(b"".join(chunks), np.cumsum([0, *map(len, chunks)]), files)
    assert [store[i].source.path for i in range(5)] == ["/p/a.json"] * 2 + ["/p/b.jsonl"] * 3
    listed = RecordList([0, records[1], None, 3], store)
    assert listed[0] is store[0] and listed[1] is records[1] and listed[2] is None
    assert listed.items[3] == 3 and listed[3] is store[3] and listed.items[3] is store[3]  # built once, kept
    assert [r.id for r in listed.taken([3, 0])] == ["r3", "r0"]
