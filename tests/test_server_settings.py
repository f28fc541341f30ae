"""Typed settings: defaults, sources merged per key, invalid values reported and replaced."""

from __future__ import annotations

from soma_lsp.retrieval import DEFAULT_WEIGHTS, Weights
from soma_lsp.server.settings import DEFAULT_MIN_SCORE, Settings, parse


def test_defaults():
    settings, problems = parse(None, {})
    assert settings == Settings() and problems == []
    assert settings.hover_count == 3 and settings.min_score == DEFAULT_MIN_SCORE and settings.code_lens
    assert settings.dead_end_severity == "warning" and settings.pool is None and settings.weights == DEFAULT_WEIGHTS


def test_sources_merge_per_key_nested_or_dotted_or_wrapped():
    settings, problems = parse({"hover": {"count": 5, "minScore": 0.2}, "pool": "a"},
                               {"soma": {"hover.count": 7, "deadEnds": {"severity": "Hint"}}})
    assert problems == []
    assert (settings.hover_count, settings.min_score, settings.pool, settings.dead_end_severity) == (7, 0.2, ("a",), "hint")
    settings, _ = parse({"pool": ["x", "y"], "weights": {"lexical": 1, "structural": 0}, "halfLifeDays": 7,
                         "codeLens": {"enabled": False}})
    assert settings.pool == ("x", "y") and settings.weights == Weights(lexical=1.0, structural=0.0)
    assert settings.half_life_days == 7.0 and settings.code_lens is False


def test_invalid_values_fall_back_with_a_problem_each():
    settings, problems = parse({"hover": {"count": "three", "minScore": 1.5}, "halfLifeDays": 0,
                                "weights": {"lexical": 0, "structural": 0, "recency": 0, "importance": 0},
                                "codeLens": {"enabled": "yes"}, "deadEnds": {"severity": "loud"},
                                "pool": 3, "unknown": {"key": 1}})
    assert settings == Settings()
    assert len(problems) == 7
    assert all(p.startswith("soma.") and "using the default" in p for p in problems)
    assert any("soma.hover.count" in p and "expected a number" in p for p in problems)
    assert any("soma.deadEnds.severity" in p and "warning, information, hint, off" in p for p in problems)


def test_bad_weight_names_are_reported():
    _, problems = parse({"weights": {"lexcial": 1}})
    assert problems and "unknown weight" in problems[0]


def test_levers_are_one_typed_setting_all_kept_ones_on_by_default():
    from soma_lsp.query import ALL_ON, Levers

    settings, problems = parse(None, {})
    assert settings.levers == ALL_ON and settings.levers.knob and settings.levers.aliases
    settings, problems = parse({"soma": {"levers": {"knob": False, "aliases": False}}})
    assert problems == [] and settings.levers == Levers(knob=False, aliases=False)
    assert settings.to_json()["levers"]["knob"] is False


def test_bad_levers_are_reported_and_the_defaults_kept():
    from soma_lsp.query import ALL_ON

    for bad, says in (({"knob": "off"}, "levers.knob: expected true or false"),
                      ({"telepathy": True}, "unknown lever 'telepathy'"), ("all", "expected an object")):
        settings, problems = parse({"levers": bad})
        assert settings.levers == ALL_ON
        assert len(problems) == 1 and says in problems[0] and problems[0].startswith("soma.levers: ")
