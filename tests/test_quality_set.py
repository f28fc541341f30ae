"""The judged set of bench/quality/ keeps to its format (bench/quality/README.md), so it cannot rot:
every graded id is in its pool, every probe sits on its identifier inside a definition, ≥ 60 probes,
a held-out third, and each kind tag holds by its definition. Each check is shown to fail on a broken copy.
"""

from __future__ import annotations

import shutil
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import _judged  # noqa: E402


def test_the_judged_set_is_sound():
    assert _judged.check() == []


def test_the_set_is_large_enough_and_holds_out_a_third():
    judged = [p for p in _judged.load_all() if not p.quiet]
    assert len(judged) >= 60
    assert sum(p.quiet for p in _judged.load_all()) >= 10
    assert 0.30 <= sum(p.heldout for p in judged) / len(judged) <= 0.36
    for kind in _judged.KINDS:
        assert any(kind in p.kinds for p in judged), kind


@pytest.fixture
def broken(tmp_path):
    """A copy of the set, and a way to edit the first judged probe of llm_torch."""
    root = tmp_path / "quality"
    shutil.copytree(_judged.QUALITY, root)
    path = root / "llm_torch" / "probes.yaml"

    def edit(change):
        data = yaml.safe_load(path.read_text())
        change(data)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return _judged.check(root)
    return edit


def test_a_probe_off_its_identifier_is_caught(broken):
    def move(data):
        data["probes"][0]["line"] += 1
    assert any("the cursor is on" in p and "llm_torch-01" in p for p in broken(move))


def test_a_probe_outside_a_definition_is_caught(broken):
    def to_import(data):
        data["probes"][0].update(line=6, character=8, word="torch")   # `import torch` in model/layers.py
    assert any("not inside a def or class" in p for p in broken(to_import))


def test_a_graded_id_missing_from_the_pool_is_caught(broken):
    def unknown(data):
        data["probes"][0]["useful"].append("llm-9999")
    assert any("unknown record llm-9999" in p for p in broken(unknown))


def test_the_heldout_third_is_enforced(broken):
    def flip(data):
        data["probes"][0]["heldout"] = True
    assert any("heldout must be False" in p for p in broken(flip))


def test_kind_tags_are_checked_against_their_definitions(broken):
    def mislabel(data):
        data["probes"][6]["kinds"] = ["knob", "old-dead-end", "paraphrase"]  # repeat_kv: a recent, tied fix
    problems = broken(mislabel)
    assert any("knob, but" in p for p in problems)
    assert any("old-dead-end, but" in p for p in problems)
    assert any("paraphrase, but" in p for p in problems)


def test_too_few_probes_are_caught(broken):
    def shrink(data):
        data["probes"] = data["probes"][:3]
    assert any("llm_torch: 3 judged probes, fewer than 20" in p for p in broken(shrink))


def test_shifted_timestamps_keep_the_records_ages():
    text = "- id: a\n  name: n\n  finished_at: 2025-01-14T09:30:00Z\n- id: b\n  created_at: 2026-11-25T10:00:00Z\n"
    shifted = _judged.shift_timestamps(text, timedelta(days=3, hours=1))
    assert "finished_at: 2025-01-17T10:30:00Z" in shifted
    assert "created_at: 2026-11-28T11:00:00Z" in shifted
    assert shifted.replace("2025-01-17T10:30", "2025-01-14T09:30").replace("2026-11-28T11", "2026-11-25T10") == text


def test_the_scores_follow_their_definitions():
    import quality

    probe = _judged.Probe("w", "p", "f.py", 0, 0, "x", must=("a", "b", "c", "d"), useful=("e",))
    perfect = quality.scores(probe, ["a", "b", "c", "d", "e"])
    assert perfect == {"ndcg5": 1.0, "r3": 1.0, "mrr": 1.0}
    assert quality.recall_at(["a", "z", "b"], probe.must) == pytest.approx(2 / 3)
    assert quality.reciprocal_rank(["z", "y", "e"], probe.grades()) == pytest.approx(1 / 3)
    assert quality.scores(probe, []) == {"ndcg5": 0.0, "r3": 0.0, "mrr": 0.0}
    worse = quality.ndcg_at(["e", "a", "b", "c", "d"], probe.grades())
    assert 0.0 < worse < 1.0


def test_the_ceiling_places_each_must_see_record_and_reorders_only_the_gated_list():
    import ceiling

    # a tie first, a late tie after the first ranked record; `m3` only ranked by the core, `m4` nowhere
    answer = {"tied": ["t"], "late": ["l"], "ranked": ["z", "y", "x", "w", "m1", "m2"],
              "every": ["z", "y", "x", "w", "m1", "m2", "m3", "t", "l"]}
    assert ceiling.shown(answer, answer["ranked"])[:4] == ["t", "z", "l", "y"]
    assert [ceiling.place(r, answer) for r in ("t", "x", "m2", "m3", "m4")] == \
        ["top 3", "4-5", "gated 6-20", "gated out", "not ranked"]
    probe = _judged.Probe("w", "p", "f.py", 0, 0, "x", must=("m1", "m2", "m3", "m4"))
    line = ceiling.row("w", [(probe, answer)])
    counts, today, best = line.split(" | ")[2:8], line.split(" | ")[8], line.split(" | ")[9]
    assert counts == ["0", "0", "2", "0", "1", "1"]
    # today no must-see record is in the top 3; the best order puts m1 first among the ranked records, but
    # the tie and the late tie keep their places (1st, 3rd): one of three
    assert today == "0.000 / 0.000"
    assert best.endswith(f"/ {1 / 3:.3f} |")


def test_the_fresh_part_is_all_held_out_and_apart(tmp_path):
    root = tmp_path / "quality"
    shutil.copytree(_judged.QUALITY, root)
    fresh = [p for p in _judged.load_all(root, _judged.FRESH) if not p.quiet]
    assert len(fresh) >= 15 and all(p.heldout for p in fresh)
    assert not {p.id for p in fresh} & {p.id for p in _judged.load_all(root)}  # `all` stays the first set
    path = root / _judged.FRESH[0] / "probes.yaml"
    data = yaml.safe_load(path.read_text())
    data["probes"][0]["heldout"] = False
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert any("a fresh workspace is all held out" in p for p in _judged.check(root))
