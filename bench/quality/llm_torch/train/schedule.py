"""Learning-rate schedule: linear warmup, then cosine decay to `min_lr_ratio * lr`."""

import math


def lr_at(step: int, lr: float, warmup_steps: int, max_steps: int, min_lr_ratio: float = 0.1) -> float:
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= max_steps:
        return lr * min_lr_ratio
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * cosine)


def set_lr(optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
