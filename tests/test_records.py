import math
from datetime import datetime, timedelta, timezone

import pytest

from hypothesis import given, settings, strategies as st

from soma_lsp.records import CodeTie, RecordError, Status, parse_record, record_errors


def rec(**fields):
    return parse_record({"id": "exp-1", "name": "rope-theta", **fields})


def error_of(mapping):
    with pytest.raises(RecordError) as caught:
        parse_record(mapping)
    return caught.value


def test_minimal_record_defaults():
    r = rec()
    assert (r.id, r.name, r.status, r.time, r.headline, r.code) == ("exp-1", "rope-theta", Status.UNKNOWN, None, None, ())


@pytest.mark.parametrize("given, canonical", [
    ("finished", "succeeded"), ("Completed", "succeeded"), ("SUCCESS", "succeeded"), ("ok", "succeeded"),
    ("error", "crashed"), ("Errored", "crashed"), ("killed", "cancelled"), ("canceled", "cancelled"),
    ("aborted", "cancelled"), ("scheduled", "planned"), ("queued", "planned"), ("pending", "planned"),
    ("Failed", "failed"), ("regressed", "regressed"), ("running", "running"),
])
def test_status_aliases_case_insensitive(given, canonical):
    assert rec(status=given).status == canonical


def test_unknown_status_loads_as_unknown_with_a_warning():
    r = rec(status="exploded")
    assert r.status == Status.UNKNOWN
    assert r.warnings and "exploded" in r.warnings[0]


@pytest.mark.parametrize("mapping, field, words", [
    ({"name": "x"}, "id", "required"),
    ({"id": "a"}, "name", "required"),
    ({"id": "", "name": "x"}, "id", "empty"),
    ({"id": "a", "name": "  "}, "name", "empty"),
    ({"id": 42, "name": "x"}, "id", "string"),
    ({"id": "a", "name": "x", "status": 3}, "status", "string"),
    ({"id": "a", "name": "x", "created_at": "yesterday"}, "created_at", "RFC 3339"),
    ({"id": "a", "name": "x", "metrics": [{"name": "loss", "value": "fast"}]}, "metrics[0].value", "number"),
    ({"id": "a", "name": "x", "metrics": {"loss": {"value": 1, "goal": "up"}}}, "metrics.loss.goal", "min or max"),
    ({"id": "a", "name": "x", "metrics": [{"value": 1}]}, "metrics[0].name", "non-empty"),
    ({"id": "a", "name": "x", "metrics": [{"name": "loss"}]}, "metrics[0].value", "required"),
    ({"id": "a", "name": "x", "architecture": "Linear"}, "architecture", "list"),
    ({"id": "a", "name": "x", "architecture": {"Linear": "two"}}, "architecture.Linear", "number"),
    ({"id": "a", "name": "x", "architecture": ["Linear", 3]}, "architecture[1]", "string"),
    ({"id": "a", "name": "x", "code": ["/etc/passwd"]}, "code[0]", "relative"),
    ({"id": "a", "name": "x", "code": ["../secrets.py"]}, "code[0]", ".."),
    ({"id": "a", "name": "x", "code": [{"path": "model/../../x.py"}]}, "code[0].path", ".."),
    ({"id": "a", "name": "x", "code": ["C:/model.py"]}, "code[0]", "relative"),
    ({"id": "a", "name": "x", "code": [7]}, "code[0]", "path"),
    ({"id": "a", "name": "x", "commit": "xyz"}, "commit", "hex"),
    ({"id": "a", "name": "x", "importance": 3}, "importance", "[0, 1]"),
    ({"id": "a", "name": "x", "importance": True}, "importance", "number"),
    ({"id": "a", "name": "x", "tags": "lr"}, "tags", "list"),
    ({"id": "a", "name": "x", "conclusion": 5}, "conclusion", "headline"),
    # integers beyond a float (YAML and JSON integers have no size limit)
    ({"id": "a", "name": "x", "metrics": {"loss": 10 ** 400}}, "metrics.loss", "400 digits"),
    ({"id": "a", "name": "x", "metrics": [{"name": "l", "value": 1, "baseline": -10 ** 500}]}, "metrics[0].baseline",
     "too large"),
    ({"id": "a", "name": "x", "architecture": {"Linear": 2, "Attention": 10 ** 309}}, "architecture.Attention",
     "too large"),
    ({"id": "a", "name": "x", "importance": 10 ** 5000}, "importance", "too large"),
])
def test_bad_fields_name_the_path_and_the_problem(mapping, field, words):
    err = error_of(mapping)
    assert err.field == field
    assert words in err.problem
    assert str(err).startswith(f"{field}: ")


def test_not_an_object():
    assert "object" in str(error_of(["id", "name"]))


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-Inf", "INF", float("nan"), float("inf")])
def test_non_finite_metric_values_are_accepted(raw):
    r = rec(metrics=[{"name": "loss", "value": raw, "baseline": 2.0, "goal": "min"}])
    assert not math.isfinite(r.metrics[0].value)
    assert r.metrics[0].moved_wrong_way is True


@pytest.mark.parametrize("goal, canonical", [("min", "min"), ("Minimize", "min"), ("lower", "min"),
                                             ("MAX", "max"), ("maximize", "max"), ("higher", "max")])
def test_metric_goal_aliases(goal, canonical):
    assert rec(metrics={"acc": {"value": 1, "goal": goal}}).metrics[0].goal == canonical


def test_metrics_list_and_map_forms_agree():
    as_list = rec(metrics=[{"name": "loss", "value": 2.5, "baseline": 2.0, "goal": "min"}])
    as_map = rec(metrics={"loss": {"value": 2.5, "baseline": 2.0, "goal": "min"}})
    assert as_list.metrics == as_map.metrics


def test_timestamps_with_and_without_zones():
    zoned = rec(created_at="2026-03-01T14:00:00+02:00")
    naive = rec(created_at="2026-03-01T12:00:00")
    z = rec(created_at="2026-03-01T12:00:00Z")
    assert zoned.created_at == naive.created_at == z.created_at
    assert naive.created_at.tzinfo == timezone.utc


def test_yaml_native_timestamps_and_dates():
    r = rec(created_at=datetime(2026, 3, 1, 12), finished_at=datetime(2026, 3, 2).date())
    assert r.created_at == datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    assert r.finished_at == datetime(2026, 3, 2, tzinfo=timezone.utc)


def test_time_is_finished_else_created():
    assert rec(created_at="2026-01-01T00:00:00Z").time == datetime(2026, 1, 1, tzinfo=timezone.utc)
    both = rec(created_at="2026-01-01T00:00:00Z", finished_at="2026-01-02T00:00:00+00:00")
    assert both.time - both.created_at == timedelta(days=1)


def test_conclusion_forms():
    assert rec(conclusion="diverges at 2k").headline == "diverges at 2k"
    r = rec(conclusion={"headline": "diverges", "details": "loss spikes after warmup"})
    assert (r.headline, r.details) == ("diverges", "loss spikes after warmup")
    assert rec(conclusion="").headline is None


def test_architecture_list_and_map():
    assert rec(architecture=["Linear", "Linear", "RMSNorm"]).architecture == (("Linear", 1.0), ("Linear", 1.0), ("RMSNorm", 1.0))
    assert rec(architecture={"Linear": 2, "Dropout": 0}).architecture == (("Linear", 2.0), ("Dropout", 0.0))


def test_code_ties_in_their_three_forms():
    r = rec(code=["train.py", "model/transformer.py::RotaryEmbedding.forward",
                  {"path": "./model/moe.py", "symbol": "TopKRouter"}])
    assert r.code == (CodeTie("train.py"), CodeTie("model/transformer.py", "RotaryEmbedding.forward"),
                      CodeTie("model/moe.py", "TopKRouter"))


def test_unknown_fields_are_kept_and_ignored():
    r = rec(wandb_run="abc123", owner="mk")
    assert r.extra == {"wandb_run": "abc123", "owner": "mk"}


def test_commit_tags_url():
    r = rec(commit="ABCDEF1", tags=["rope", "long-context"], url="https://tracker/run/1")
    assert (r.commit, r.tags, r.url) == ("abcdef1", ("rope", "long-context"), "https://tracker/run/1")


def test_shared_architecture_pairs_never_let_a_boolean_or_a_list_pass_as_a_count():
    assert parse_record({"id": "a", "name": "x", "architecture": {"Linear": 1}}).architecture == (("Linear", 1.0),)
    for bad, words in ((True, "boolean"), ([1], "list")):  # True == 1 and hashes alike: not the same pair
        err = error_of({"id": "a", "name": "x", "architecture": {"Linear": bad}})
        assert (err.field, words in err.problem) == ("architecture.Linear", True)
    first = parse_record({"id": "a", "name": "x", "architecture": {"Linear": 2}})
    again = parse_record({"id": "b", "name": "y", "architecture": ["Linear", "Linear"]})
    assert first.architecture[0] is parse_record({"id": "c", "name": "z", "architecture": {"Linear": 2}}).architecture[0]
    assert again.architecture == (("Linear", 1.0), ("Linear", 1.0))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                     max_leaves=8)


@settings(max_examples=300)
@given(st.dictionaries(st.sampled_from(sorted(["id", "name", "status", "created_at", "finished_at", "conclusion",
                                               "notes", "architecture", "metrics", "code", "commit", "tags", "url",
                                               "importance", "repo", "origin", "other"])), _JSON))
def test_record_errors_lists_every_problem_and_none_for_a_good_record(mapping):
    errors = record_errors(mapping)
    try:
        parse_record(mapping)
    except RecordError as first:
        assert errors and (first.field, first.problem) in [(e.field, e.problem) for e in errors]
    else:
        assert errors == []
