"""Vocabulary the identifiers hide (issue 20, lever `aliases`).

`ALIASES` is a small curated table of the names one ML idea goes by (the code says `freqs_cis`,
  the notes say "rotary" or "RoPE"). Each group is a set of phrases; when every term of one phrase is
  in the query, the terms of the other phrases are added. Only ideas whose names share no term are
  listed, and only names specific enough not to fire in unrelated code (`eps` alone is not label
  smoothing; `smoothing` is).
"""

from __future__ import annotations

from ..retrieval import tokenize

ALIASES: tuple[tuple[str, ...], ...] = (
    ("rope", "rotary", "freqs cis", "rotary embedding"),
    ("layernorm", "layer norm", "ln"),
    ("rmsnorm", "rms norm"),
    ("lr", "learning rate"),
    ("bf16", "bfloat16"),
    ("fp16", "float16", "half precision"),
    ("gae", "generalized advantage", "advantage estimation", "lambda weighted estimator"),
    ("vit", "patch embed", "vision transformer"),
    ("label smoothing", "smoothed cross entropy", "smoothing"),
    ("drop path", "droppath", "stochastic depth"),
    ("swiglu", "gated silu", "silu gate"),
    ("gqa", "grouped query", "kv heads"),
    ("mqa", "multi query"),
    ("ema", "exponential moving average"),
    ("grad clip", "clip grad", "gradient clipping", "clip norm"),
    ("kl", "kullback", "divergence"),
    ("randaugment", "rand augment"),
    ("mixup", "cutmix"),
    ("sdpa", "scaled dot product", "flash attention"),
    ("kv cache", "key value cache"),
    ("warmup", "warm up"),
    ("weight decay", "wd", "decoupled decay"),
    ("z loss", "zloss"),
    ("obs norm", "observation normalization", "running mean std"),
    ("pmap", "data parallel"),
)

_GROUPS = tuple(tuple(tuple(tokenize(phrase)) for phrase in group) for group in ALIASES)


def expand(terms: list[str]) -> tuple[list[str], tuple[tuple[str, ...], ...]]:
    """`terms` with the other names of every alias group one of whose phrases they hold, after them;
    and the terms of each group that fired (one idea: the gate counts its strength once)."""
    present = set(terms)
    out = list(terms)
    fired = []
    for group in _GROUPS:
        if any(all(t in present for t in phrase) for phrase in group):
            words = tuple(dict.fromkeys(t for phrase in group for t in phrase if len(t) > 1))
            out.extend(t for t in words if t not in present)
            present.update(words)
            fired.append(words)
    return out, tuple(fired)


__all__ = ["ALIASES", "expand"]
