"""Settings whose value is a list or a tuple (`soma_lsp.knobs`): equal across spellings, never equal
to a single value, bounded, and only literal in code."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, strategies as st

from soma_lsp.knobs import MAX_ITEMS, knob_settings, line_settings
from soma_lsp.pool.trackers.mapping import Run, record_mapping


def value(text: str, key: str) -> str | None:
    knob = knob_settings(text).get(key)
    return knob.value if knob else None


@pytest.mark.parametrize("one, other", [
    ("betas=(0.9, 0.95)", "betas: [0.9,0.95]"),
    ("sr_ratios=[8,4,2,1]", "sr_ratios = (8, 4, 2, 1)"),
    ("pool_scales=(1, 2, 3, 6)", "pool_scales=[1.0,2,3,6.0]"),
    ("stride: [341, 341]", "stride=(341,341)"),
    ("depths=[3, 3, 9, 3]", "depths=(3,3,9,3,)"),
    ("rope=[1e6, 2k]", "rope=(1_000_000, 2000)"),
    ("keep=(0.5,)", "keep=[0.5]"),
    ("mode=[Cosine, 'v']", 'mode=(cosine, "V")'),
])
def test_a_list_value_is_equal_whatever_its_brackets_and_spacing(one, other):
    key = one.split("=")[0].split(":")[0].strip()
    assert value(one, key) is not None and value(one, key) == value(other, key)


@pytest.mark.parametrize("one, other", [
    ("betas=(0.9, 0.95)", "betas=(0.9, 0.999)"),
    ("depths=[3, 3, 9, 3]", "depths=[3, 3, 27, 3]"),
    ("sr_ratios=[8,4,2,1]", "sr_ratios=[1,2,4,8]"),  # (order counts)
    ("stride: [341, 341]", "stride: [341]"),
    ("keep=(0.5,)", "keep=0.5"),  # never equal to a single value
    ("keep=[1000]", "keep=1e3"),
])
def test_a_list_value_differs_from_another_list_and_from_a_scalar(one, other):
    key = one.split("=")[0].split(":")[0].strip()
    assert value(one, key) is not None and value(other, key) is not None and value(one, key) != value(other, key)


NUMBERS = st.lists(st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: round(f, 4)),
                   min_size=1, max_size=4)


@given(NUMBERS, st.sampled_from(["()", "[]"]), st.sampled_from(["[]", "()"]), st.text(" ", max_size=2),
       st.text(" ", max_size=2), st.booleans())
def test_any_list_of_numbers_in_either_bracket_style_has_one_canonical_value(numbers, first, second, gap, pad, trail):
    def spelled(brackets, sep, tail):
        items = sep.join(repr(n) for n in numbers)
        comma = "," if tail or (brackets == "()" and len(numbers) == 1) else ""
        return f"x={brackets[0]}{pad}{items}{comma}{pad}{brackets[1]}"
    one, other = spelled(first, "," + gap, trail), spelled(second, ", ", False)
    assert value(one, "x") is not None and value(one, "x") == value(other, "x")
    assert value(one, "x") == "[" + ", ".join(repr(float(n)) for n in numbers) + "]"


@pytest.mark.parametrize("text", [
    "betas=(0.9, 0.95", "betas=[0.9, 0.95 then 0.99", "betas=(0.9, 0.95]",  # unbalanced, mismatched
    "x=[[1, 2], [3, 4]]", "x=(1, (2, 3))", "x=[(1, 2), (3, 4)]",  # nested
    "x=(0.5)", "x=()", "x=[]", "x=[1,,2]", "note: (see above)",  # no tuple, empty, an item of prose
    "x=[" + ", ".join(["1"] * (MAX_ITEMS + 1)) + "]",  # too many items
    "x=[" + "1" * 70 + "]",  # too long
    "x=[" + ", ".join(["123456"] * 12) + "]",  # short items, 94 characters in all: too long
])
def test_what_is_no_flat_short_list_is_no_setting(text):
    assert set(knob_settings(f"{text} then ok=[1, 2]")) == {"ok"}  # (and the scan goes on past it)


def test_settings_inside_parentheses_are_read_as_before():
    assert {k: v.text for k, v in knob_settings("best: (lr=3e-4, wd=0.1) and sched=[cosine]").items()} == {
        "lr": "3e-4", "wd": "0.1", "sched": "[cosine]"}


@pytest.mark.parametrize("text", ["x=(" + "," * 10_000 + ")", "x=(" + "1," * 10_000, "x=" + "[" * 10_000,
                                  ("a=(" + "1, " * 40) * 300])
def test_hostile_values_stay_no_setting_in_bounded_time(text):
    start = time.perf_counter()
    assert set(knob_settings(text + " ok=(1, 2)")) == {"ok"} and set(line_settings(text + " ok=(1, 2)")) == {"ok"}
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("blank", [" ", "\t"])
def test_a_line_of_blanks_after_a_colon_is_read_in_linear_time(blank):
    """`x:` and thousands of blanks: the annotated-assignment pattern let three parts share the blanks and
    backtracked in cubic time (4,000 spaces: 44 s, the server's one interpreter lock held) on a line a hover
    reads — and diagnostics up to 2,000 characters."""
    start = time.perf_counter()
    assert line_settings("x:" + blank * 5_000) == {}
    assert line_settings("x:" + blank * 5_000 + "= 3") == {}  # (an annotation is at most 128 characters)
    assert line_settings("x: int" + blank * 100 + "= 3")["x"].text == "3"
    assert time.perf_counter() - start < 0.5


def test_in_code_a_list_is_a_setting_when_each_item_is_a_literal():
    assert line_settings("    betas: tuple = (0.9, 0.95)")["betas"].value == "[0.9, 0.95]"
    assert line_settings("    betas: Tuple[float, float] = (0.9, 0.95)")["betas"].text == "(0.9, 0.95)"
    assert {k: v.value for k, v in line_settings("  conv = nn.Conv2d(3, 8, kernel_size=(3, 3))").items()} == {
        "kernel_size": "[3.0, 3.0]"}  # a call's keyword, as a scalar one
    assert line_settings("x = torch.zeros((4, 4))") == {}  # no setting of x
    assert line_settings("shape = (h, w)") == {} and line_settings("losses = []") == {}
    assert line_settings("  stride: [a, b]", config=True)["stride"].value == "[a, b]"  # YAML's bare words
    assert line_settings("depths: [3, 3, 9, 3]  # ConvNeXt-T", config=True)["depths"].text == "[3, 3, 9, 3]"


def test_a_tracker_param_kept_as_a_string_is_the_same_setting_as_the_code():
    """MLflow keeps every param as a string (`(0.9, 0.95)`), W&B keeps the list."""
    code = line_settings("    betas: tuple = (0.9, 0.95)")["betas"].value
    for params, shown in (({"betas": "(0.9, 0.95)"}, "(0.9,0.95)"), ({"betas": "[0.9, 0.95]"}, "[0.9,0.95]"),
                          ({"betas": [0.9, 0.95]}, "[0.9,0.95]")):
        notes = record_mapping(Run(id="r", params=params))["notes"]
        assert value(notes, "betas") == code and knob_settings(notes)["betas"].text == shown  # (no `0.9,_0.95`)
    assert record_mapping(Run(id="r", params={"optimizer": "adam w", "tag": ""}))["notes"] == 'optimizer=adam_w tag=""'
