"""Hypothesis strategies of JSON lines for the pool's records: mostly records of the well-formed
shape, with odd values of each field's kinds, any JSON in any field, unknown fields, and lines spoilt
as files are (a key written twice, a byte that is not UTF-8, a lone surrogate, numbers spelt
otherwise) — for the tests of the paths a line may take (`records.decode_record`, the counting child)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

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
                         "2026-13-01", "20260301T120000", "2026-03-01T24:00:00", "2026-W09-7",
                         "2026-03-01T12:00:00-00:30"])))
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
def json_lines(draw) -> bytes:
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
