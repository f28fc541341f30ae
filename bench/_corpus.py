"""A deterministic generator of realistic experiment pools for the retrieval benchmark.

Everything is drawn from one seeded `numpy.random.Generator`; the vocabulary itself is built from
fixed word lists and the same RNG, so a (seed, n) pair always yields the same records and queries.

Records are produced as decoded-JSON-like mappings (RFC 3339 timestamp strings, `conclusion` as a
string or `{headline, details}`, architecture as a list or a map, metrics as a list or a map): what
the pool loader decodes from a file, so `soma_lsp.records.parse_record` turns them into records that
carry what real ones carry (parsed datetimes, normalised statuses, metrics with goals).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np

from soma_lsp.records import Record
from soma_lsp.retrieval import tokenize

# -- vocabulary -------------------------------------------------------------------------------------

FUNCTION_WORDS = """the a of to and in with at on for is was by from after before than that this it
not but as we our when then so too very more less no only also still again both each all same into
over under per vs while which up down out off about between without during""".split()

ML_WORDS = """loss learning rate warmup schedule cosine decay linear step steps epoch epochs batch size
gradient grad clip clipping norm layer layers attention head heads query key value embedding embeddings
rotary rope theta position positional alibi relative absolute token tokens tokenizer vocab sequence
length context window sliding local global sparse dense mixture experts expert router routing topk
capacity load balance auxiliary dropout residual skip connection pre post normalization layernorm
rmsnorm batchnorm groupnorm scale shift bias weight weights init initialization xavier kaiming orthogonal
uniform normal truncated std mean variance optimizer adam adamw sgd momentum nesterov lion sophia
shampoo beta1 beta2 epsilon eps weight_decay lr lr_warmup cooldown plateau restart cycle onecycle
precision fp32 fp16 bf16 fp8 int8 quantization quantized mixed amp autocast overflow underflow nan inf
diverged divergence spike spikes unstable stable stability instability collapse collapsed exploding
vanishing saturation saturated dead relu gelu silu swiglu geglu tanh sigmoid softmax logits logit
temperature entropy perplexity ppl accuracy acc bleu rouge f1 recall auc eval validation val train
training test held out overfit overfitting underfit generalization regularization label smoothing
mixup cutmix augmentation augment crop flip jitter noise data dataset shard shards shuffle shuffled
packing padding pad mask masked causal bidirectional encoder decoder transformer conv convolution
kernel stride dilation pooling maxpool avgpool upsample downsample resnet unet vit patch patches
image text audio speech vision language model models small base large tiny billion million params
parameters flops throughput latency memory oom activation activations checkpoint checkpointing
recompute offload zero fsdp ddp tensor pipeline parallel sharding gather scatter allreduce nccl
gpu gpus node nodes cluster a100 h100 tpu cuda kernel kernels triton flash fused fusion compile
compiled graph eager jit profile profiler bottleneck speedup slowdown faster slower baseline
ablation sweep grid search seed seeds variance run runs rerun reproduce reproduced regression
regressed improvement improved worse better hurt helped neutral marginal significant noise noisy
curve curves plateaued converged convergence converge slow fast early late stopping patience
distillation teacher student contrastive infonce triplet margin cross kl divergence reward policy
rl ppo dpo rlhf sft finetune finetuning pretrain pretraining lora adapter adapters prefix prompt
tuning frozen freeze unfreeze head_dim hidden dim dims width depth mlp ffn projection proj qkv
out_proj gate gated expansion ratio multi grouped gqa mqa kv cache cached inference decode decoding
beam greedy sampling nucleus top_p top_k repetition penalty ema swa averaging merge merged soup
tied untied bias_free scaling law laws compute optimal chinchilla muP mup transfer width_mult
loss_scale grad_norm global_norm update ratio spectral orthogonality whitening centering""".split()

NUMBERS = """1 2 3 4 8 16 32 64 128 256 512 1024 2048 4096 8192 10k 32k 100k 500k 1m 1e 3e 5e 6e 1e4
0 5 10 20 50 100 200 1000 2k 4k 8k 16k 7b 13b 70b 125m 350m 1b 3b""".split()

COMPONENTS = """torch.nn.Linear torch.nn.LayerNorm RMSNorm torch.nn.Embedding RotaryEmbedding
MultiHeadAttention GroupedQueryAttention FlashAttention SlidingWindowAttention CrossAttention
torch.nn.Dropout torch.nn.GELU torch.nn.SiLU SwiGLU GeGLU torch.nn.ReLU torch.nn.Conv1d torch.nn.Conv2d
torch.nn.Conv3d torch.nn.BatchNorm1d torch.nn.BatchNorm2d torch.nn.GroupNorm torch.nn.MaxPool2d
torch.nn.AvgPool2d AdaptiveAvgPool2d torch.nn.Upsample ConvTranspose2d PatchEmbedding ALiBi
LearnedPositionalEmbedding SinusoidalPositionalEmbedding MixtureOfExperts TopKRouter ExpertMLP
torch.nn.LSTM torch.nn.GRU TransformerBlock TransformerEncoderLayer TransformerDecoderLayer
ResidualBlock BottleneckBlock SqueezeExcitation DepthwiseConv2d torch.nn.Softmax LayerNormFP32
KVCache QKNorm ParallelMLP GatedMLP torch.nn.Identity torch.nn.Flatten LMHead ClassifierHead
VectorQuantizer ResamplerBlock MambaBlock SSMKernel torch.nn.PixelShuffle LoRALinear
CausalSelfAttention""".split()

METRICS = ["val_loss", "train_loss", "ppl", "accuracy", "top1", "bleu", "tokens_per_sec", "mfu",
           "grad_norm", "eval_f1", "peak_mem_gb", "step_time_ms"]
METRIC_GOAL = {"val_loss": "min", "train_loss": "min", "ppl": "minimize", "accuracy": "max",
               "top1": "maximize", "bleu": "higher", "tokens_per_sec": "max", "mfu": "max",
               "grad_norm": "lower", "eval_f1": "max", "peak_mem_gb": "min", "step_time_ms": "min"}
STATUSES = ["succeeded", "failed", "crashed", "regressed", "cancelled", "running", "planned", "unknown",
            "finished", "error", "killed"]
STATUS_P = [0.40, 0.14, 0.06, 0.08, 0.05, 0.04, 0.04, 0.05, 0.08, 0.03, 0.03]
CODE_PATHS = ["model/attention.py", "model/mlp.py", "model/embedding.py", "model/norm.py", "train.py",
              "optim/schedule.py", "optim/adamw.py", "data/loader.py", "data/packing.py",
              "configs/base.yaml", "kernels/flash.cu", "eval/harness.py"]
SYMBOLS = ["Attention.forward", "RotaryEmbedding", "MLP.forward", "build_optimizer", "lr_lambda",
           "LayerNormFP32.forward", "pack_sequences", "Trainer.step", None, None]

_SYLLABLES = """ka lo mi ser tan vor el is ra nu pe qua zen dri fo lu ma ne ti ox ber cal dun fey gor
hal jin kel mor nad pul rin sol tev ung val wex yor zil""".split()
_ACRONYMS = {"fp32": "FP32", "fp16": "FP16", "bf16": "BF16", "fp8": "FP8", "mlp": "MLP", "ffn": "FFN",
             "qkv": "QKV", "kv": "KV", "gpu": "GPU", "rms": "RMS", "gqa": "GQA", "lr": "LR", "ema": "EMA"}
_IDENT_PARTS = [w for w in ML_WORDS if w.isalpha() and len(w) > 1] + ["fp32", "fp16", "bf16", "2d", "v2"]


def _camel(part: str) -> str:
    return _ACRONYMS.get(part, part[:1].upper() + part[1:])


@dataclass(frozen=True)
class Vocabulary:
    words: np.ndarray  # object array of the surface words, most frequent first
    cdf: np.ndarray  # Zipf-like cumulative distribution over `words`
    content_cdf: np.ndarray  # the same over content words only (for names)
    content: np.ndarray
    component_cdf: np.ndarray

    def draw(self, rng: np.random.Generator, n: int, content: bool = False) -> np.ndarray:
        cdf, words = (self.content_cdf, self.content) if content else (self.cdf, self.words)
        return words[np.minimum(np.searchsorted(cdf, rng.random(n)), words.size - 1)]


def _zipf_cdf(n: int, exponent: float, offset: float) -> np.ndarray:
    weights = 1.0 / (np.arange(n) + offset) ** exponent
    return np.cumsum(weights) / weights.sum()


def build_vocabulary(rng: np.random.Generator, n_synthetic: int = 2200, n_identifiers: int = 900,
                     ) -> Vocabulary:
    """~4,000 surface words: function words, ML words, numbers, camelCase / snake_case identifiers
    and pseudo-words, ranked so the function words lead and the pseudo-words form the long tail."""
    identifiers: list[str] = []
    seen: set[str] = set()
    parts = np.array(_IDENT_PARTS, dtype=object)
    while len(identifiers) < n_identifiers:
        k = int(rng.integers(2, 4))
        chosen = [str(p) for p in rng.choice(parts, k, replace=False)]
        style = rng.random()
        if style < 0.5:
            ident = "".join(_camel(p) for p in chosen)  # RotaryEmbedding, LayerNormFP32
        elif style < 0.9:
            ident = "_".join(chosen)  # lr_warmup_steps
        else:
            ident = chosen[0] + "".join(_camel(p) for p in chosen[1:])  # gradNormClip
        if ident not in seen:
            seen.add(ident)
            identifiers.append(ident)
    synthetic: list[str] = []
    syl = np.array(_SYLLABLES, dtype=object)
    while len(synthetic) < n_synthetic:
        word = "".join(rng.choice(syl, int(rng.integers(2, 4))))
        if word not in seen:
            seen.add(word)
            synthetic.append(word)
    ml = list(dict.fromkeys(ML_WORDS + NUMBERS))
    mid = [ml[i] for i in rng.permutation(len(ml))]
    # interleave identifiers into the ML band so they have mid-range frequencies
    body: list[str] = []
    ident_iter = iter(identifiers)
    for i, w in enumerate(mid):
        body.append(w)
        if i % 2 == 1:
            body.append(next(ident_iter, None) or w)
    body.extend(ident_iter)
    words = list(dict.fromkeys(FUNCTION_WORDS + body + synthetic))
    content = [w for w in words if w not in set(FUNCTION_WORDS)]
    return Vocabulary(
        words=np.array(words, dtype=object),
        cdf=_zipf_cdf(len(words), 1.0, 2.7),
        content_cdf=_zipf_cdf(len(content), 1.0, 8.0),
        content=np.array(content, dtype=object),
        component_cdf=_zipf_cdf(len(COMPONENTS), 0.9, 2.0),
    )


# -- records ---------------------------------------------------------------------------------------

EPOCH = datetime(2025, 6, 1, tzinfo=timezone.utc)
SPAN_DAYS = 548  # 18 months
NOW = EPOCH + timedelta(days=SPAN_DAYS)


def _components(vocab: Vocabulary, rng: np.random.Generator, k: int) -> list[str]:
    idx = np.minimum(np.searchsorted(vocab.component_cdf, rng.random(k)), len(COMPONENTS) - 1)
    return [COMPONENTS[i] for i in idx]


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _mapping(i: int, vocab: Vocabulary, rng: np.random.Generator, r: np.ndarray) -> dict:
    """One record mapping; `r` holds 16 uniform draws for this record's coin flips."""
    n_name = 2 + int(r[0] * 3)
    name = "-".join(vocab.draw(rng, n_name, content=True).tolist())
    m: dict = {"id": f"exp-{i:07d}", "name": name,
               "status": STATUSES[int(np.searchsorted(np.cumsum(STATUS_P), r[1] * 0.9999))]}
    created = EPOCH + timedelta(seconds=float(r[2]) * SPAN_DAYS * 86400)
    if r[3] < 0.95:
        m["created_at"] = _iso(created)
    if r[4] < 0.85:
        m["finished_at"] = _iso(created + timedelta(hours=1 + float(r[5]) * 72))
    headline = " ".join(vocab.draw(rng, 8 + int(r[6] * 8)).tolist()) if r[7] < 0.85 else None
    if headline is not None:
        if r[8] < 0.3:
            m["conclusion"] = {"headline": headline,
                               "details": " ".join(vocab.draw(rng, 10 + int(r[9] * 31)).tolist())}
        else:
            m["conclusion"] = headline
    if r[10] < 0.9:
        m["notes"] = " ".join(vocab.draw(rng, 40 + int(r[11] * 81)).tolist())
    if r[12] < 0.9:
        comps = _components(vocab, rng, 3 + int(r[13] * 10))
        if r[12] < 0.55:
            m["architecture"] = comps
        else:
            bag: dict[str, int] = {}
            for c in comps:
                bag[c] = bag.get(c, 0) + int(rng.integers(1, 25))
            m["architecture"] = bag
    if r[14] < 0.6:
        metrics = []
        for name_i in rng.choice(len(METRICS), 1 + int(r[15] * 3), replace=False).tolist():
            metric_name = METRICS[name_i]
            base = float(rng.uniform(0.5, 4.0))
            value: float | str = base * float(rng.normal(1.0, 0.06))
            if rng.random() < 0.02:
                value = "nan"
            entry = {"name": metric_name, "value": value}
            if rng.random() < 0.7:
                entry["baseline"] = base
                entry["goal"] = METRIC_GOAL[metric_name]
            metrics.append(entry)
        m["metrics"] = metrics
    if rng.random() < 0.3:
        code = []
        for _ in range(int(rng.integers(1, 3))):
            path, symbol = CODE_PATHS[int(rng.integers(len(CODE_PATHS)))], SYMBOLS[int(rng.integers(len(SYMBOLS)))]
            code.append(f"{path}::{symbol}" if symbol else path)
        m["code"] = code
    if rng.random() < 0.5:
        m["tags"] = vocab.draw(rng, int(rng.integers(1, 4)), content=True).tolist()
    if rng.random() < 0.3:
        m["commit"] = f"{int(rng.integers(1 << 40)):010x}"
    return m


# -- queries ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BenchQuery:
    text: str
    terms: tuple[str, ...]  # the distinct terms of tokenize(text), first-seen order
    architecture: tuple[str, ...]


def generate_queries(n_queries: int, n_terms: int, seed: int = 99, n_components: int = 5,
                     ) -> list[BenchQuery]:
    """Query texts drawn word by word from the pool's vocabulary distribution until `tokenize`
    yields exactly `n_terms` distinct terms; an architecture bag of `n_components` components."""
    vocab = build_vocabulary(np.random.default_rng(1234))  # the pool's vocabulary
    rng = np.random.default_rng([seed, n_terms])
    queries = []
    for _ in range(n_queries):
        words: list[str] = []
        terms: dict[str, None] = {}
        while len(terms) < n_terms:
            word = str(vocab.draw(rng, 1)[0])
            new = [t for t in dict.fromkeys(tokenize(word)) if t not in terms]
            if len(terms) + len(new) > n_terms:
                continue
            words.append(word)
            terms.update(dict.fromkeys(new))
        queries.append(BenchQuery(" ".join(words), tuple(terms), tuple(_components(vocab, rng, n_components))))
    return queries


def iter_fields(record: Record) -> Iterator[tuple[str, int]]:
    """The document fields of a record with their repetition (docs/spec.md §2.2)."""
    yield record.name, 3
    yield record.headline or "", 2
    yield record.notes or "", 1
    yield record.details or "", 1


def generate_mappings(n: int, seed: int = 1234) -> Iterator[dict]:
    """`n` records as JSON-ready mappings, deterministic in (n, seed); record i is the same for every n
    (one RNG stream per chunk of 10,000, so the prefixes of a larger pool equal a smaller pool)."""
    vocab = build_vocabulary(np.random.default_rng(seed))
    chunk = 10_000
    for start in range(0, n, chunk):
        rng = np.random.default_rng([seed, start // chunk])
        for j, r in enumerate(rng.random((min(chunk, n - start), 16))):
            yield _mapping(start + j, vocab, rng, r)
