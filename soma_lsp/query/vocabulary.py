"""Vocabulary the identifiers hide or overstate (issue 20, levers `noise` and `aliases`).

* `NOISE_TERMS` — retrieval terms that code says everywhere and that say nothing about an
  experiment: tensor plumbing (`x`, `out`, `batch`, `size`, `shape`, `dim`), the framework's own
  method names (`forward`, `call`, `setup`, `build`, `apply`), and the words every training run's
  notes share with every model (`loss`, `logits`, `params`, `config`, `model`, `step`). Seen:
  `GPT.forward` matched a failed rope-theta run on "block, logits, loss, size" alone. They are left
  out of a code query; the word under the cursor is never dropped.
* `ALIASES` — a small curated table of the names one ML idea goes by (the code says `freqs_cis`,
  the notes say "rotary" or "RoPE"). Each group is a set of phrases; when every term of one phrase is
  in the query, the terms of the other phrases are added. Only ideas whose names share no term are
  listed, and only names specific enough not to fire in unrelated code (`eps` alone is not label
  smoothing; `smoothing` is).
"""

from __future__ import annotations

from ..retrieval import tokenize

NOISE_TERMS = frozenset("""
    x y z h out outs output outputs inp input inputs batch size sizes shape shapes dim dims
    idx index indices num result results data tmp buf value values item items
    forward call setup build apply init compact module modules model models layer
    loss losses logits logit params param config cfg state states step steps fn func
    torch jax jnp tf keras np nn optax flax linen functional tensor tensors array arrays
    view reshape transpose permute contiguous cat concat stack split chunk zeros ones arange
    mean sum float int device get set update name path new use
""".split())

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


def expand(terms: list[str]) -> list[str]:
    """`terms` with the other names of every alias group one of whose phrases they hold, after them."""
    present = set(terms)
    out = list(terms)
    for group in _GROUPS:
        if any(all(t in present for t in phrase) for phrase in group):
            for phrase in group:
                out.extend(t for t in phrase if t not in present and len(t) > 1)
                present.update(phrase)
    return out


def without_noise(terms: list[str], keep: frozenset[str] = frozenset()) -> list[str]:
    return [t for t in terms if t not in NOISE_TERMS or t in keep]


__all__ = ["ALIASES", "NOISE_TERMS", "expand", "without_noise"]
