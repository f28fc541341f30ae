"""What `parse_record`'s fast paths must not change: the records are ordinary frozen dataclasses, and
errors still name the exact field path."""

import dataclasses
import math
import pickle
from datetime import datetime, timedelta, timezone

import pytest

from soma_lsp.records import CodeTie, Metric, Record, RecordError, Source, Status, code_path, parse_record

FULL = {
    "id": "exp-1", "name": "rope-theta", "status": "Finished", "created_at": "2026-03-01T12:00:00Z",
    "finished_at": "2026-03-01T14:30:00+02:00", "conclusion": {"headline": "diverges", "details": "at 2k"},
    "notes": "warmup too short", "architecture": {"Linear": 2, "RMSNorm": 1.5},
    "metrics": [{"name": "loss", "value": 2.5, "baseline": 3, "goal": "lower"}, {"name": "ppl", "value": "nan"}],
    "code": ["model/rope.py::Rotary.forward", {"path": "./train.py"}], "commit": "ABCDEF1", "tags": ["rope"],
    "url": "https://tracker/1", "importance": 0.5, "owner": "ana",
}


def test_a_parsed_record_is_an_ordinary_record():
    source = Source("pool.jsonl", 3)
    r = parse_record(FULL, source=source)
    expected = Record(
        id="exp-1", name="rope-theta", status=Status.SUCCEEDED,
        created_at=datetime(2026, 3, 1, 12, tzinfo=timezone.utc),
        finished_at=datetime(2026, 3, 1, 14, 30, tzinfo=timezone(timedelta(hours=2))),
        headline="diverges", details="at 2k",
        notes="warmup too short", architecture=(("Linear", 2.0), ("RMSNorm", 1.5)),
        metrics=(Metric("loss", 2.5, 3.0, "min"), Metric("ppl", math.nan)),
        code=(CodeTie("model/rope.py", "Rotary.forward"), CodeTie("train.py")), commit="abcdef1", tags=("rope",),
        url="https://tracker/1", importance=0.5, extra={"owner": "ana"}, source=source, warnings=())
    assert type(r) is Record and all(type(m) is Metric for m in r.metrics) and all(type(t) is CodeTie for t in r.code)
    for f in dataclasses.fields(Record):
        if f.name != "metrics":  # NaN != NaN
            assert getattr(r, f.name) == getattr(expected, f.name), f.name
    assert r.metrics[0] == expected.metrics[0] and math.isnan(r.metrics[1].value)
    assert repr(r).replace("nan", "x") == repr(expected).replace("nan", "x")
    without_nan = dataclasses.replace(r, metrics=r.metrics[:1])
    assert without_nan == dataclasses.replace(expected, metrics=expected.metrics[:1])
    assert hash(without_nan) == hash(dataclasses.replace(expected, metrics=expected.metrics[:1]))
    assert pickle.loads(pickle.dumps(without_nan)) == without_nan
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.metrics[0].value = 1.0


def test_unknown_status_warning_and_no_extra_fields():
    r = parse_record({"id": "a", "name": "b", "status": " Exploded "})
    assert (r.status, r.extra) == (Status.UNKNOWN, {})
    assert r.warnings == ("status: unknown status ' Exploded ', loaded as 'unknown'",)
    assert parse_record({"id": "a", "name": "b"}).warnings == ()


@pytest.mark.parametrize("raw, clean", [
    ("model/rope.py", "model/rope.py"), (" model/rope.py ", "model/rope.py"), ("a//b.py", "a/b.py"),
    ("./a/./b.py", "a/b.py"), ("a/b/", "a/b"), ("x/..y/z.py", "x/..y/z.py"), ("1:/x.py", "1:/x.py"),
    (".venv/x", ".venv/x"),
])
def test_code_paths_are_canonical(raw, clean):
    assert code_path(raw, "code[0]") == clean


@pytest.mark.parametrize("raw, words", [
    ("C:x.py", "relative"), ("z:/x.py", "relative"), ("~/x.py", "relative"), ("a/../b.py", ".."), ("./", "file path"),
    ("  ", "non-empty"), ("a\\b.py", "'/'-separated"),
])
def test_bad_code_paths(raw, words):
    with pytest.raises(RecordError) as caught:
        code_path(raw, "code[2]")
    assert caught.value.field == "code[2]" and words in caught.value.problem


@pytest.mark.parametrize("metrics, field, words", [
    ([{"name": "a", "value": 1}, {"name": "b", "value": 1, "baseline": "x"}], "metrics[1].baseline", "number"),
    ([{"name": "a", "value": True}], "metrics[0].value", "boolean"),
    ([{"name": "a", "value": 1}, 3], "metrics[1]", "object"),
    ({"loss": "fast"}, "metrics.loss", "string"),
    ({"loss": {"value": 1, "baseline": [1]}}, "metrics.loss.baseline", "list"),
    ({1: 2.0}, "metrics.1.name", "non-empty"),
    ({"loss": {"value": 1, "goal": 3}}, "metrics.loss.goal", "min or max"),
])
def test_metric_errors_name_the_path(metrics, field, words):
    with pytest.raises(RecordError) as caught:
        parse_record({"id": "a", "name": "b", "metrics": metrics})
    assert caught.value.field == field and words in caught.value.problem


@pytest.mark.parametrize("architecture, field", [
    ({"Linear": 1, 3: 2}, "architecture"), ({"Linear": 1, "Dropout": "x"}, "architecture.Dropout"),
    (["Linear", "RMSNorm", None], "architecture[2]"),
])
def test_architecture_errors_name_the_path(architecture, field):
    with pytest.raises(RecordError) as caught:
        parse_record({"id": "a", "name": "b", "architecture": architecture})
    assert caught.value.field == field


def test_the_first_problem_in_field_order_is_reported():
    bad = {"id": 3, "name": None, "conclusion": 5, "status": 1, "tags": "x"}
    with pytest.raises(RecordError) as caught:
        parse_record(bad)
    assert caught.value.field == "conclusion"
    del bad["conclusion"]
    with pytest.raises(RecordError) as caught:
        parse_record(bad)
    assert caught.value.field == "id"


def test_code_ties_given_as_text_are_shared_and_still_checked():
    a = parse_record({"id": "a", "name": "b", "code": ["model/rope.py::Rotary.forward"]})
    b = parse_record({"id": "c", "name": "d", "code": ["train.py", "model/rope.py::Rotary.forward"]})
    assert a.code[0] == b.code[1] == CodeTie("model/rope.py", "Rotary.forward")
    with pytest.raises(RecordError) as caught:
        parse_record({"id": "a", "name": "b", "code": ["model/rope.py::Rotary.forward", "../x.py"]})
    assert caught.value.field == "code[1]"
    many = [f"pkg/m{i}.py::f{i}" for i in range(10_000)]  # more than the memo holds
    r = parse_record({"id": "a", "name": "b", "code": many + ["./pkg//m1.py::f1 "]})
    assert r.code[:2] == (CodeTie("pkg/m0.py", "f0"), CodeTie("pkg/m1.py", "f1")) and r.code[-1] == r.code[1]
