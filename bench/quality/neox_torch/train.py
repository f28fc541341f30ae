"""Pretraining loop for model.GPT: memory-mapped token shards, DDP, autocast, grad accumulation."""

import math
import os
import time
from contextlib import nullcontext

import numpy as np
import torch
import yaml
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, GPTConfig


def load_config(path):
    with open(path) as f:
        cfg = yaml.safe_load(f)
    return cfg["model"], cfg["train"]


def get_batch(data_dir, split, block_size, batch_size, device):
    data = np.memmap(os.path.join(data_dir, f"{split}.bin"), dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    if device.startswith("cuda"):
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


def get_lr(it, learning_rate, warmup_iters, lr_decay_iters, min_lr):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


@torch.no_grad()
def estimate_loss(model, ctx, tc, device):
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(tc["eval_iters"])
        for k in range(tc["eval_iters"]):
            X, Y = get_batch(tc["data_dir"], split, tc["block_size"], tc["batch_size"], device)
            with ctx:
                _, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def save_checkpoint(raw_model, optimizer, iter_num, best_val_loss, out_dir):
    checkpoint = {"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                  "iter_num": iter_num, "best_val_loss": best_val_loss}
    torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))


def train(config_path):
    mc, tc = load_config(config_path)
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        init_process_group(backend="nccl")
        ddp_local_rank = int(os.environ["LOCAL_RANK"])
        device = f"cuda:{ddp_local_rank}"
        torch.cuda.set_device(device)
        master_process = int(os.environ["RANK"]) == 0
        tc["gradient_accumulation_steps"] //= int(os.environ["WORLD_SIZE"])
    else:
        device, master_process = tc.get("device", "cuda"), True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dtype = tc["dtype"]
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = nullcontext() if device == "cpu" else torch.amp.autocast(device_type="cuda", dtype=ptdtype)

    model = GPT(GPTConfig(**mc)).to(device)
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    optimizer = model.configure_optimizers(tc["weight_decay"], tc["learning_rate"],
                                           (tc["beta1"], tc["beta2"]), "cuda")
    if tc["compile"]:
        model = torch.compile(model)
    if ddp:
        model = DDP(model, device_ids=[ddp_local_rank])
    raw_model = model.module if ddp else model

    X, Y = get_batch(tc["data_dir"], "train", tc["block_size"], tc["batch_size"], device)
    iter_num, best_val_loss, t0 = 0, 1e9, time.time()
    while iter_num <= tc["max_iters"]:
        lr = get_lr(iter_num, tc["learning_rate"], tc["warmup_iters"], tc["lr_decay_iters"], tc["min_lr"])
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % tc["eval_interval"] == 0 and master_process:
            losses = estimate_loss(model, ctx, tc, device)
            if losses["val"] < best_val_loss:
                best_val_loss = losses["val"]
                save_checkpoint(raw_model, optimizer, iter_num, best_val_loss, tc["out_dir"])
        for micro_step in range(tc["gradient_accumulation_steps"]):
            if ddp:
                model.require_backward_grad_sync = (micro_step == tc["gradient_accumulation_steps"] - 1)
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / tc["gradient_accumulation_steps"]
            X, Y = get_batch(tc["data_dir"], "train", tc["block_size"], tc["batch_size"], device)
            scaler.scale(loss).backward()
        if tc["grad_clip"] != 0.0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_clip"])
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.time()
        dt, t0 = t1 - t0, t1
        if iter_num % tc["log_interval"] == 0 and master_process:
            mfu = raw_model.estimate_mfu(tc["batch_size"] * tc["gradient_accumulation_steps"], dt)
            print(f"iter {iter_num}: loss {loss.item():.4f}, time {dt * 1000:.2f}ms, mfu {mfu * 100:.2f}%")
        iter_num += 1
    if ddp:
        destroy_process_group()
