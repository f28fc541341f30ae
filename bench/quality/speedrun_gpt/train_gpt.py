"""The speedrun trainer: GPT-2 small class on FineWeb to a validation loss of 3.28 on 8xH100, as fast as
possible. One process per GPU (torchrun); the hyperparameters are a dataclass overridden by a YAML file.

    torchrun --standalone --nproc_per_node=8 train_gpt.py configs/speedrun_124m.yaml
"""
import os
import sys
import time
import uuid
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

import torch
import torch.distributed as dist
import yaml
from torch import nn

from data import distributed_data_generator
from model import GPT, next_multiple_of_n
from muon import Muon


@dataclass
class Hyperparameters:
    # data
    train_files: str = "data/fineweb10B/fineweb_train_*.bin"
    val_files: str = "data/fineweb10B/fineweb_val_*.bin"
    val_tokens: int = 10485760  # fixed: always measure on the same 10M tokens
    train_seq_len: int = 48 * 1024  # tokens per rank per step (one packed row)
    val_seq_len: int = 4 * 64 * 1024
    bos_id: int = 50256
    align_to_bos: bool = True
    # schedule
    num_iterations: int = 1770
    cooldown_frac: float = 0.4
    final_lr_frac: float = 0.1
    val_loss_every: int = 125
    target_val_loss: float = 3.28
    # architecture
    vocab_size: int = 50257
    num_layers: int = 12
    num_heads: int = 6
    head_dim: int = 128
    model_dim: int = 768
    mlp_expansion: int = 4
    max_seq_len: int = 64 * 1024
    rope_base: float = 1024.0
    attn_scale: float = 0.12
    num_value_embeds: int = 3
    attn_free_layers: tuple = (7,)
    long_window_layers: tuple = (0, 3, 6, 11)
    logit_softcap: float = 15.0
    window_min: int = 128
    window_max: int = 1792
    fp8_head: bool = True
    fp8_x_s: float = 2.0
    fp8_w_s: float = 2.0 ** -9
    fp8_grad_s: float = 2.0 ** -19
    # optimisers
    head_lr: float = 0.22
    embed_lr: float = 0.6
    scalar_lr: float = 0.04
    adam_betas: tuple = (0.8, 0.95)
    adam_eps: float = 1e-10
    muon_lr: float = 0.05
    muon_momentum: float = 0.95
    muon_momentum_start: float = 0.85
    muon_momentum_warmup_steps: int = 300
    ns_steps: int = 5
    nesterov: bool = True
    muon_weight_decay: float = 0.0
    # run
    compile: bool = True
    warmup_compile_steps: int = 10
    seed: int = 0
    save_checkpoint: bool = False
    log_dir: str = "logs"
    tags: list = field(default_factory=list)


def load_config(path: str | None) -> Hyperparameters:
    args = Hyperparameters()
    if path is None:
        return args
    overrides = yaml.safe_load(Path(path).read_text()) or {}
    known = {f.name for f in fields(Hyperparameters)}
    for key, value in overrides.items():
        assert key in known, f"unknown hyperparameter {key}"
        setattr(args, key, tuple(value) if isinstance(value, list) and key != "tags" else value)
    return args


def print0(logfile: str | None, s: str, console: bool = False) -> None:
    if logfile is None:
        return
    if console:
        print(s)
    with open(logfile, "a") as f:
        print(s, file=f)


def get_lr(args: Hyperparameters, step: int) -> float:
    """Trapezoidal schedule: no warm-up, flat at 1, then a linear cooldown to final_lr_frac over the last
    cooldown_frac of the run."""
    x = step / args.num_iterations
    assert 0 <= x < 1
    if x < 1 - args.cooldown_frac:
        return 1.0
    w = (1 - x) / args.cooldown_frac
    return w * 1.0 + (1 - w) * args.final_lr_frac


@lru_cache(1)
def get_window_size_blocks_helper(window_size: int) -> torch.Tensor:
    return torch.tensor(window_size // 128, dtype=torch.int32, pin_memory=True).cuda(non_blocking=True)


def get_window_size_blocks(args: Hyperparameters, step: int) -> torch.Tensor:
    """The attention window grows linearly from window_min to window_max tokens over the run, in blocks
    of 128 (a new value means a new block mask, not a recompile)."""
    x = step / args.num_iterations
    assert 0 <= x <= 1
    window_size = next_multiple_of_n(args.window_min + (args.window_max - args.window_min) * x, n=128)
    return get_window_size_blocks_helper(window_size)


def build_optimizers(model: GPT, args: Hyperparameters, rank: int, world_size: int):
    hidden_matrix_params = [p for n, p in model.blocks.named_parameters() if p.ndim >= 2 and "embed" not in n]
    embed_params = [p for n, p in model.named_parameters() if "embed" in n]
    scalar_params = [p for p in model.parameters() if p.ndim < 2]
    head_params = [model.lm_head.weight]
    adam_groups = [dict(params=head_params, lr=args.head_lr),
                   dict(params=embed_params, lr=args.embed_lr),
                   dict(params=scalar_params, lr=args.scalar_lr)]
    optimizer1 = torch.optim.Adam(adam_groups, betas=args.adam_betas, eps=args.adam_eps, fused=True)
    optimizer2 = Muon(hidden_matrix_params, lr=args.muon_lr, momentum=args.muon_momentum, nesterov=args.nesterov,
                      ns_steps=args.ns_steps, weight_decay=args.muon_weight_decay, rank=rank, world_size=world_size)
    optimizers = [optimizer1, optimizer2]
    for opt in optimizers:
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
    return optimizers


def muon_momentum_at(args: Hyperparameters, step: int) -> float:
    frac = min(step / args.muon_momentum_warmup_steps, 1)
    return (1 - frac) * args.muon_momentum_start + frac * args.muon_momentum


@torch.no_grad()
def evaluate(model: nn.Module, args: Hyperparameters, step: int, world_size: int, rank: int) -> torch.Tensor:
    model.eval()
    val_batch_size = world_size * args.val_seq_len
    assert args.val_tokens % val_batch_size == 0
    val_steps = args.val_tokens // val_batch_size
    val_loader = distributed_data_generator(args.val_files, val_batch_size, rank, world_size,
                                            bos_id=args.bos_id, align_to_bos=False)
    val_loss = 0
    for _ in range(val_steps):
        inputs, targets = next(val_loader)
        val_loss += model(inputs, targets, get_window_size_blocks(args, step))
    val_loss /= val_steps
    dist.all_reduce(val_loss, op=dist.ReduceOp.AVG)
    model.train()
    return val_loss


def main() -> None:
    args = load_config(sys.argv[1] if len(sys.argv) > 1 else None)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    assert torch.cuda.is_available()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    dist.init_process_group(backend="nccl", device_id=device)
    dist.barrier()
    master_process = rank == 0
    logfile = None
    if master_process:
        run_id = uuid.uuid4()
        os.makedirs(args.log_dir, exist_ok=True)
        logfile = f"{args.log_dir}/{run_id}.txt"
    torch.manual_seed(args.seed)

    model: nn.Module = GPT(args).cuda()
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            m.bfloat16()
    for param in model.parameters():
        dist.broadcast(param.detach(), 0)
    optimizers = build_optimizers(model, args, rank, world_size)
    optimizer2 = optimizers[1]
    if args.compile:
        model = torch.compile(model, dynamic=False)

    # warm the kernels up on a few steps, then put the initial state back: compile time is not run time
    initial_state = dict(model=copy_state(model.state_dict()), optimizers=[copy_state(o.state_dict()) for o in optimizers])
    for _ in range(args.warmup_compile_steps):
        inputs = targets = torch.randint(0, args.vocab_size, size=(args.train_seq_len,), device="cuda")
        model(inputs.to(torch.int32), targets, get_window_size_blocks(args, 0)).backward()
        for param in model.parameters():
            dist.all_reduce(param.grad, op=dist.ReduceOp.AVG)
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
    model.load_state_dict(initial_state["model"])
    for opt, opt_state in zip(optimizers, initial_state["optimizers"]):
        opt.load_state_dict(opt_state)
    del initial_state

    train_loader = distributed_data_generator(args.train_files, world_size * args.train_seq_len, rank, world_size,
                                              bos_id=args.bos_id, align_to_bos=args.align_to_bos)
    training_time_ms = 0
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    train_steps = args.num_iterations
    for step in range(train_steps + 1):
        last_step = step == train_steps
        if last_step or (args.val_loss_every > 0 and step % args.val_loss_every == 0):
            torch.cuda.synchronize()
            training_time_ms += 1000 * (time.perf_counter() - t0)
            val_loss = evaluate(model, args, step, world_size, rank)
            print0(logfile, f"step:{step}/{train_steps} val_loss:{val_loss:.4f} train_time:{training_time_ms:.0f}ms "
                            f"step_avg:{training_time_ms / max(step, 1):.2f}ms", console=True)
            if val_loss.item() <= args.target_val_loss and master_process:
                print0(logfile, f"target {args.target_val_loss} reached at step {step}", console=True)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        if last_step:
            if master_process and args.save_checkpoint:
                save_checkpoint(model, optimizers, step, args)
            break

        inputs, targets = next(train_loader)
        model(inputs, targets, get_window_size_blocks(args, step)).backward()
        for param in model.parameters():
            dist.all_reduce(param.grad, op=dist.ReduceOp.AVG)
        for opt in optimizers:
            for group in opt.param_groups:
                group["lr"] = group["initial_lr"] * get_lr(args, step)
        for group in optimizer2.param_groups:
            group["momentum"] = muon_momentum_at(args, step)
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
        approx_training_time_ms = training_time_ms + 1000 * (time.perf_counter() - t0)
        print0(logfile, f"step:{step + 1}/{train_steps} train_time:{approx_training_time_ms:.0f}ms")

    print0(logfile, f"peak memory allocated: {torch.cuda.max_memory_allocated() // 1024 // 1024} MiB", console=True)
    dist.destroy_process_group()


def copy_state(state: dict) -> dict:
    return {k: v.clone() if torch.is_tensor(v) else copy_state(v) if isinstance(v, dict) else v
            for k, v in state.items()}


def save_checkpoint(model: nn.Module, optimizers: list, step: int, args: Hyperparameters) -> None:
    log = dict(step=step, model=model.state_dict(), optimizers=[opt.state_dict() for opt in optimizers])
    os.makedirs(f"{args.log_dir}/ckpt", exist_ok=True)
    torch.save(log, f"{args.log_dir}/ckpt/state_step{step:06d}.pt")


if __name__ == "__main__":
    main()
