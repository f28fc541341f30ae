"""The retrieval-quality levers (issue 20): each one a switch, all on by default once kept.

One typed place says which are on: `Levers`, read by the server from its settings (`soma.levers`,
`{"noise": false}` switches one off) and handed to the query builder and to the server's gate and
ordering (`soma_lsp.server.related`). A lever never changes the core's ranking (SPEC 2): it changes
what is asked, which ranked records an editor surface shows, and in what order. Each lever's effect
on the judged set is in docs/benchmarks.md § Quality.

* `noise` — identifiers that say nothing about an experiment (`forward`, `logits`, `loss`, `x`,
  `batch`, `size`…, `vocabulary.NOISE_TERMS`) are left out of a code query (the word under the
  cursor is kept).
* `strength` — the relevance gate also asks for absolute match strength: the idf of the matched
  terms must add up to `related.MIN_STRENGTH`, since lexical is normalised to 1 for the best match
  however weak it is.
* `cursor` — the terms of the cursor's own line reorder a large scope's ranking: a record that
  matches the line the hover is on comes before one that only matches the rest of the function.
* `class_bag` — a method's component bag is its class's (`__init__`, `setup`, `build`, `@compact`
  all build the parts `forward`/`__call__`/`call` use), and a class's own name and bases join it.
* `aliases` — the curated ML vocabulary of `vocabulary.ALIASES` (`freqs_cis` ↔ rotary/RoPE…).
* `knob` — a setting on the cursor's line equal to a record's `key=value` (equal as numbers) puts
  that record first after the ties, labelled "same setting"; the same knob at another value follows.
* `siblings` — records of the same experiment as a tied or top record (same name stem, "re-run of"
  its name) follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Levers:
    noise: bool = True
    strength: bool = True
    cursor: bool = True
    class_bag: bool = True
    aliases: bool = True
    knob: bool = True
    siblings: bool = True

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


ALL_ON = Levers()

__all__ = ["ALL_ON", "Levers"]
