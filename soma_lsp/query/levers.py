"""The retrieval-quality levers (issue 20): each one a switch, on by default when kept.

One typed place says which are on: `Levers`, read by the server from its settings (`soma.levers`,
`{"noise": false}` switches one off) and handed to the query builder and to the server's gate and
ordering (`soma_lsp.server.related`). A lever never changes the core's ranking (docs/spec.md §2): it changes
what is asked, which ranked records an editor surface shows, and in what order. Each lever's effect
on the judged set is in docs/benchmarks.md § Quality, with the levers tried and dropped (a
`noise` list of ML-generic words left out of queries hurt the held-out probes; see there).

* `strength` — the relevance gate of what is shown unasked (hover, lenses) also asks for absolute
  match strength: the idf of the matched terms (one idea's aliases once) must add up to
  `evidence.MIN_STRENGTH`, since lexical is normalised to 1 for the best match however weak it is.
* `cursor` — the terms of the cursor's own line reorder a large scope's ranking: a record that
  matches the line the hover is on comes before one that only matches the rest of the function
  (or of the whole file, as find-related asks in a config file, which has no definitions);
  and in find-related a record matching the word under the cursor passes the gate's evidence rule
  with that one term (the word the user points at is no coincidence). On a class's name line, the
  settings its `__init__` takes (`n_mels=80, hop_length=160`) are of the line too: what a run changes
  in a class; and on any definition's name line, the words it says of itself (its docstring, the
  comments before its first line of code and right above it): the signature names what it takes,
  its description what it does. A line that opens brackets it does not close (`param_dicts = [`) holds the lines up to
  the one that closes them: one statement.
* `class_bag` — a method's component bag is its class's (`__init__`, `setup`, `build`, `@compact`
  all build the parts `forward`/`__call__`/`call` use), and a class's own name and bases join it.
* `aliases` — the curated ML vocabulary of `vocabulary.ALIASES` (`freqs_cis` ↔ rotary/RoPE,
  `c_attn` ↔ fused QKV, `ent_coef` ↔ entropy bonus…; docs/vocabulary.md), applied to the ideas named
  near the cursor (its line, the word under it); in the cursor line's bonus a record naming the idea
  in other words (`rotary` for `freqs_cis`) matches the line's name of it. Expanding every term of
  the scope lifted the tune probes but cost the held-out third (R@3 0.859 → 0.797); near the cursor
  it helps both, so that is what ships.
* `knob` — a setting on the cursor's line equal to a record's `key=value` (equal as numbers) is
  strong evidence: the runs *about* that knob (its word in their name) come first after the ties,
  labelled "same setting", then the same knob's other values, then runs that mention the same
  setting in passing; and a line setting the value a dead end about the knob ran with gets a
  dead-end warning (docs/spec.md §4.5). A run is about a knob when a distinctive word of it or the
  value it set is in its name (`width-128` for `model_channels=128`); in a config file a bare word is
  a value (`prediction: v`); and the word under the cursor, when its line sets no value for it, is a
  knob too: the runs about it come in the tier (`guidance_scale` in `uncond + guidance_scale * …`).
  On a line setting several knobs (a signature's defaults) the one under the cursor is the one asked;
  on a function's own name, only those sharing a word with it (the function is asked, not its
  defaults: `sample_steps=50` of `ddim_sample_loop`, not `focal_loss=False` of `postprocess`). Runs named after the knob
  alone (`lr-2e-4`) come before runs whose name qualifies it (`backbone-lr-1e-4`); a run that set a flag
  of the line to the other boolean is about it whatever its name (`fp16-with-loss-scaling` with
  `bf16=false`, at `bf16: bool = True`). The settings a line
  reads from a config object (`args.policy_frequency`) or by its key from any mapping
  (`o["base_lr"]`: a config loaded as a dict), or that the `if` it runs under reads
  (`if global_step < args.learning_starts:`), or that it reads through an attribute its class copied
  from one (`self.top_k` after `self.top_k = config.num_experts_per_tok`), bring the runs about them
  after the top ranked record. On a function's own name line, the runs about the settings its body
  reads so move up by `evidence.READ_BONUS` (`make_lora_config(args)` reading `args.lora_r`).
* `siblings` — records of the same experiment as a tier's, a tied or the top record (same name stem
  at another setting — a count written in words is a setting, `four-extra-tokens` ~ `sixteen-extra-tokens`
  —, "re-run of" its name) follow it right after it.
* `dead_ends` — a dead end hardly ages: the gate and the order read a dead end's score with 0.75 of
  the recency it lost given back (`soma_lsp.server.standing.DEAD_END_SHARE`), so a year-old dead
  end that matches as well as last week's run is shown next to it.
* `old_runs` — any other run ages less: the gate and the order give it back a quarter of the
  recency it lost (`standing.OLD_RUN_SHARE`) — the run that set today's value long ago still bears on it.
* `named` — in find-related (asked, not a hover), a run whose name holds the word under the cursor
  (`gelu-tanh-approximation` for `gelu`; `groupnorm-16-groups` for `GroupNorm`, its parts as one
  word) passes the score gate and moves up by `evidence.NAME_BONUS`: teams name a run after what it
  changed. Not for a definition's own name on its name line: there the whole definition is asked, its
  name's terms are the line's already, and a run named after a part of it (`actor-head-init` at `class
  Actor`, `layernorm-in-actor`) is no more about it than its ranking says.
* `forms` — a word near the cursor (its line, the word under it) that no record spells as the code
  does is asked in the pool's spellings of it too (`initializer` → `initialised`, `normalize` →
  `normalisation`; `word_forms`, a handful of English suffixes and -ise/-ize). Expanding every
  word of the scope, or words the pool already holds, moved as many probes down as up. In the bonus
  of the word under the cursor, a record holding such a spelling of one of its terms (longer than a
  root's four letters) matches that term: `ignored` is the `ignore` of `IGNORE_INDEX`.
* `components` — the gated ranking is ordered with a bonus for the components a record shares with
  the scope (`evidence.COMPONENT_BONUS` × its structural term): the core leaves structural out for
  a record without an architecture, so a run naming the very parts this code builds scored below
  one naming none.
* `hubs` — in find-related (asked, not a hover: it reads the terms of every definition of the
  file), a ranked record whose words overlap most of the file's other definitions as much as the
  scope asked (by the summed idf of its words each definition's text holds) is about the file, not
  this scope: the order weighs it down by `evidence.HUB_WEIGHT` × the share of the file's other
  definitions it overlaps so (`evidence.hub_shares`; a short note of the project's own words,
  `module`, `student`, `teacher`, ranked in the top 5 of a fifth of a workspace's probes). A record
  matching the word under the cursor is exempt: it is about what the user points at.
* `tie_focus` — on a line of a definition's body, a tie that matches no term of the cursor's line
  or word (a run tied to the enclosing class, about another part of it) is shown after the top
  ranked record, not before, and its siblings after that record's (`related.late_ties`). On the
  definition's own name line every tie to it is about what is asked, and stays first.
* `reach` — what is asked on a document (find-related, and a lens's count, which is that list's
  length) lets a *strong* ranked record (the strength gate's summed idf of its matched words) through
  when it stands up to `related.REACH` under `hover.minScore`: a record matching several rare words of
  the scope at 0.4–0.5 (an old run, a terse note) still bears on this code, and the user asked. Hovers
  do not reach, and a lens shows only for a tie or a strong record at `hover.minScore`: what is shown
  unasked stays as quiet. The evidence rule stays: a single shared word, however rare, brought in more
  coincidences than must-see records. With `named`, a run named after the word under the cursor passes
  `REACH` lower too, without the strength test (docs/spec.md §3.5).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Levers:
    strength: bool = True
    cursor: bool = True
    class_bag: bool = True
    aliases: bool = True
    knob: bool = True
    siblings: bool = True
    dead_ends: bool = True
    old_runs: bool = True
    named: bool = True
    forms: bool = True
    components: bool = True
    tie_focus: bool = True
    hubs: bool = True
    reach: bool = True

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


#: The shipped default: every kept lever on.
ALL_ON = Levers()

__all__ = ["ALL_ON", "Levers"]
