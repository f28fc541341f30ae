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

_texts = st.one_of(st.text(max_size=6), st.sampled_from(["", " ", "\t\n", "a", " x ", "é", "\x00"]))
_words = st.one_of(st.text(st.characters(codec="utf-8"), min_size=1, max_size=6).filter(str.strip),
                   st.sampled_from(["a", "x y", "é"]))
_big = st.sampled_from([2 ** 53 + 1, 2 ** 63, 2 ** 64, 2 ** 64 + 1, -2 ** 63 - 1, 10 ** 30, 10 ** 308, 10 ** 400])
_finite = st.one_of(st.integers(-10, 10), st.floats(allow_nan=False, allow_infinity=False))
_numbers = st.one_of(_finite, _big, st.floats(), st.booleans())
_json = st.recursive(st.one_of(st.none(), _numbers, _texts), lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_texts, inner, max_size=3)), max_leaves=6)
_non_finite = st.sampled_from(["nan", "NaN", " inf ", "-Infinity", "+inf", "infinite", "1.5"])


def _kinds(valid, odd):
    """A field's value: mostly one it accepts, sometimes an odd one of its kinds, or any JSON at all."""
    return st.integers(0, 11).flatmap(lambda i: valid if i < 10 else odd if i == 10 else _json)


_timestamps = _kinds(st.sampled_from(["2026-03-01T12:00:00Z", "2026-03-01", "2026-03-01 12:00:00",
                                      "2026-03-01T12:00:00+02:00", "2026-03-01T12:00:00.123Z"]),
                     st.one_of(_texts, st.sampled_from([
                         "2026-03-01t12:00:00z", " 2026-03-01T12:00:00Z ", "2026-03-01T12:00:00.1234567Z",
                         "2026-13-01", "20260301T120000", "2026-03-01T24:00:00", "2026-W09-7", "2026-03-01T12:00:00-00:30"])))
_metric_value = _kinds(_finite, st.one_of(_big, _non_finite, st.floats(), st.booleans()))
_metric_body = st.fixed_dictionaries({"value": _metric_value}, optional={
    "baseline": _kinds(_finite, st.one_of(_metric_value, st.none())),
    "goal": _kinds(st.sampled_from(["min", "MAX", " lower ", "higher", None]), st.one_of(_texts, st.just("up"))),
    "unit": _texts})
_metric_item = _kinds(st.builds(lambda name, body: {"name": name, **body}, _words, _metric_body),
                      st.fixed_dictionaries({}, optional={"name": _texts, "value": _metric_value}))
_tie = _kinds(st.sampled_from(["model/rope.py::Rotary.forward", "./a//b.py", "a.py:: ", "x/./y.py::f"]),
              st.sampled_from(["../x.py", "/abs.py", "C:x.py", "a\\b.py", "~/x", ""]))
_fields = {
    "status": _kinds(st.sampled_from(["succeeded", " OK ", "killed", "Queued", None]),
                     st.one_of(st.just("exploded"), _texts)),
    "created_at": _timestamps, "finished_at": _timestamps,
    "conclusion": _kinds(st.one_of(_words, st.fixed_dictionaries({}, optional={
        "headline": _kinds(_words, _texts), "details": _kinds(_words, _texts)})),
        st.fixed_dictionaries({"more": _texts}, optional={"headline": _texts})),
    "notes": _kinds(_words, _texts),
    "architecture": _kinds(st.one_of(st.lists(_words, max_size=3), st.dictionaries(_words, _finite, max_size=3)),
                           st.one_of(st.lists(_json, max_size=2), st.dictionaries(_texts, _numbers, max_size=2))),
    "metrics": _kinds(st.one_of(st.lists(_metric_item, max_size=3), st.dictionaries(
        _words, st.one_of(_metric_body, _metric_value), max_size=3)), st.dictionaries(_texts, _json, max_size=2)),
    "code": _kinds(st.one_of(_tie, st.lists(st.one_of(_tie, st.fixed_dictionaries(
        {"path": _tie}, optional={"symbol": _kinds(_words, _texts)})), max_size=3)), _texts),
    "commit": _kinds(st.sampled_from(["abcdef1", "ABCDEF1234", " 0123456789abcdef0123456789abcdef01234567 "]),
                     st.sampled_from(["abc", "g" * 7, "0" * 41])),
    "tags": _kinds(st.lists(_words, max_size=3), st.lists(_json, max_size=2)), "url": _kinds(_words, _texts),
    "importance": _kinds(st.one_of(st.floats(0, 1), st.sampled_from([0, 1])), _numbers),
    "repo": _kinds(_words, _texts), "origin": _kinds(_words, _texts),
}
_names = _kinds(st.sampled_from(["exp-1", "rope", " x ", "é"]), _texts)
_records = _kinds(st.fixed_dictionaries({"id": _names, "name": _names}, optional=_fields),
                  st.fixed_dictionaries({"id": _names, "name": _names, "owner": _json}, optional=_fields))


@st.composite
def _lines(draw) -> bytes:
    """A record as a JSON line, sometimes with its first key written twice, a byte that is not UTF-8,
    a lone surrogate, or a number in another spelling."""
    value = draw(_records)
    line = json.dumps(value, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")
    change = draw(st.integers(0, 9).map(lambda i: ["twice", "byte", "surrogate", "spelling"][i] if i < 4 else ""))
    if change == "twice" and line.startswith(b"{") and len(line) > 2:
        line = b'{"id": "first", ' + line[1:]
    elif change == "byte":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + b"\xff" + line[at:]
    elif change == "surrogate":
        line = line.replace(b'"a"', b'"a\\udc80"', 1)
    elif change == "spelling":
        line = line.replace(b": 1,", b": 1.0e0,").replace(b": 0,", b": -0,").replace(b": 2", b": 2E0", 1)
    return line


@settings(max_examples=1500)
@given(_lines())
def test_whatever_the_fast_path_gives_the_full_path_gives_too(line):
    same_as_full_path(line)


@settings(max_examples=300)
@given(st.lists(_lines(), max_size=6))
def test_a_file_loads_as_with_the_full_path_alone(tmp_path_factory, lines):
    """The loader as it is against the same loader with the fast path switched off (every line the
    full way): the same records, field for field, in the same order, and the same problems."""
    pool = tmp_path_factory.mktemp("pool") / "runs.jsonl"
    pool.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
    fast = load_file(pool)
    with pytest.MonkeyPatch.context() as switch:
        switch.setattr(loader, "decode_record", lambda line, source: None)
        full = load_file(pool)
    assert [fields_of(r) for r in fast.records] == [fields_of(r) for r in full.records]
    assert fast.problems == full.problems
