"""`records.decode_record` — a JSON line straight to its record in C — against the full path it stands
in for (`loader.decode_line`, orjson then the stdlib, and `parse_record`): whenever it gives a record,
the full path gives the same one, field for field (extra, source and warnings included); on any other
line it gives None and the loader takes the full path, so every report stays `parse_record`'s."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from soma_lsp.pool import loader
from soma_lsp.pool.loader import decode_line, load_file
from soma_lsp.records import Record, RecordError, Source, decode_record, parse_record

from record_lines import json_lines

SOURCE = Source("pool/runs.jsonl", 7)


def full_path(line: bytes) -> Record | str:
    """What the loader made of a line before the fast path: a record, or why not."""
    try:
        value = decode_line(line)
    except (ValueError, RecursionError) as error:
        return f"undecodable: {error!r}"
    if not isinstance(value, dict):
        return "not an object"
    try:
        return parse_record(value, source=SOURCE)
    except RecordError as error:
        return f"refused: {error}"


def fields_of(record: Record) -> str:
    """Every field, compared ones or not, as text that tells 1 from 1.0, -0.0 from 0.0, a zone from
    another, a Metric from a tuple — and NaN equal to itself."""
    return repr([(f.name, getattr(record, f.name)) for f in dataclasses.fields(Record)])


def same_as_full_path(line: bytes) -> bool:
    """Assert the fast path agrees with the full path on `line`; True if it gave a record."""
    fast = decode_record(line, source=SOURCE)
    if fast is None:
        return False
    full = full_path(line)
    assert isinstance(full, Record), (line, full)
    assert type(fast) is Record and all(type(m) is type(n) for m, n in zip(fast.metrics, full.metrics))
    assert fields_of(fast) == fields_of(full), line
    return True


# -- records of the well-formed shape: the fast path takes every one ---------------------------------

WELL_FORMED = [
    {"id": "exp-1", "name": "rope"},
    {"id": "exp-1", "name": "rope-theta", "status": " Finished ", "created_at": "2026-03-01T12:00:00Z",
     "finished_at": "2026-03-01T14:30:00+02:00", "conclusion": {"headline": "diverges", "details": " "},
     "notes": "warmup too short", "architecture": {"Linear": 2, "RMSNorm": 1.5, "Big": 2 ** 70},
     "metrics": [{"name": "loss", "value": 2.5, "baseline": 3, "goal": "lower"}, {"name": "ppl", "value": "NaN"},
                 {"name": "x", "value": -0.0, "baseline": "-inf", "goal": None}],
     "code": ["model/rope.py::Rotary.forward", {"path": "./train.py"}, {"path": "a//b.py", "symbol": " f "}],
     "commit": "ABCDEF1", "tags": ["rope", "rope"], "url": "https://tracker/1", "importance": 1,
     "repo": " ", "origin": "MLflow"},
    {"id": " x ", "name": "y", "status": "exploded", "conclusion": "a lesson", "architecture": ["A", "A", ""],
     "metrics": {"loss": 2.31, "acc": {"value": 1, "goal": "MAX"}, "div": "inf"}, "code": "a.py::f",
     "importance": 0.0, "created_at": "2026-03-01", "finished_at": "2026-03-01 12:00:00.5"},
    {"id": "a", "name": "b", "code": {"path": "x.py", "symbol": None}, "status": None, "tags": [], "notes": "",
     "metrics": [], "architecture": {}, "conclusion": {"details": "only"}, "commit": "0" * 40},
]


def test_the_fast_path_takes_well_formed_records_and_gives_the_full_paths_record():
    for value in WELL_FORMED:
        for line in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False, indent=None,
                                                            separators=(",", ":")).encode()):
            assert same_as_full_path(line), line
    warned = decode_record(json.dumps(WELL_FORMED[2]).encode(), source=SOURCE)
    assert warned.warnings == ("status: unknown status 'exploded', loaded as 'unknown'",)


NOT_FAST = [
    b'{"id": "a", "name": "b", "owner": "ana"}',  # an unknown field: kept in `extra` by the full path
    b'{"id": "a", "name": "b", "metrics": [{"name": "l", "value": NaN}]}',  # a literal the stdlib reads
    b'{"id": "a\\ud800", "name": "b"}',  # a lone surrogate: orjson refuses it, the stdlib keeps it
    b'{"id": "a", "name": "b", "importance": 1e400}',  # beyond a float
    b'{"id": "a", "name": "b", "conclusion": {"headline": "h", "by": "me"}}',
    b'{"id": " ", "name": "b"}', b'{"name": "b"}', b'{"id": "a", "name": "b", "created_at": "soon"}',
    b'{"id": "a", "name": "b", "status": 3}', b'{"id": "a", "name": "b", "importance": 1.5}',
    b'{"id": "a", "name": "b", "architecture": {"A": true}}', b'{"id": "a", "name": "b", "code": ["../x"]}',
    b'{"id": "a", "name": "b", "commit": "xyz"}', b'{"id": "a", "name": "b", "metrics": {"l": {"goal": "min"}}}',
    b'{"id": "a", "name": "b\xff"}', b'{"id": "a", "name": "b"', b'["a"]', b'{"id": "a", "name": "b"} x',
]


def test_any_other_line_takes_the_full_path_and_the_loader_reports_it_as_before(tmp_path):
    for line in NOT_FAST:
        assert decode_record(line, source=SOURCE) is None, line
    pool = tmp_path / "runs.jsonl"
    pool.write_bytes(b"\n".join(NOT_FAST + [json.dumps(WELL_FORMED[1]).encode()]) + b"\n")
    load = load_file(pool)
    assert [(r.source.line, r.id) for r in load.records] == [(0, "a"), (1, "a"), (2, "a\ud800"), (4, "a"),
                                                             (18, "exp-1")]
    assert load.records[0].extra == {"owner": "ana"} and math.isnan(load.records[1].metrics[0].value)
    assert load.records[3].headline == "h"
    assert [(p.line, p.field) for p in load.problems if p.severity == "error"] == [
        (3, "importance"), (5, "id"), (6, "id"), (7, "created_at"), (8, "status"), (9, "importance"),
        (10, "architecture.A"), (11, "code[0]"), (12, "commit"), (13, "metrics.l.value"), (14, ""), (15, ""),
        (16, ""), (17, "")]


# -- any line: whatever the fast path gives, the full path gives too ------------------------------------

@settings(max_examples=1500)
@given(json_lines())
def test_whatever_the_fast_path_gives_the_full_path_gives_too(line):
    same_as_full_path(line)


@settings(max_examples=300)
@given(st.lists(json_lines(), max_size=6), st.sampled_from([b"", b"\n\n ", b"\xef\xbb\xbf"]))
def test_files_load_as_with_the_full_path_alone(tmp_path_factory, lines, before):
    """The loader as it is against the same loader with the fast path switched off (every line, every
    record the full way): the same records, field for field, in the same order, and the same problems
    — of a `.jsonl` file of the lines, and of a `.json` file of the first one."""
    folder = tmp_path_factory.mktemp("pool")
    (folder / "runs.jsonl").write_bytes(before + b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    (folder / "run.json").write_bytes(before + (lines[0] if lines else b"{}"))
    for path in (folder / "runs.jsonl", folder / "run.json"):
        fast = load_file(path)
        with pytest.MonkeyPatch.context() as switch:
            switch.setattr(loader, "decode_record", lambda line, source: None)
            full = load_file(path)
        assert [fields_of(r) for r in fast.records] == [fields_of(r) for r in full.records]
        assert fast.problems == full.problems
