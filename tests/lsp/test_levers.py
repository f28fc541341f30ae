"""Issue-20 levers through the real server: a hover on a setting names the run that set the same value,
and `soma.levers` switches a lever off."""

from __future__ import annotations

from pathlib import Path

from conftest import Session, small_workspace

CODE = '''from dataclasses import dataclass


@dataclass
class ModelArgs:
    dim: int = 2048
    rope_theta: float = 1_000_000.0
    max_seq_len: int = 4096


def describe_rotary_base(args):
    return f"base {args.rope_theta}"
'''

POOL = '''- id: exp-0117
  name: rope-theta-1m-4k-ctx
  status: succeeded
  finished_at: 2026-10-01T00:00:00Z
  conclusion: a rotary base of 1M keeps 4k-context perplexity flat
  notes: rope_theta=1e6 at seq 4096
- id: exp-0118
  name: rope-theta-10k-4k-ctx
  status: regressed
  finished_at: 2025-06-01T00:00:00Z
  conclusion: the default rotary base degrades past 2k tokens
  notes: rope_theta=10000 at seq 4096
- id: exp-0200
  name: dropout-sweep
  status: succeeded
  finished_at: 2026-11-01T00:00:00Z
  conclusion: attention dropout does not help the 1B model
  notes: dropout=0.1 on attention probabilities
'''


def workspace(tmp_path: Path) -> Path:
    return small_workspace(tmp_path / "knobs", POOL, {"args.py": CODE})


async def hover_on_theta(session: Session) -> str:
    line, col = session.line_of("args.py", "rope_theta")
    hover = await session.hover(session.open("args.py"), line, col + 2)
    return hover.contents.value if hover is not None else ""


async def test_a_hover_on_a_setting_names_the_run_with_the_same_value_first(start_session, preset, tmp_path):
    session = await start_session(preset, workspace=workspace(tmp_path))
    text = await hover_on_theta(session)
    first, second = text.split("\n\n---\n\n")[:2]
    assert "exp-0117" in first and "same setting: rope_theta = 1e6" in first
    assert "exp-0118" in second and "same knob: rope_theta = 10000" in second
    assert "exp-0200" not in text


async def test_the_knob_lever_switched_off_drops_the_label(start_session, preset, tmp_path):
    session = await start_session(preset, workspace=workspace(tmp_path), init_options={"levers": {"knob": False}})
    assert "same setting" not in await hover_on_theta(session)


async def test_a_weak_match_stays_out_of_the_hover_unless_the_strength_lever_is_off(start_session, preset, tmp_path):
    """`describe_rotary_base` shares "rotary" and "base" with two of the three runs: lexical 1 for
    the best, but two words two records hold are no evidence to show unasked."""
    root = workspace(tmp_path)
    line, col = next((n, text.index("describe")) for n, text in enumerate(CODE.splitlines()) if "def describe" in text)
    quiet = await start_session(preset, workspace=root)
    assert await quiet.hover(quiet.open("args.py"), line, col + 1) is None
    loud = await start_session(preset, workspace=root, init_options={"levers": {"strength": False}})
    hover = await loud.hover(loud.open("args.py"), line, col + 1)
    assert hover is not None and "exp-0117" in hover.contents.value
    assert "sibling of exp-0117" in hover.contents.value or "sibling of exp-0118" in hover.contents.value


DEAD_POOL = '''- id: exp-0300
  name: rope-theta-1m-2k-ctx
  status: failed
  finished_at: 2025-01-10T00:00:00Z
  conclusion: a rotary base of 1M at 2k context diverges at step 3k
  notes: rope_theta=1e6 seq 2048
- id: exp-0301
  name: post-ln-24-layers
  status: failed
  finished_at: 2025-02-10T00:00:00Z
  conclusion: post-LN diverges past 12 layers
  notes: lr=3e-4 and rope_theta=1e6, norm after the residual add
'''

CONFIG = '''model:
  dim: 2048
  rope_theta: 1e6
  max_seq_len: 4096
optim:
  lr: 3e-4
'''


async def test_a_line_setting_a_dead_ends_knob_to_its_value_warns_on_that_line(start_session, preset, tmp_path):
    root = workspace(tmp_path)
    (root / ".soma" / "pool" / "dead.yaml").write_text(DEAD_POOL, encoding="utf-8")
    (root / "model.yaml").write_text(CONFIG, encoding="utf-8")
    session = await start_session(preset, workspace=root)

    def knob_warnings(found):
        return [d for d in found if d.source == "soma" and "same setting" in d.message]

    uri = session.open("args.py")
    found = await session.diagnostics(uri, lambda d: bool(knob_warnings(d)))
    [warning] = knob_warnings(found)  # exp-0301 is not about rope_theta (it names it in passing)
    line, col = session.line_of("args.py", "rope_theta: float = 1_000_000.0")
    assert (warning.range.start.line, warning.range.start.character) == (line, col)
    assert warning.range.end.character == col + len("rope_theta: float = 1_000_000.0")
    assert warning.code == "exp-0300" and warning.severity.name == "Warning"
    assert warning.message.startswith("Dead end: rope-theta-1m-2k-ctx (exp-0300, status failed) — a rotary base")
    assert warning.message.endswith("· same setting: rope_theta = 1e6")

    config = session.open("model.yaml", language="yaml")
    found = await session.diagnostics(config, lambda d: bool(knob_warnings(d)))
    assert [(d.range.start.line, d.code) for d in knob_warnings(found)] == [(2, "exp-0300")]  # 1e6 = 1_000_000.0
    assert not knob_warnings(await session.diagnostics(session.open(".soma/pool/dead.yaml", language="yaml")))


async def test_no_knob_warning_with_the_lever_off(start_session, preset, tmp_path):
    root = workspace(tmp_path)
    (root / ".soma" / "pool" / "dead.yaml").write_text(DEAD_POOL, encoding="utf-8")
    session = await start_session(preset, workspace=root, init_options={"levers": {"knob": False}})
    uri = session.open("args.py")
    found = await session.diagnostics(uri)
    assert not [d for d in found if "same setting" in d.message]


OPTIM = '''from dataclasses import dataclass


@dataclass
class AdamWArgs:
    lr: float = 3e-4
    betas: tuple = (0.9, 0.95)
    weight_decay: float = 0.1
'''

BETAS_POOL = '''- id: exp-0400
  name: adamw-betas-095-1b
  status: failed
  finished_at: 2025-03-01T00:00:00Z
  conclusion: beta2 of 0.95 spikes the loss of the 1B model at step 20k
  notes: "betas: [0.9,0.95] lr=3e-4"
- id: exp-0401
  name: adamw-betas-0999-1b
  status: succeeded
  finished_at: 2025-03-02T00:00:00Z
  conclusion: the default beta2 trains the 1B model without spikes
  notes: betas=(0.9, 0.999) lr=3e-4
'''


async def test_a_tuple_setting_matches_a_record_that_wrote_it_as_a_list(start_session, preset, tmp_path):
    """`betas: tuple = (0.9, 0.95)` in code, `betas: [0.9,0.95]` in a run's notes and in a YAML: one
    setting — the hover's first run, and the dead end's warning on each line that sets it."""
    root = small_workspace(tmp_path / "betas", BETAS_POOL, {"optim.py": OPTIM,
                                                           "train.yaml": "optim:\n  betas: [0.9, 0.95]\n  lr: 1e-3\n"})
    session = await start_session(preset, workspace=root)
    uri = session.open("optim.py")
    line, col = session.line_of("optim.py", "betas")
    hover = await session.hover(uri, line, col + 2)
    first, second = hover.contents.value.split("\n\n---\n\n")[:2]
    assert "exp-0400" in first and "same setting: betas = [0.9,0.95]" in first
    assert "exp-0401" in second and "same knob: betas = (0.9, 0.999) (here (0.9, 0.95))" in second

    def warnings(found):
        return [d for d in found if d.source == "soma" and "same setting" in d.message]

    [warning] = warnings(await session.diagnostics(uri, lambda d: bool(warnings(d))))
    assert warning.code == "exp-0400" and warning.message.endswith("· same setting: betas = [0.9,0.95]")
    assert (warning.range.start.character, warning.range.end.character) == (col, col + len("betas: tuple = (0.9, 0.95)"))
    config = session.open("train.yaml", language="yaml")
    assert [(d.range.start.line, d.code) for d in warnings(await session.diagnostics(
        config, lambda d: bool(warnings(d))))] == [(1, "exp-0400")]
