"""Vocabulary the identifiers hide (issue 20, lever `aliases`).

`ALIASES` is a curated table of the names one ML idea goes by: the code says `freqs_cis`, `c_attn`,
`ent_coef`; the notes say "rotary", "fused QKV projection", "entropy bonus". Each group is a set of
phrases; when a phrase is named near the cursor, the words of the group's other phrases are asked too.
A phrase is named when each of its terms is among the cursor's terms, or — for a phrase with a
one-letter or stop-word term (`c attn`, `is causal`, `top k`), which its terms alone cannot tell —
when it spells one identifier there (`c_attn`, `is_causal`, `top_k`).

The groups come from the names real model code uses, by domain (`DOMAINS`; docs/vocabulary.md lists
each group's source): language models as nanoGPT, GPT-NeoX, LLaMA and Hugging Face write them; vision
as timm and big_vision do; RL and JAX as CleanRL, purejaxrl, Stable-Baselines3, optax and flax do; and
the training loop's own names. A group lists only names specific enough not to fire in unrelated
code (`eps` alone is not label smoothing, `gamma` is a discount in RL and a layer scale in vision:
neither is listed), and adds no stop word.
"""

from __future__ import annotations

from ..retrieval import tokenize
from .identifiers import STOP_WORDS

LANGUAGE_MODELS: tuple[tuple[str, ...], ...] = (
    ("rope", "rotary", "freqs cis", "rotary embedding", "inv freq", "rotary pct", "rotary ndims"),
    ("wte", "tok embeddings", "embed tokens", "token embedding"),
    ("wpe", "pos embed", "pos embedding", "posemb", "position embedding", "positional embedding"),
    ("lm head", "unembedding", "output embedding"),
    ("tie word embeddings", "tie weights", "tied embeddings", "weight tying", "untied embeddings"),
    ("c attn", "qkv", "wqkv", "fused qkv", "query key value"),
    ("flash", "sdpa", "scaled dot product", "flash attention", "fused attention"),
    ("causal mask", "is causal", "tril", "triangular", "masked fill"),
    ("kv cache", "key value cache", "past key values", "layer past"),
    ("layernorm", "layer norm", "ln"),
    ("ln f", "norm f", "final norm", "final layernorm"),
    ("rmsnorm", "rms norm", "root mean square"),
    ("swiglu", "gated silu", "silu gate", "gated linear unit", "geglu"),
    ("gelu", "gaussian error linear"),
    ("gqa", "grouped query", "kv heads", "num key value heads", "repeat kv"),
    ("mqa", "multi query"),
    ("qk norm", "qk layernorm", "query key normalization"),
    ("alibi", "attention linear biases"),
    ("moe", "mixture of experts"),
    ("z loss", "zloss", "logsumexp", "log partition", "softmax normalizer", "softmax normaliser"),
    ("softcapping", "softcap", "soft cap", "logit capping"),
    ("parallel residual", "parallel attention"),
    ("attn pdrop", "attention dropout"),
    ("resid pdrop", "residual dropout"),
    ("embd pdrop", "embedding dropout"),
    ("top k", "topk", "top p", "nucleus sampling"),
    ("segment ids", "block diagonal", "blockdiagonalmask", "cu seqlens", "document mask", "doc mask"),
)

VISION: tuple[tuple[str, ...], ...] = (
    ("vit", "patch embed", "patch embedding", "patchify", "vision transformer"),
    ("cls token", "class token"),
    ("drop path", "droppath", "stochastic depth"),
    ("layer scale", "layerscale", "init values"),
    ("mixup", "cutmix", "mix up", "cut mix"),
    ("randaugment", "rand augment", "randaug"),
    ("random erasing", "random erase", "reprob"),
    ("label smoothing", "smoothed cross entropy", "smoothing"),
    ("ema", "exponential moving average", "polyak"),
)

REINFORCEMENT_LEARNING: tuple[tuple[str, ...], ...] = (
    ("gae", "generalized advantage", "advantage estimation", "lambda weighted estimator"),
    ("clip eps", "clip coef", "clip range", "clip param", "clipped surrogate", "ratio clipping"),
    ("clip vloss", "value clipping", "clipped value loss"),
    ("vf coef", "value coef", "value loss coefficient"),
    ("ent coef", "entropy coef", "entropy bonus", "entropy coefficient"),
    ("target kl", "kl early stopping", "approx kl"),
    ("kl", "kullback", "divergence"),
    ("norm adv", "normalize advantages", "advantage normalization", "advantage normalisation"),
    ("obs norm", "observation normalization", "running mean std", "obs rms"),
    ("reward scaling", "reward normalization", "normalize reward", "return normalization"),
    ("orthogonal", "orthogonal init", "orthogonal initialization"),
    ("anneal lr", "lr annealing"),
    ("logstd", "log std", "log sigma"),
    ("vmap", "vectorized", "vectorised"),
    ("lax scan", "scan loop"),
    ("pmap", "data parallel", "ddp", "distributed data parallel"),
    ("remat", "activation checkpointing", "gradient checkpointing", "recomputation", "recompute", "reentrant"),
)

TRAINING: tuple[tuple[str, ...], ...] = (
    ("lr", "learning rate"),
    ("warmup", "warm up"),
    ("wsd", "warmup stable decay", "trapezoidal"),
    ("weight decay", "wd", "decoupled decay"),
    ("nodecay", "no decay", "decay mask"),
    ("beta1", "b1", "first moment"),
    ("beta2", "b2", "second moment"),
    ("grad clip", "clip grad", "gradient clipping", "clip norm", "max grad norm", "clip by global norm"),
    ("grad accum", "gradient accumulation", "accumulation steps", "microbatches"),
    ("no sync", "require backward grad sync", "grad sync", "allreduce", "all reduce"),
    ("bf16", "bfloat16"),
    ("fp16", "float16", "half precision"),
    ("tf32", "allow tf32", "tensorfloat"),
    ("amp", "autocast", "mixed precision"),
    ("grad scaler", "gradscaler", "loss scaling", "loss scale"),
    ("torch compile", "inductor", "dynamo"),
    ("pin memory", "pinned memory", "page locked", "non blocking"),
    ("mfu", "flops utilization", "flops utilisation"),
)

SPEECH: tuple[tuple[str, ...], ...] = (
    ("glu", "gated linear unit"),
    ("layer drop", "layerdrop", "stochastic depth"),
    ("macaron", "fc factor", "half step feed forward", "half step residual"),
    ("cmvn", "normalize per feature", "utterance mvn", "global mvn", "mean variance normalization",
     "mean variance normalisation", "standardisation", "standardization"),
    ("specaugment", "specaug", "spec augment", "spectrogram augmentation", "time masking", "frequency masking"),
    ("ctc", "connectionist temporal classification"),
    ("rel pos", "relative position", "relative positional", "pos bias u", "rel shift"),
    ("greedy decode", "best path", "greedy decoding"),
    ("noam", "inverse square root", "inverse sqrt"),
    ("speed perturb", "speed perturbation"),
)

#: Domain → its groups (docs/vocabulary.md says where each comes from).
DOMAINS: dict[str, tuple[tuple[str, ...], ...]] = {
    "language models": LANGUAGE_MODELS, "vision": VISION,
    "reinforcement learning and JAX": REINFORCEMENT_LEARNING, "training": TRAINING, "speech": SPEECH,
}
ALIASES: tuple[tuple[str, ...], ...] = tuple(group for groups in DOMAINS.values() for group in groups)


#: Words a phrase may need to be named but that are never asked for it: each says nothing of one idea
#: and is in a large share of any team's notes (`z loss` asks for `zloss`, `logsumexp`, `softmax
#: normaliser`, not for `loss` or `log`).
GENERIC = frozenset("""attention batch data dim embed embedding embeddings head heads init key layer linear log
    loss mean memory model norm output query rate scale size step steps token tokens type value values
    weight weights""".split())


def _significant(term: str) -> bool:
    return len(term) > 1 and term not in STOP_WORDS


_GROUPS = tuple(tuple(tuple(tokenize(phrase)) for phrase in group) for group in ALIASES)
_WORDS = tuple(tuple(dict.fromkeys(t for phrase in group for t in phrase if _significant(t) and t not in GENERIC))
               for group in _GROUPS)


def _named(phrase: tuple[str, ...], present: set[str], spelled: set[tuple[str, ...]]) -> bool:
    if all(_significant(t) for t in phrase):
        return all(t in present for t in phrase)
    return phrase in spelled


def expand(terms: list[str], names: list[str] = ()) -> tuple[list[str], tuple[tuple[str, ...], ...]]:
    """`terms` with the other names of every alias group one of whose phrases they (or, for a phrase
    with a one-letter or stop-word term, one of the identifiers `names`) name, after them; and the
    terms of each group that fired (one idea: the gate counts its strength once)."""
    present = set(terms)
    spelled = {tuple(tokenize(name)) for name in names}
    out = list(terms)
    fired = []
    for group, words in zip(_GROUPS, _WORDS):
        if any(_named(phrase, present, spelled) for phrase in group):
            out.extend(t for t in words if t not in present)
            present.update(words)
            fired.append(words)
    return out, tuple(fired)


__all__ = ["ALIASES", "DOMAINS", "expand"]
