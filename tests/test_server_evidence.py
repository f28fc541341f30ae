"""The server's issue-20 levers in process: knob tier, siblings, the strength gate, the cursor's line,
shared components, ties off the cursor's line."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from soma_lsp.query import ALL_ON, Hints, Levers
from soma_lsp.records import parse_record
from soma_lsp.retrieval import LiveIndex, RetrievalQuery
from soma_lsp.server.evidence import (focus_order, name_stem, names_only, names_the_word, off_the_line, with_forms,
                                      word_spellings)
from soma_lsp.server import evidence
from soma_lsp.server.related import REACH, Related, Tied, find_related, reach_below, worth_a_lens
from soma_lsp.server.standing import DEAD_END_SHARE, OLD_RUN_SHARE, lift, standing

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
OFF = Levers(**{name: False for name in Levers.names()})


def index():
    raw = [
        {"id": "r1", "name": "rope-theta-1m-4k-ctx", "notes": "rope_theta=1000000 at seq 4096",
         "conclusion": "a base of 1M helps 4k context", "finished_at": "2026-10-01T00:00:00Z"},
        {"id": "r2", "name": "rope-theta-10k-4k-ctx", "notes": "rope_theta=10000 at seq 4096",
         "conclusion": "the default base degrades past 2k", "finished_at": "2025-10-01T00:00:00Z"},
        {"id": "r3", "name": "lr-3e-4-1b", "notes": "lr=3e-4 cosine schedule warmup",
         "conclusion": "stable learning rate for the 1B model", "finished_at": "2026-11-01T00:00:00Z"},
        {"id": "r4", "name": "lr-1e-3-1b", "status": "failed", "notes": "lr=1e-3",
         "conclusion": "diverges at step 2k", "finished_at": "2024-11-01T00:00:00Z"},
        {"id": "r5", "name": "model-save", "notes": "saves the model and the loss every step",
         "conclusion": "checkpointing of the model works", "finished_at": "2026-11-25T00:00:00Z"},
    ]
    raw += [{"id": f"f{i}", "name": f"filler-{i}", "notes": "model loss step model loss",
             "conclusion": f"unrelated run number {i}", "finished_at": "2026-11-20T00:00:00Z"} for i in range(8)]
    return LiveIndex([parse_record(r) for r in raw])


def query(text: str) -> RetrievalQuery:
    return RetrievalQuery(text=text, now=NOW, limit=None)


def ids(related) -> list[str]:
    return [s.record.id for s, _ in related.shown(20)]


def test_a_record_with_the_same_setting_comes_first_labelled_then_the_other_arms():
    idx = index()
    hints = Hints(settings=(("rope_theta", "1000000.0", "1e6"),))
    related = find_related(idx, query("rope theta"), (), min_score=0.5, limit=None, hints=hints)
    assert ids(related)[:2] == ["r1", "r2"]
    labels = dict(related.labels)
    assert labels["r1"] == "same setting: rope_theta = 1000000"
    assert labels["r2"].startswith("same knob: rope_theta = 10000")
    plain = find_related(idx, query("rope theta"), (), min_score=0.5, limit=None, hints=hints,
                         levers=replace(ALL_ON, knob=False))
    assert "same setting" not in " ".join(label for _, label in plain.labels)


def test_siblings_follow_the_top_record_even_below_the_gate():
    idx = index()
    on = find_related(idx, query("stable learning rate cosine warmup"), (), min_score=0.5, limit=None)
    assert ids(on)[:2] == ["r3", "r4"] and dict(on.labels)["r4"] == "sibling of r3"
    off = find_related(idx, query("stable learning rate cosine warmup"), (), min_score=0.5, limit=None,
                       levers=replace(ALL_ON, siblings=False))
    assert "r4" not in ids(off)


def test_name_stems_drop_settings():
    assert name_stem("lr-3e-4-1b") == name_stem("lr-1e-3-1b") == "lr"
    assert name_stem("rope-theta-1m-4k-ctx-seed2") == "rope-theta-ctx"
    assert name_stem("no-qk-norm-lr-6e-4") == name_stem("qk-norm-lr-6e-4")


def test_a_count_written_in_words_is_a_setting_of_the_name():
    assert name_stem("four-extra-tokens") == name_stem("sixteen-extra-tokens") == "extra-tokens"
    assert name_stem("eight-small-views") == name_stem("ten-small-views") == "small-views"
    assert name_stem("single-critic") == "single-critic"  # a kind, not a count


def test_the_strength_gate_keeps_common_word_matches_out_of_what_is_shown_unasked():
    idx = index()
    weak = query("model loss step save")
    shown = find_related(idx, weak, (), min_score=0.3, limit=None, unasked=True, levers=replace(ALL_ON, siblings=False))
    asked = find_related(idx, weak, (), min_score=0.3, limit=None, levers=replace(ALL_ON, siblings=False))
    assert "r5" in ids(asked) and not any(i.startswith("f") for i in ids(shown))
    lever_off = find_related(idx, weak, (), min_score=0.3, limit=None, unasked=True, levers=OFF)
    assert ids(lever_off) == ids(find_related(idx, weak, (), min_score=0.3, limit=None, levers=OFF))
    strong = find_related(idx, query("rope theta helps"), (), min_score=0.3, limit=None,
                          unasked=True, levers=replace(ALL_ON, siblings=False))
    assert ids(strong) == ["r1"]  # r2 matches only "rope theta", two words two records hold: too weak


def test_the_cursor_line_moves_its_matches_up():
    idx = index()
    ranked = idx.rank(query("rope theta lr stable"), relevant_only=True)
    assert [s.record.id for s in ranked[:2]] == ["r3", "r1"]
    moved = focus_order(ranked, ("rope", "theta"))  # the hover is on the rope_theta line
    assert [s.record.id for s in moved[:3]] == ["r1", "r2", "r3"]
    assert focus_order(ranked, ()) == list(ranked)


def sweep_index():
    """A two-year-old dead end and last week's run that match a query alike, a run about another
    knob that mentions lr=3e-4 in passing, and an lr sweep."""
    raw = [
        {"id": "old", "name": "rope-base-500k", "status": "failed", "finished_at": "2024-12-01T00:00:00Z",
         "conclusion": "a rotary base of 500k hurts short context"},
        {"id": "new", "name": "rope-base-1m", "finished_at": "2026-11-28T00:00:00Z",
         "conclusion": "a rotary base of 1m helps long context", "notes": "long documents"},
        {"id": "post-ln", "name": "post-ln-24-layers", "status": "failed", "finished_at": "2025-01-01T00:00:00Z",
         "notes": "norm after the residual add, lr=3e-4 warmup", "conclusion": "post-LN diverges at lr 3e-4"},
        {"id": "lr-base", "name": "lr-3e-4-1b", "notes": "lr=3e-4", "finished_at": "2025-02-01T00:00:00Z",
         "conclusion": "baseline peak lr"},
        {"id": "lr-high", "name": "lr-1e-3-1b", "status": "failed", "notes": "lr=1e-3",
         "finished_at": "2025-02-02T00:00:00Z", "conclusion": "peak lr diverges"},
    ]
    return with_fillers(raw)


def with_fillers(raw: list[dict]) -> LiveIndex:
    """An index of these records and eight recent unrelated runs (so that idf tells words apart)."""
    raw = raw + [{"id": f"f{i}", "name": f"filler-{i}", "conclusion": f"unrelated run number {i}",
                  "finished_at": "2026-11-20T00:00:00Z"} for i in range(8)]
    return LiveIndex([parse_record(r) for r in raw])


def test_a_dead_end_hardly_ages_in_the_gate_and_the_order():
    idx = sweep_index()
    rotary = query("rotary base context")
    on = find_related(idx, rotary, (), min_score=0.8, limit=None, levers=replace(ALL_ON, siblings=False))
    assert ids(on)[:2] == ["new", "old"]  # most recency given back: the dead end passes the gate, right behind
    off = find_related(idx, rotary, (), min_score=0.8, limit=None,
                       levers=replace(ALL_ON, siblings=False, dead_ends=False))
    assert ids(off) == ["new"]


def test_the_runs_about_a_knob_come_before_a_passing_mention_each_with_its_sweep():
    idx = sweep_index()
    hints = Hints(settings=(("lr", "0.0003", "3e-4"),))
    related = find_related(idx, query("lr warmup norm"), (), min_score=0.3, limit=None, hints=hints)
    assert ids(related)[:3] == ["lr-base", "lr-high", "post-ln"]
    labels = dict(related.labels)
    assert labels["lr-base"] == "same setting: lr = 3e-4" and labels["post-ln"] == "same setting: lr = 3e-4"
    assert labels["lr-high"].startswith("same knob: lr = 1e-3")


def test_a_run_named_after_the_value_it_set_is_about_that_knob():
    raw = [{"id": "w128", "name": "width-128", "status": "regressed", "notes": "model_channels=128; arm of the width sweep",
            "finished_at": "2025-02-01T00:00:00Z", "conclusion": "base width 128 is 2 FID behind"},
           {"id": "drop", "name": "dropout-0.3", "notes": "dropout=0.3, model_channels=128 as in width-128",
            "finished_at": "2025-02-01T00:00:00Z", "conclusion": "dropout 0.3 underfits"}]
    hints = Hints(settings=(("model_channels", "192.0", "192"),))
    related = find_related(with_fillers(raw), query("dropout underfits"), (), min_score=0.3, limit=None,
                           hints=hints, levers=replace(ALL_ON, siblings=False))
    assert ids(related)[0] == "w128"  # its name holds the 128 it set; the dropout run only mentions it
    assert dict(related.labels)["w128"] == "same knob: model_channels = 128 (here 192)"
    assert "drop" not in dict(related.labels)


def test_the_knob_under_the_cursor_brings_the_runs_that_set_it():
    raw = [{"id": "w3", "name": "cfg-w-3", "notes": "guidance_scale=3.0; arm of the guidance sweep",
            "finished_at": "2025-11-01T00:00:00Z", "conclusion": "weight 3 gives the sharpest samples"},
           {"id": "w5", "name": "cfg-w-5", "status": "regressed", "notes": "guidance_scale=5.0",
            "finished_at": "2025-11-01T00:00:00Z", "conclusion": "weight 5 oversaturates"},
           {"id": "drop", "name": "label-drop-0.1", "notes": "cond_drop_prob=0.1, guidance_scale=3.0",
            "finished_at": "2025-10-01T00:00:00Z", "conclusion": "the unconditional branch at 10% of the batch"},
           {"id": "other", "name": "uncond-branch-width", "finished_at": "2026-10-01T00:00:00Z",
            "conclusion": "a narrower unconditional branch for guidance sampling", "notes": "uncond cond guidance"}]
    ask = query("uncond cond guidance scale")
    pointed = find_related(with_fillers(raw), ask, (), min_score=0.3, limit=None,
                           hints=Hints(knob="guidance_scale"), levers=replace(ALL_ON, siblings=False))
    assert ids(pointed)[:2] == ["w3", "w5"]  # named after the values they set; the label-drop run only mentions one
    assert dict(pointed.labels)["w5"] == "sets guidance_scale = 5.0" and "drop" not in dict(pointed.labels)
    off = find_related(with_fillers(raw), ask, (), min_score=0.3, limit=None, hints=Hints(knob="guidance_scale"),
                       levers=replace(ALL_ON, siblings=False, knob=False))
    assert ids(off)[0] == "other"


def test_on_a_line_setting_several_knobs_the_one_under_the_cursor_is_asked():
    raw = [{"id": "fw15", "name": "specaug-freq-width-15", "status": "regressed", "notes": "freq_width=15, freq_masks=2.",
            "finished_at": "2025-04-01T00:00:00Z", "conclusion": "narrower frequency masks"},
           {"id": "tm10", "name": "specaug-time-masks-10", "notes": "time_masks=10; control of the time-masking sweep",
            "finished_at": "2025-04-01T00:00:00Z", "conclusion": "10 masked spans is the best arm"},
           {"id": "tm5", "name": "specaug-time-masks-5", "status": "regressed", "notes": "time_masks=5",
            "finished_at": "2025-04-01T00:00:00Z", "conclusion": "5 masked spans overfit"}]
    line = (("freq_masks", "2.0", "2"), ("freq_width", "27.0", "27"), ("time_masks", "10.0", "10"))
    ask = query("freq masks width time masks")
    idx = with_fillers(raw)
    on_time = find_related(idx, ask, (), min_score=0.3, limit=None, hints=Hints(settings=line, knob="time_masks"),
                           levers=replace(ALL_ON, siblings=False))
    assert ids(on_time)[:2] == ["tm10", "tm5"] and "fw15" not in dict(on_time.labels)
    on_freq = find_related(idx, ask, (), min_score=0.3, limit=None, hints=Hints(settings=line, knob="freq_width"),
                           levers=replace(ALL_ON, siblings=False))
    assert ids(on_freq)[0] == "fw15" and set(dict(on_freq.labels)) == {"fw15"}
    elsewhere = find_related(idx, ask, (), min_score=0.3, limit=None, hints=Hints(settings=line, knob="def"),
                             levers=replace(ALL_ON, siblings=False))
    assert ids(elsewhere)[0] == "fw15"  # (no knob under the cursor: the whole line, same value first)


def test_the_runs_named_after_the_knob_alone_come_before_those_that_qualify_it():
    raw = [{"id": "bb4", "name": "backbone-lr-1e-4", "status": "failed", "notes": "lr_backbone=1e-4, lr=1e-4",
            "finished_at": "2024-12-01T00:00:00Z", "conclusion": "the CNN at the transformer's rate forgot its features"},
           {"id": "bb5", "name": "backbone-lr-1e-5", "notes": "lr_backbone=1e-5; control of the backbone lr sweep",
            "finished_at": "2025-01-01T00:00:00Z", "conclusion": "ten times lower for the CNN is best"},
           {"id": "lr2", "name": "lr-2e-4", "status": "failed", "notes": "lr=2e-4",
            "finished_at": "2025-01-01T00:00:00Z", "conclusion": "loss spikes, diverged"}]
    hints = Hints(settings=(("lr", "0.0001", "1e-4"),), knob="lr")
    related = find_related(with_fillers(raw), query("lr"), (), min_score=0.3, limit=None, hints=hints)
    assert ids(related)[:3] == ["lr2", "bb4", "bb5"]  # the lr sweep's arm, then the backbone-lr run and its sibling
    assert dict(related.labels)["lr2"].startswith("same knob: lr = 2e-4")
    assert names_only(parse_record(raw[2]), ["lr"]) and not names_only(parse_record(raw[0]), ["lr"])
    assert names_only(parse_record({"id": "w", "name": "warmup-2000"}), ["warmup_steps"])


def test_the_word_under_the_cursor_is_evidence_enough_when_asked_not_in_a_hover():
    idx = index()
    ask = query("checkpointing banana")  # only r5 holds "checkpointing": one matched term
    assert ids(find_related(idx, ask, (), min_score=0.3, limit=None)) == []
    pointed = Hints(word=("checkpointing",))
    assert ids(find_related(idx, ask, (), min_score=0.3, limit=None, hints=pointed)) == ["r5"]
    assert ids(find_related(idx, ask, (), min_score=0.3, limit=None, hints=pointed, unasked=True)) == []
    assert ids(find_related(idx, ask, (), min_score=0.3, limit=None, hints=pointed,
                            levers=replace(ALL_ON, cursor=False))) == []


def test_the_word_under_the_cursor_weighs_on_top_of_its_line():
    idx = index()
    ranked = idx.rank(query("rope theta lr stable"), relevant_only=True)
    line = ("rope", "lr")  # the line names both; r3 (lr) scores above r1 (rope)
    assert [s.record.id for s in focus_order(ranked, line)[:2]] == ["r3", "r1"]
    assert [s.record.id for s in focus_order(ranked, line, word=("rope",))[:3]] == ["r1", "r2", "r3"]


def test_a_record_naming_the_lines_idea_in_other_words_matches_the_line():
    idx = index()
    ranked = idx.rank(query("freqs cis rope lr stable"), relevant_only=True)
    line = ("freqs", "cis")  # the code's name of the rotary table; the notes say "rope"
    assert ranked[0].record.id == "r3" and focus_order(ranked, line)[0].record.id == "r3"
    rotary = ("rope", "rotary", "freqs", "cis")  # the alias group the line fired
    assert [s.record.id for s in focus_order(ranked, line, aliases=(rotary,))[:2]] == ["r1", "r2"]


def test_the_settings_of_a_text_are_read_once_per_text():
    from soma_lsp.query import line_knobs
    from soma_lsp.server.features.diagnostics import setting_lines

    text = "import torch\nrope_theta: float = 1e6  # base\nlr = 3e-4\nx = y\n"
    found = setting_lines(text)
    assert found == ((1, "rope_theta: float = 1e6  # base", line_knobs("rope_theta: float = 1e6  # base")),
                     (2, "lr = 3e-4", line_knobs("lr = 3e-4")))
    assert setting_lines("".join(text)) is found  # the same text (another string): read once
    assert setting_lines(text.replace("3e-4", "1e-3"))[1][2] == (("lr", "0.001", "1e-3"),)
    assert setting_lines("beta_schedule: linear\n") == ()  # code: a bare word is a name
    assert setting_lines("beta_schedule: linear\n", config=True) == ((0, "beta_schedule: linear",
                                                                        (("beta_schedule", "linear", "linear"),)),)


def named_index():
    raw = [
        {"id": "gelu", "name": "gelu-tanh-approximation", "finished_at": "2025-01-10T00:00:00Z",
         "conclusion": "the tanh approximation of GELU keeps accuracy and is faster"},
        {"id": "mlp", "name": "mlp-dropout-0.1", "status": "regressed", "finished_at": "2026-11-01T00:00:00Z",
         "conclusion": "dropout in the mlp block costs top-1", "notes": "dropout_rate=0.1 in the dense block"},
    ]
    return with_fillers(raw)


def test_a_run_named_after_the_word_under_the_cursor_passes_the_gate_when_asked():
    idx = named_index()
    ask = query("mlp block dense dropout rate gelu")
    pointed = Hints(word=("gelu",))
    assert idx.score(ask, ["gelu"])[0].score < 0.5  # one matched word, a year old: below the gate
    assert ids(find_related(idx, ask, (), min_score=0.5, limit=None, hints=pointed)) == ["mlp", "gelu"]
    assert "gelu" not in ids(find_related(idx, ask, (), min_score=0.5, limit=None, hints=pointed,
                                          levers=replace(ALL_ON, named=False)))
    assert "gelu" not in ids(find_related(idx, ask, (), min_score=0.5, limit=None, hints=pointed, unasked=True))
    on_its_name = Hints(word=("gelu",), on_name=True)  # `def gelu(x):` asked on its name line
    assert "gelu" not in ids(find_related(idx, ask, (), min_score=0.5, limit=None, hints=on_its_name))


def test_names_the_word_asks_for_every_part_of_it():
    record = parse_record({"id": "x", "name": "shared-actor-critic-torso"})
    assert names_the_word(record, ("critic",))
    assert names_the_word(record, ("actor", "critic", "actorcritic"))  # a CamelCase word by its parts
    assert not names_the_word(record, ("critic", "head"))
    assert not names_the_word(record, ())


def test_a_run_naming_the_word_as_one_compound_names_it():
    assert names_the_word(parse_record({"id": "g", "name": "groupnorm-16-groups"}), ("group", "norm", "groupnorm"))
    assert names_the_word(parse_record({"id": "r", "name": "convnext-style-resblocks"}), ("res", "block", "resblock"))
    assert not names_the_word(parse_record({"id": "n", "name": "norm-groups-16"}), ("group", "norm", "groupnorm"))
    assert not names_the_word(parse_record({"id": "b", "name": "blocks-24"}), ("block",))  # one part: its own rule


def test_a_word_with_a_one_letter_part_names_no_run():
    """`z_loss` is not "loss", `c_attn` not "attn": what is left of such a word is not the word
    (docs/spec.md §3.5: parts of two letters or more), so it names no run."""
    assert names_the_word(parse_record({"id": "x", "name": "qk-norm-1b"}), ("qk", "norm"))
    assert not names_the_word(parse_record({"id": "y", "name": "fp16-loss-scaling"}), ("z", "loss"))
    assert not names_the_word(parse_record({"id": "z", "name": "parallel-attn-mlp"}), ("c", "attn"))


def test_an_old_dead_end_gets_back_almost_all_its_recency_a_run_a_share():
    idx = index()
    dead = idx.score(query("lr diverges"), ["r4"])[0]  # failed two years before NOW
    lost = dead.components.weights["recency"] * (1 - dead.components.recency)
    assert dead.dead_end and lost > 0.1
    assert lift(dead, dead_ends=True) == pytest.approx(DEAD_END_SHARE * lost)
    assert lift(dead, dead_ends=False) == 0.0 and OLD_RUN_SHARE < DEAD_END_SHARE < 1.0


def test_an_old_run_gets_back_a_share_of_its_recency_in_the_gate():
    idx = index()
    ask = query("rope theta base context")
    old = idx.score(ask, ["r2"])[0]  # succeeded a year before NOW: no dead end
    assert not old.dead_end and lift(old, old_runs=False) == 0.0
    back = lift(old, old_runs=True)
    assert back == pytest.approx(OLD_RUN_SHARE * old.components.weights["recency"] * (1 - old.components.recency))
    gate, alone = old.score + back / 2, replace(ALL_ON, siblings=False)  # (r2 is also r1's sibling)
    assert "r2" in ids(find_related(idx, ask, (), min_score=gate, limit=None, levers=alone))
    assert "r2" not in ids(find_related(idx, ask, (), min_score=gate, limit=None,
                                        levers=replace(alone, old_runs=False)))


def test_a_word_the_pool_spells_otherwise_is_asked_in_its_spelling():
    idx = LiveIndex([parse_record(r) for r in [
        {"id": "gain", "name": "policy-output-gain-1", "status": "failed", "finished_at": "2025-01-22T00:00:00Z",
         "conclusion": "a policy output layer initialised with gain 1 stalls learning"},
        {"id": "dense", "name": "dense-kernel-init", "finished_at": "2026-11-01T00:00:00Z",
         "conclusion": "dense kernel init sweep", "notes": "kernel=orthogonal"},
    ]])
    ask = query("mean head dense kernel initializer orthogonal")
    expanded = with_forms(idx, ask, ("kernel", "initializer", "dense"))
    assert expanded.text.split()[-1:] == ["initialised"]  # `kernel`, `dense`: the pool holds them as written
    assert with_forms(idx, ask, ("kernel",)) == ask
    near = Hints(focus=("kernel", "initializer"))
    on = find_related(idx, ask, (), min_score=0.0, limit=None, hints=near, min_terms=1)
    off = find_related(idx, ask, (), min_score=0.0, limit=None, hints=near, min_terms=1,
                       levers=replace(ALL_ON, forms=False))
    assert "gain" in ids(on) and "gain" not in ids(off)


def test_a_run_that_set_the_lines_flag_to_the_other_boolean_is_its_other_arm():
    """`bf16: bool = True`: the fp16 dead end set `bf16=false` and is named after fp16 — lever `knob`
    puts it in the tier with the runs named after the flag; a number's other value needs the name."""
    idx = LiveIndex([parse_record(r) for r in [
        {"id": "fp16", "name": "fp16-with-loss-scaling", "status": "failed", "finished_at": "2025-01-01T00:00:00Z",
         "conclusion": "half precision overflowed", "notes": "bf16=false, fp16=true"},
        {"id": "angles", "name": "bug-angles-in-bf16", "status": "failed", "finished_at": "2026-11-01T00:00:00Z",
         "conclusion": "the rotary angles in bf16 lost precision", "notes": "bf16 angles"},
        {"id": "lr", "name": "warmup-short", "finished_at": "2026-11-20T00:00:00Z",
         "conclusion": "bf16 run with a short warmup", "notes": "lr=1e-4"},
    ]])
    ask = query("bf16")
    flag = Hints(settings=(("bf16", "true", "True"),), focus=("bf16",), word=("bf16",), knob="bf16")
    related = find_related(idx, ask, (), min_score=0.0, limit=None, hints=flag, min_terms=1)
    assert ids(related)[0] == "fp16" and dict(related.labels)["fp16"].startswith("same knob: bf16 = false")
    assert ids(find_related(idx, ask, (), min_score=0.0, limit=None, hints=flag, min_terms=1,
                            levers=replace(ALL_ON, knob=False)))[0] == "angles"
    number = Hints(settings=(("lr", "0.001", "1e-3"),), focus=("lr",), word=("lr",), knob="lr")
    assert "lr" not in dict(find_related(idx, query("lr"), (), min_score=0.0, limit=None, hints=number,
                                         min_terms=1).labels)


def test_on_a_functions_name_line_the_runs_about_the_settings_it_reads_move_up():
    """`def make_lora_config(args)` reads `args.lora_r`: the rank sweep's runs move up by `READ_BONUS`
    (lever `knob`), ahead of a run that only shares the signature's words — a bonus, not a tier."""
    idx = LiveIndex([parse_record(r) for r in [
        {"id": "scale", "name": "rank-stabilised-lora-scale", "finished_at": "2026-11-20T00:00:00Z",
         "conclusion": "lora config with the rank-stabilised scale", "notes": "use_rslora=true"},
        {"id": "r16", "name": "lora-r-16", "finished_at": "2026-06-01T00:00:00Z",
         "conclusion": "adapter rank 16 for the lora config", "notes": "lora_r=16"},
        {"id": "far", "name": "lora-r-4", "finished_at": "2025-01-01T00:00:00Z",
         "conclusion": "adapter rank 4", "notes": "lora_r=4"},
    ]])
    ask = query("make lora config rank")
    line = Hints(focus=("make", "lora", "config"), word=("make", "lora", "config"), body_reads=("lora_r",))
    on = ids(find_related(idx, ask, (), min_score=0.0, limit=None, hints=line, min_terms=1))
    off = ids(find_related(idx, ask, (), min_score=0.0, limit=None, hints=line, min_terms=1,
                           levers=replace(ALL_ON, knob=False)))
    assert off[0] == "scale" and on[0] == "r16"
    assert on.index("far") > on.index("r16")  # each keeps its own standing: no tier


def test_another_form_of_the_word_under_the_cursor_matches_it_in_the_words_bonus():
    """`IGNORE_INDEX` under the cursor: the pool says "ignored", never "ignore" — a record saying so
    matches the word (lever `forms`); a word the pool holds as written, or a short one, keeps its spelling."""
    idx = LiveIndex([parse_record(r) for r in [
        {"id": "prompt", "name": "answers-only-loss", "finished_at": "2026-11-01T00:00:00Z",
         "conclusion": "question tokens ignored in the loss"},
        {"id": "vocab", "name": "vocab-index-check", "finished_at": "2025-06-01T00:00:00Z",
         "conclusion": "the loss checks every index of the vocabulary"},
        {"id": "other", "name": "make-schedule", "finished_at": "2026-11-20T00:00:00Z",
         "conclusion": "makes the schedule"},
    ]])
    assert word_spellings(idx, ("ignore", "index")) == {"ignor": "ignore"}
    assert word_spellings(idx, ("make", "loss")) == {}  # `make` is short, `loss` is held as written
    ask = query("loss ignore index ignored")
    near = Hints(focus=("loss", "ignore", "index"), word=("ignore", "index"))
    on = find_related(idx, ask, (), min_score=0.0, limit=None, hints=near, min_terms=1)
    off = find_related(idx, ask, (), min_score=0.0, limit=None, hints=near, min_terms=1,
                       levers=replace(ALL_ON, forms=False))
    assert ids(off)[0] == "vocab" and ids(on)[0] == "prompt"


def test_shared_components_move_a_run_up_in_the_order():
    """The core leaves structural out for a run without an architecture, so a run naming the parts this
    code builds scored below one naming none; lever `components` orders it first."""
    idx = LiveIndex([parse_record(r) for r in [
        {"id": "post-norm", "name": "post-norm-vit", "status": "failed", "finished_at": "2026-11-01T00:00:00Z",
         "conclusion": "norm after the mlp residual diverges",
         "architecture": ["LayerNorm", "MultiHeadDotProductAttention"]},
        {"id": "dropout", "name": "mlp-dropout", "status": "failed", "finished_at": "2026-11-01T00:00:00Z",
         "conclusion": "dropout in the mlp costs top-1"},
    ]])
    ask = RetrievalQuery(text="encoder block mlp dropout norm", now=NOW, limit=None,
                         architecture={"LayerNorm": 2, "MultiHeadDotProductAttention": 1, "Dense": 2})
    shared = idx.score(ask, ["post-norm"])[0]
    assert 0 < shared.components.structural < 1 and shared.score < idx.score(ask, ["dropout"])[0].score
    assert ids(find_related(idx, ask, (), min_score=0.0, limit=None, min_terms=1)) == ["post-norm", "dropout"]
    assert ids(find_related(idx, ask, (), min_score=0.0, limit=None, min_terms=1,
                            levers=replace(ALL_ON, components=False))) == ["dropout", "post-norm"]


def tie_index():
    raw = [("gqa4", "gqa-4-kv-heads", "grouped query attention with 4 kv heads shrinks the cache"),
           ("gqa8", "gqa-8-kv-heads", "8 kv heads: no better than 4"),
           ("qk", "qk-norm-lr-6e-4", "qk norm on queries and keys removes the loss spikes"),
           ("noqk", "no-qk-norm-lr-6e-4", "without qk norm lr 6e-4 diverges")]
    return LiveIndex([parse_record({"id": i, "name": n, "conclusion": c, "finished_at": f"2026-{month}-01T00:00:00Z"})
                      for (i, n, c), month in zip(raw, ("11", "11", "11", "06"))])


def test_a_tie_off_the_cursors_line_comes_after_the_top_record_and_its_siblings_after_its():
    idx = tie_index()
    ask = query("attention heads kv qk norm")
    tied = [Tied(idx.get("gqa4"))]
    line = Hints(focus=("qk", "norm", "head"), word=("qk", "norm"), in_body=True)
    on = find_related(idx, ask, tied, min_score=0.0, limit=None, hints=line)
    assert [(s.record.id, t) for s, t in on.shown()] == [("qk", False), ("gqa4", True), ("noqk", False), ("gqa8", False)]
    assert on.shown(2) == on.shown()[:2] and on.more(2) == 2 and on.total == 4
    off = find_related(idx, ask, tied, min_score=0.0, limit=None, hints=line, levers=replace(ALL_ON, tie_focus=False))
    assert [(s.record.id, t) for s, t in off.shown()] == [("gqa4", True), ("qk", False), ("gqa8", False), ("noqk", False)]
    on_its_line = Hints(focus=("kv", "heads"), word=("kv",), in_body=True)  # the tie bears on the line: first
    assert ids(find_related(idx, ask, tied, min_score=0.0, limit=None, hints=on_its_line))[:3] == ["gqa4", "gqa8", "qk"]
    name_line = replace(line, in_body=False)  # on the definition's own name line every tie to it is asked
    assert ids(find_related(idx, ask, tied, min_score=0.0, limit=None, hints=name_line))[:2] == ["gqa4", "qk"]
    lens = find_related(idx, ask, tied, min_score=0.0, limit=None)  # no cursor line (a lens): ties first
    assert ids(lens)[0] == "gqa4" and lens.late == ()


def test_an_alias_of_a_word_on_the_line_keeps_a_tie_first():
    idx = tie_index()
    tied = idx.score(query("attention heads kv qk norm grouped query"), ["gqa4"])
    assert off_the_line(tied, Hints(focus=("gqa",), in_body=True).near) == tied
    assert off_the_line(tied, Hints(focus=("gqa",), aliases=(("gqa", "grouped", "query"),), in_body=True).near) == []


def test_off_the_line_needs_a_cursor():
    idx = tie_index()
    tied = idx.score(query("attention heads kv qk norm"), ["gqa4", "qk"])
    assert off_the_line(tied, ()) == []
    assert [s.record.id for s in off_the_line(tied, ("norm",))] == ["gqa4"]


def test_the_runs_about_a_setting_the_line_reads_come_after_the_top_record():
    raw = [{"id": "pf2", "name": "policy-frequency-2", "notes": "policy_frequency=2; arm of the delayed policy sweep",
            "finished_at": "2025-01-27T00:00:00Z", "conclusion": "every second step, steadier"},
           {"id": "pf4", "name": "policy-frequency-4", "status": "regressed", "notes": "policy_frequency=4",
            "finished_at": "2025-01-28T00:00:00Z", "conclusion": "too slow an actor"},
           {"id": "jit", "name": "jit-update-static", "notes": "update actor now static policy_frequency=2",
            "finished_at": "2026-10-01T00:00:00Z", "conclusion": "update actor now as a static argument of the jit"},
           {"id": "jit2", "name": "jit-update-static-seed2", "notes": "re-run of jit-update-static",
            "finished_at": "2026-10-02T00:00:00Z", "conclusion": "same speed-up"}]
    ask = query("update actor now global step policy frequency")
    hints = Hints(focus=("update", "actor", "now"), reads=("policy_frequency",))
    related = find_related(with_fillers(raw), ask, (), min_score=0.3, limit=None, hints=hints)
    # the top record keeps its place (a run mentioning the setting in passing is no run about it), the
    # runs about the knob the line reads follow it, then the top record's siblings (try 122)
    assert ids(related)[:4] == ["jit", "pf2", "pf4", "jit2"]
    assert dict(related.labels)["pf2"] == "sets policy_frequency = 2" and "jit" not in dict(related.labels)
    off = find_related(with_fillers(raw), ask, (), min_score=0.3, limit=None, hints=hints,
                       levers=replace(ALL_ON, knob=False))
    assert "pf2" not in dict(off.labels)


def hub_index():
    raw = [
        {"id": "hub", "name": "compile-whole-model", "status": "failed",
         "conclusion": "compiling the whole student teacher module recompiles every step",
         "finished_at": "2026-11-20T00:00:00Z"},
        {"id": "fused", "name": "fused-teacher-average", "notes": "foreach kernels",
         "conclusion": "a multi-tensor teacher average", "finished_at": "2026-02-01T00:00:00Z"},
        {"id": "sharp", "name": "teacher-sharpness-0.07", "notes": "teacher temp 0.07",
         "conclusion": "sharper teacher targets after the update", "finished_at": "2026-10-01T00:00:00Z"},
    ]
    raw += [{"id": f"f{i}", "name": f"filler-{i}", "notes": f"unrelated words number {i}",
             "conclusion": "nothing here", "finished_at": "2026-11-20T00:00:00Z"} for i in range(6)]
    return LiveIndex([parse_record(r) for r in raw])


#: The terms of a file's other definitions: each speaks of the student, the teacher and the module.
FILE = (frozenset({"student", "teacher", "module", "forward", "whole", "step"}),
        frozenset({"student", "teacher", "module", "loss", "compiling"}),
        frozenset({"student", "teacher", "module", "crops"}),
        frozenset({"student", "teacher", "module", "update", "temp", "softmax"}))


def test_a_record_about_the_whole_file_is_weighed_down_for_one_of_its_scopes():
    from soma_lsp.server.evidence import hub_shares

    idx = hub_index()
    text = "update teacher student module foreach average"
    ranked = idx.rank(query(text), relevant_only=True)
    shares = hub_shares(idx, ranked, text.split(), FILE)
    assert shares["hub"] == 1.0  # its words here (student, teacher, module) are in every other definition
    assert shares["fused"] == 0.0  # its words are this scope's: the foreach average
    assert shares["sharp"] == 0.25  # its `teacher` and `update` are in one other definition
    assert "hub" not in hub_shares(idx, ranked, text.split(), FILE, exempt=("module",))  # it matches the word
    assert hub_shares(idx, ranked, text.split(), ()) == {}  # a file of one or two definitions: no file to tell
    hints = Hints(others=FILE)
    before = ids(find_related(idx, query(text), (), min_score=0.0, limit=None, levers=replace(ALL_ON, hubs=False),
                              hints=hints))
    after = ids(find_related(idx, query(text), (), min_score=0.0, limit=None, hints=hints))
    assert before.index("hub") < before.index("fused") and after.index("fused") < after.index("hub")


STRENGTH_IN_A_CHILD = """
from soma_lsp.records import parse_record
from soma_lsp.retrieval.model import ScoreComponents, ScoredRecord
from soma_lsp.server.evidence import strength
terms = ("rope", "theta", "warmup", "cosine", "decay", "clip", "norm")
idf = dict(zip(terms, (1e16, 1.0, 1.0, 1.0, 1.0, 3.0, 0.5)))
record = parse_record({"id": "exp-1", "name": "x"})
scored = ScoredRecord(record, 1.0, ScoreComponents(1.0, None, None, 0.0, {}, matched_terms=terms))
print(repr(strength(scored, idf)))
"""


def test_a_matchs_strength_does_not_depend_on_the_order_a_set_gives_its_terms():
    """Summed in a set's order, floats round by that order, which `PYTHONHASHSEED` picks: a near-tie for
    third place flipped one probe of the judged set between runs (docs/benchmarks.md § Quality, tries 173 and 179).
    The idf values here make the rounding show; every process must print the exactly rounded sum."""
    import subprocess
    import sys

    printed = {subprocess.run([sys.executable, "-c", STRENGTH_IN_A_CHILD], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout.strip() for seed in range(8)}
    assert printed == {repr(math.fsum((1e16, 1.0, 1.0, 1.0, 1.0, 3.0, 0.5)))}


def test_an_asked_list_reads_the_gate_lower_and_a_lens_does_not_show_for_what_it_reached(monkeypatch):
    """Lever `reach` (docs/spec.md §3.5): find-related on a document reads `hover.minScore` less
    `REACH`, so an old run matching five words of the scope at a standing of 0.47 is listed; a hover
    does not read lower, nor does a lens show for such a record alone."""
    idx = with_fillers([
        {"id": "crops", "name": "dino-global-crops-scale", "finished_at": "2026-11-10T00:00:00Z",
         "conclusion": "global crops between 0.32 and 1 of the image", "notes": "global_crops_scale=0.32"},
        {"id": "local", "name": "eight-small-views", "finished_at": "2024-06-01T00:00:00Z",
         "conclusion": "eight small views per image besides the two large ones",
         "notes": "local_crops_number=8 at size 98"},
    ])
    ask = query("data augmentation dino global crops scale local crops number size image")
    local = idx.score(ask, ["local"])[0]
    assert 0.5 - REACH <= standing(local, True, True) < 0.5 and len(local.components.matched_terms) == 5
    asked = find_related(idx, ask, (), min_score=0.5, limit=None, reach=reach_below(ALL_ON))
    assert ids(asked) == ["crops", "local"] and asked.reached == {"local"}
    assert ids(find_related(idx, ask, (), min_score=0.5, limit=None, reach=reach_below(replace(ALL_ON, reach=False)))) \
        == ["crops"]
    assert ids(find_related(idx, ask, (), min_score=0.5, limit=None, unasked=True)) == ["crops"]  # a hover
    alone = Related(tied=(), ranked=(local,), total=1, capped=False)
    assert worth_a_lens(idx, alone, levers=ALL_ON, hints=Hints())  # five rare words: strong, were it at the gate
    assert not worth_a_lens(idx, replace(alone, reached=frozenset({"local"})), levers=ALL_ON, hints=Hints())
    monkeypatch.setattr(evidence, "strong", lambda *args, **kwargs: False)  # within reach, but its words weak:
    assert ids(find_related(idx, ask, (), min_score=0.5, limit=None, reach=reach_below(ALL_ON))) == ["crops"]  # no
