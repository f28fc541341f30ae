"""Training configuration: a dataclass filled from configs/*.yaml, overridable from the command line."""

from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml


@dataclass
class OptimConfig:
    lr: float = 3e-4
    min_lr_ratio: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.1
    eps: float = 1e-8
    warmup_steps: int = 2000
    max_steps: int = 100_000
    grad_clip: float = 1.0


@dataclass
class TrainConfig:
    run_name: str = "llm-1b"
    data_dir: str = "data/tokenized"
    seq_len: int = 4096
    micro_batch_size: int = 8
    grad_accum_steps: int = 4
    precision: str = "bf16"
    z_loss_weight: float = 1e-4
    eval_every: int = 1000
    ckpt_every: int = 5000
    compile: bool = True
    seed: int = 1337
    optim: OptimConfig = field(default_factory=OptimConfig)


def load_config(path: str | Path, overrides: list[str] = ()) -> TrainConfig:
    """Read a YAML file, then apply `key=value` or `optim.key=value` overrides."""
    raw = yaml.safe_load(Path(path).read_text())
    train = raw.get("train", {})
    optim = OptimConfig(**train.pop("optim", {}))
    config = TrainConfig(**train, optim=optim)
    for item in overrides:
        key, _, value = item.partition("=")
        target = config
        if key.startswith("optim."):
            target, key = config.optim, key[len("optim."):]
        kinds = {f.name: f.type for f in fields(target)}
        if key not in kinds:
            raise KeyError(f"unknown config key {key!r}")
        setattr(target, key, type(getattr(target, key))(value))
    return config
