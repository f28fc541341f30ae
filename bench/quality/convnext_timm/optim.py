"""Optimiser, schedule, losses and the weight EMA: parameter groups without decay on norms and biases,
layer-wise lr decay by stage, AdamW / LAMB / SGD, cosine with warm-up per step, soft-target CE or BCE."""

import math
from copy import deepcopy

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.optim import Lamb


def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def _convnext_layer_id(name, num_layers):
    """Stem -> 0, stage i block j -> i + 1 (downsample with its stage), head -> num_layers - 1."""
    if name.startswith("stem"):
        return 0
    if name.startswith("stages"):
        return int(name.split(".")[1]) + 1
    return num_layers - 1


def param_groups_layer_decay(model, weight_decay=0.05, layer_decay=0.8, no_weight_decay_list=()):
    num_layers = len(model.stages) + 2
    scales = [layer_decay ** (num_layers - 1 - i) for i in range(num_layers)]
    groups = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        no_decay = param.ndim == 1 or name in no_weight_decay_list
        layer_id = _convnext_layer_id(name, num_layers)
        key = f"layer_{layer_id}_{'no_decay' if no_decay else 'decay'}"
        if key not in groups:
            groups[key] = {"lr_scale": scales[layer_id], "weight_decay": 0.0 if no_decay else weight_decay,
                           "params": []}
        groups[key]["params"].append(param)
    return list(groups.values())


def create_optimizer(model, opt="adamw", lr=4e-3, weight_decay=0.05, momentum=0.9, layer_decay=None,
                     opt_eps=1e-8, opt_betas=(0.9, 0.999)):
    skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else ()
    if layer_decay is not None:
        params = param_groups_layer_decay(model, weight_decay, layer_decay, skip)
    else:
        params = param_groups_weight_decay(model, weight_decay, skip)
    if opt == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=opt_betas, eps=opt_eps)
    if opt == "lamb":
        return Lamb(params, lr=lr, betas=opt_betas, eps=opt_eps)
    if opt == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True)
    raise ValueError(opt)


class CosineLRScheduler:
    """Linear warm-up from warmup_lr_init, then half a cosine down to lr_min, stepped per update."""

    def __init__(self, optimizer, t_initial, lr_min=1e-6, warmup_t=0, warmup_lr_init=1e-6):
        self.optimizer, self.t_initial, self.lr_min = optimizer, t_initial, lr_min
        self.warmup_t, self.warmup_lr_init = warmup_t, warmup_lr_init
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * (lr - self.warmup_lr_init) / self.warmup_t for lr in self.base_lrs]
        t = t - self.warmup_t
        total = self.t_initial - self.warmup_t
        return [self.lr_min + 0.5 * (lr - self.lr_min) * (1 + math.cos(math.pi * t / total)) for lr in self.base_lrs]

    def step_update(self, num_updates):
        for group, lr in zip(self.optimizer.param_groups, self._get_lr(num_updates)):
            group["lr"] = lr * group.get("lr_scale", 1.0)


class ModelEmaV2(nn.Module):
    """An exponential moving average of the weights (parameters and buffers), evaluated on its own."""

    def __init__(self, model, decay=0.9999, device=None, warmup=False):
        super().__init__()
        self.module = deepcopy(model).eval()
        self.decay, self.device, self.warmup = decay, device, warmup
        if device is not None:
            self.module.to(device=device)

    def get_decay(self, step):
        if not self.warmup:
            return self.decay
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def update(self, model, step=None):
        decay = self.get_decay(step or 0)
        for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
            if self.device is not None:
                model_v = model_v.to(device=self.device)
            if ema_v.is_floating_point():
                ema_v.lerp_(model_v, 1.0 - decay)
            else:
                ema_v.copy_(model_v)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


class BinaryCrossEntropy(nn.Module):
    """Per-class sigmoid BCE on (mixed, smoothed) targets; targets above target_threshold become 1."""

    def __init__(self, smoothing=0.1, target_threshold=None, pos_weight=None):
        super().__init__()
        self.smoothing, self.target_threshold, self.pos_weight = smoothing, target_threshold, pos_weight

    def forward(self, x, target):
        if target.shape != x.shape:
            off = self.smoothing / x.shape[-1]
            target = torch.full_like(x, off).scatter_(1, target.long().view(-1, 1), 1.0 - self.smoothing + off)
        if self.target_threshold is not None:
            target = target.gt(self.target_threshold).to(dtype=target.dtype)
        return F.binary_cross_entropy_with_logits(x, target, pos_weight=self.pos_weight)
