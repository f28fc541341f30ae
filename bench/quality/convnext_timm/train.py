"""ImageNet-1k supervised training as timm's train.py runs it: a YAML of defaults under argparse, DDP with
optional SyncBN, AMP (bf16, or fp16 with a grad scaler), channels_last, torch.compile, gradient accumulation,
Mixup/CutMix, a weight EMA validated on its own, and an average of the best checkpoints at the end."""

import argparse
import math
import os
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn as nn
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler
from torchvision.datasets import ImageFolder

from data import Mixup, RepeatAugSampler, create_eval_transform, create_loader, create_transform
from models import create_model
from optim import BinaryCrossEntropy, CosineLRScheduler, ModelEmaV2, SoftTargetCrossEntropy, create_optimizer

parser = argparse.ArgumentParser(description="ImageNet training")
parser.add_argument("-c", "--config", default="", type=str)
parser.add_argument("--data-dir", default="/data/imagenet")
parser.add_argument("--output", default="./output")


def _parse_args():
    args_config, remaining = parser.parse_known_args()
    with open(args_config.config) as f:
        cfg = yaml.safe_load(f)
    ns = argparse.Namespace(**cfg)
    ns.data_dir, ns.output = args_config.data_dir, args_config.output
    return ns


class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def accuracy(output, target, topk=(1, 5)):
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.reshape(1, -1).expand_as(pred.t()))
    return [correct[: min(k, maxk)].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, args, lr_scheduler, amp_autocast, loss_scaler,
                    model_ema=None, mixup_fn=None, num_updates=0):
    if args.mixup_off_epoch and epoch >= args.mixup_off_epoch and mixup_fn is not None:
        mixup_fn.mixup_enabled = False
    model.train()
    losses = AverageMeter()
    accum_steps = args.grad_accum_steps
    for batch_idx, (input, target) in enumerate(loader):
        input, target = input.cuda(non_blocking=True), target.cuda(non_blocking=True)
        if mixup_fn is not None:
            input, target = mixup_fn(input, target)
        if args.channels_last:
            input = input.contiguous(memory_format=torch.channels_last)
        need_update = (batch_idx + 1) % accum_steps == 0
        sync = nullcontext() if need_update or not hasattr(model, "no_sync") else model.no_sync()
        with sync:
            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target) / accum_steps
            if loss_scaler is not None:
                loss_scaler.scale(loss).backward()
            else:
                loss.backward()
        if not need_update:
            continue
        if loss_scaler is not None:
            if args.clip_grad is not None:
                loss_scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            loss_scaler.step(optimizer)
            loss_scaler.update()
        else:
            if args.clip_grad is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        num_updates += 1
        if model_ema is not None:
            model_ema.update(model, step=num_updates)
        lr_scheduler.step_update(num_updates=num_updates)
        losses.update(loss.item() * accum_steps, input.size(0))
    return num_updates, losses.avg


@torch.no_grad()
def validate(model, loader, amp_autocast, channels_last=False):
    model.eval()
    top1, top5 = AverageMeter(), AverageMeter()
    for input, target in loader:
        input, target = input.cuda(non_blocking=True), target.cuda(non_blocking=True)
        if channels_last:
            input = input.contiguous(memory_format=torch.channels_last)
        with amp_autocast():
            output = model(input)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        top1.update(acc1.item(), input.size(0))
        top5.update(acc5.item(), input.size(0))
    return {"top1": top1.avg, "top5": top5.avg}


def save_checkpoint(path, model, optimizer, epoch, model_ema=None):
    state = {"epoch": epoch, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict()}
    if model_ema is not None:
        state["state_dict_ema"] = model_ema.module.state_dict()
    torch.save(state, path)


def average_checkpoints(paths, key="state_dict_ema"):
    """The mean of the weights of several checkpoints (the best by validation top-1)."""
    avg, n = {}, len(paths)
    for path in paths:
        state = torch.load(path, map_location="cpu")[key]
        for k, v in state.items():
            if not v.is_floating_point():
                avg[k] = v
                continue
            avg[k] = avg.get(k, 0) + v.double() / n
    return {k: v.float() if v.is_floating_point() else v for k, v in avg.items()}


def main():
    args = _parse_args()
    dist.init_process_group("nccl")
    world_size, rank = dist.get_world_size(), dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    torch.manual_seed(args.seed + rank)

    model = create_model(args.model, num_classes=args.num_classes, drop_rate=args.drop,
                         drop_path_rate=args.drop_path, ls_init_value=args.layer_scale_init_value)
    if args.sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model.cuda()
    if args.channels_last:
        model.to(memory_format=torch.channels_last)

    global_batch = args.batch_size * world_size * args.grad_accum_steps
    batch_ratio = global_batch / args.lr_base_size
    if args.lr is None:
        args.lr = args.lr_base * (batch_ratio ** 0.5 if args.lr_base_scale == "sqrt" else batch_ratio)
    optimizer = create_optimizer(model, opt=args.opt, lr=args.lr, weight_decay=args.weight_decay,
                                 momentum=args.momentum, layer_decay=args.layer_decay)

    amp_dtype = torch.bfloat16 if args.amp_dtype == "bfloat16" else torch.float16
    amp_autocast = lambda: torch.autocast("cuda", dtype=amp_dtype)  # noqa: E731
    loss_scaler = torch.cuda.amp.GradScaler() if amp_dtype == torch.float16 else None

    model_ema = ModelEmaV2(model, decay=args.model_ema_decay, warmup=args.model_ema_warmup) if args.model_ema else None
    model = DDP(model, device_ids=[local_rank])
    if args.torchcompile:
        model = torch.compile(model, mode=args.compile_mode)

    train_tf = create_transform(args.img_size, scale=args.scale, ratio=args.ratio, hflip=args.hflip,
                                auto_augment=args.aa, interpolation=args.train_interpolation,
                                re_prob=args.reprob, re_mode=args.remode, re_count=args.recount)
    dataset_train = ImageFolder(os.path.join(args.data_dir, "train"), transform=train_tf)
    dataset_eval = ImageFolder(os.path.join(args.data_dir, "val"),
                               transform=create_eval_transform(args.test_input_size, args.test_crop_pct))
    if args.aug_repeats > 0:
        sampler = RepeatAugSampler(dataset_train, world_size, rank, num_repeats=args.aug_repeats)
    else:
        sampler = DistributedSampler(dataset_train, num_replicas=world_size, rank=rank, shuffle=True)
    loader_train = create_loader(dataset_train, args.batch_size, True, args.workers, sampler)
    loader_eval = create_loader(dataset_eval, args.batch_size, False, args.workers,
                                DistributedSampler(dataset_eval, shuffle=False))

    mixup_fn = None
    if args.mixup > 0 or args.cutmix > 0:
        mixup_fn = Mixup(mixup_alpha=args.mixup, cutmix_alpha=args.cutmix, prob=args.mixup_prob,
                         switch_prob=args.mixup_switch_prob, label_smoothing=args.smoothing,
                         num_classes=args.num_classes)
    if args.bce_loss:
        train_loss_fn = BinaryCrossEntropy(smoothing=args.smoothing, target_threshold=args.bce_target_thresh)
    else:
        train_loss_fn = SoftTargetCrossEntropy()

    updates_per_epoch = math.ceil(len(loader_train) / args.grad_accum_steps)
    lr_scheduler = CosineLRScheduler(optimizer, t_initial=args.epochs * updates_per_epoch, lr_min=args.min_lr,
                                     warmup_t=args.warmup_epochs * updates_per_epoch, warmup_lr_init=args.warmup_lr)
    num_updates, best = 0, []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        num_updates, train_loss = train_one_epoch(epoch, model, loader_train, optimizer, train_loss_fn, args,
                                                  lr_scheduler, amp_autocast, loss_scaler, model_ema, mixup_fn,
                                                  num_updates)
        metrics = validate(model, loader_eval, amp_autocast, args.channels_last)
        if model_ema is not None:
            ema_metrics = validate(model_ema.module, loader_eval, amp_autocast, args.channels_last)
            metrics.update({f"ema_{k}": v for k, v in ema_metrics.items()})
        if rank == 0:
            path = os.path.join(args.output, f"checkpoint-{epoch}.pth.tar")
            save_checkpoint(path, model.module if hasattr(model, "module") else model, optimizer, epoch, model_ema)
            best = sorted(best + [(metrics.get("ema_top1", metrics["top1"]), path)], reverse=True)[: args.avg_top_k]
            print(epoch, train_loss, metrics)
    if rank == 0 and args.avg_top_k > 1:
        torch.save({"state_dict": average_checkpoints([p for _, p in best])}, os.path.join(args.output, "averaged.pth"))


if __name__ == "__main__":
    main()
