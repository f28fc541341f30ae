"""bench/quality_delta.py: a try's per-workspace delta, the name-line probes apart, and the round's rule."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import _judged  # noqa: E402
import quality_delta  # noqa: E402


def probe(pid: str, workspace: str, r3: float, ndcg: float = 0.5) -> dict:
    return {"id": pid, "workspace": workspace, "scores": {"r3": r3, "ndcg5": ndcg, "mrr": 1.0}}


def test_the_read_workspaces_leave_the_untouched_ones_out():
    assert set(quality_delta.READ) == set(_judged.WORKSPACES + _judged.FRESH) - set(_judged.UNTOUCHED)


def test_a_name_line_probe_sits_on_a_definitions_own_name():
    named = quality_delta.on_name_line()
    probes = {p.id: p for w in quality_delta.READ for p in _judged.load_probes(w)}
    assert named and named < set(probes)
    for pid in named:  # the line holds `def NAME` or `class NAME`
        p = probes[pid]
        line = (_judged.QUALITY / p.workspace / p.file).read_text(encoding="utf-8").splitlines()[p.line]
        assert line.lstrip().startswith(("def ", "async def ", "class ")), pid
    body = next(p for p in probes.values() if not p.quiet and p.id not in named)
    line = (_judged.QUALITY / body.workspace / body.file).read_text(encoding="utf-8").splitlines()[body.line]
    assert not line.lstrip().startswith(("def ", "class "))


def test_deltas_count_r3_in_probes_per_workspace():
    base = {p["id"]: p for p in [probe("a", "llm_torch", 0.33), probe("b", "llm_torch", 1.0), probe("c", "vit_flax", 0.5)]}
    other = {p["id"]: p for p in [probe("a", "llm_torch", 1.0), probe("b", "llm_torch", 0.5), probe("c", "vit_flax", 0.5, 0.9)]}
    table = quality_delta.deltas(base, other)
    n, dr, dn, up, down = table["llm_torch"]
    assert (n, up, down) == (2, 1, 1) and dr == pytest.approx(0.17) and dn == 0
    assert table["vit_flax"][1] == 0 and table["vit_flax"][2] == pytest.approx(0.4)
    assert set(quality_delta.deltas(base, other, {"c"})) == {"vit_flax"}


def test_the_rule_wants_most_workspaces_level_the_mean_up_and_no_workspace_down_a_probe():
    row = lambda dr: (10, dr, 0.0, 0, 0)  # noqa: E731
    workspaces = quality_delta.READ
    assert quality_delta.verdict({w: row(0.5 if i == 0 else 0.0) for i, w in enumerate(workspaces)})[0]
    assert not quality_delta.verdict({w: row(0.0) for w in workspaces})[0]  # nothing up: the mean is not
    # one workspace lifted a lot, five down a little: the pattern that does not generalise
    assert not quality_delta.verdict({w: row(3.0 if i == 0 else -0.5 if i < 6 else 0.0)
                                      for i, w in enumerate(workspaces)})[0]
    assert not quality_delta.verdict({w: row(2.0 if i == 0 else -1.5 if i == 1 else 0.0)
                                      for i, w in enumerate(workspaces)})[0]  # one down by more than a probe


def test_a_run_holding_untouched_probes_is_refused(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"configs": [{"probes": [probe("x", _judged.UNTOUCHED[0], 1.0)]}]}))
    with pytest.raises(SystemExit):
        quality_delta._probes(str(path))
