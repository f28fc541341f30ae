"""The training loop: AdamW with decoupled weight decay, warmup + cosine, bf16 autocast, clipping."""

import logging
import os
import time
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn

from model.transformer import ModelArgs, Transformer

from .config import TrainConfig
from .schedule import lr_at, set_lr

log = logging.getLogger(__name__)


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """No weight decay on norms, biases and embeddings; fused AdamW when on CUDA."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.dim() < 2 or "norm" in name or "tok_embeddings" in name:
            no_decay.append(param)
        else:
            decay.append(param)
    groups = [
        {"params": decay, "weight_decay": cfg.optim.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.optim.lr, betas=cfg.optim.betas, eps=cfg.optim.eps,
                             fused=torch.cuda.is_available())


def autocast_context(precision: str, device: str):
    if precision == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    if precision == "fp16":
        return torch.autocast(device_type=device, dtype=torch.float16)
    return nullcontext()


class Trainer:
    def __init__(self, cfg: TrainConfig, model_args: ModelArgs, loader, eval_loader=None):
        self.cfg = cfg
        self.rank = int(os.environ.get("RANK", 0))
        self.device = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(cfg.seed + self.rank)
        self.model = Transformer(model_args).to(self.device)
        if cfg.compile:
            self.model = torch.compile(self.model)
        self.optimizer = build_optimizer(self.model, cfg)
        self.scaler = torch.cuda.amp.GradScaler(enabled=cfg.precision == "fp16")
        self.loader = loader
        self.eval_loader = eval_loader
        self.step = 0

    def train_step(self, batch) -> dict:
        cfg = self.cfg
        lr = lr_at(self.step, cfg.optim.lr, cfg.optim.warmup_steps, cfg.optim.max_steps, cfg.optim.min_lr_ratio)
        set_lr(self.optimizer, lr)
        total = 0.0
        for micro in range(cfg.grad_accum_steps):
            tokens, targets = (t.to(self.device, non_blocking=True) for t in batch[micro])
            with autocast_context(cfg.precision, "cuda"):
                _, loss = self.model(tokens, targets=targets, z_loss_weight=cfg.z_loss_weight)
                loss = loss / cfg.grad_accum_steps
            self.scaler.scale(loss).backward()
            total += loss.item()
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return {"loss": total, "lr": lr, "grad_norm": float(grad_norm)}

    @torch.no_grad()
    def evaluate(self, max_batches: int = 50) -> float:
        self.model.eval()
        losses = []
        for i, (tokens, targets) in enumerate(self.eval_loader):
            if i >= max_batches:
                break
            with autocast_context(self.cfg.precision, "cuda"):
                _, loss = self.model(tokens.to(self.device), targets=targets.to(self.device))
            losses.append(loss.item())
        self.model.train()
        return sum(losses) / max(1, len(losses))

    def save_checkpoint(self, path: str) -> None:
        if self.rank != 0:
            return
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                    "step": self.step, "config": self.cfg}, path)

    def fit(self) -> None:
        started = time.time()
        for batch in self.loader:
            metrics = self.train_step(batch)
            if self.step % 10 == 0 and self.rank == 0:
                tokens = self.step * self.cfg.micro_batch_size * self.cfg.grad_accum_steps * self.cfg.seq_len
                log.info("step %d loss %.4f lr %.2e gnorm %.2f tok/s %.0f", self.step, metrics["loss"],
                         metrics["lr"], metrics["grad_norm"], tokens / (time.time() - started))
            if self.eval_loader is not None and self.step % self.cfg.eval_every == 0:
                log.info("step %d val_loss %.4f", self.step, self.evaluate())
            if self.step % self.cfg.ckpt_every == 0:
                self.save_checkpoint(f"checkpoints/{self.cfg.run_name}-{self.step}.pt")
            if self.step >= self.cfg.optim.max_steps:
                break
        if dist.is_initialized():
            dist.barrier()
