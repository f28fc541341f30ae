"""Hydra trainer: python train.py model=unet_64 diffusion=gaussian optim.lr=1e-4"""

import copy
import os

import hydra
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from diffusion import GaussianDiffusion, get_named_beta_schedule
from unet import UNetModel


def build_loader(cfg: DictConfig):
    ops = [transforms.Resize(cfg.data.image_size), transforms.CenterCrop(cfg.data.image_size)]
    if cfg.data.random_flip:
        ops.append(transforms.RandomHorizontalFlip())
    ops += [transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.5] * 3)]
    dataset = datasets.ImageFolder(cfg.data.root, transform=transforms.Compose(ops))
    return DataLoader(dataset, batch_size=cfg.data.batch_size, shuffle=True, num_workers=cfg.data.num_workers,
                      drop_last=True, pin_memory=True, persistent_workers=True)


@torch.no_grad()
def update_ema(ema_model, model, decay):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.mul_(decay).add_(p.detach(), alpha=1 - decay)


def lr_at(step, cfg):
    return cfg.optim.lr * min(1.0, (step + 1) / cfg.optim.warmup_steps)


def save_checkpoint(path, step, model, ema_model, opt):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"step": step, "model": model.state_dict(), "ema": ema_model.state_dict(),
                "opt": opt.state_dict()}, path)


@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg: DictConfig):
    torch.manual_seed(cfg.seed)
    device = torch.device("cuda")
    model = UNetModel(**{k: v for k, v in cfg.model.items() if k != "_target_"}).to(device)
    ema_model = copy.deepcopy(model).requires_grad_(False)
    betas = get_named_beta_schedule(cfg.diffusion.beta_schedule, cfg.diffusion.num_timesteps)
    diffusion = GaussianDiffusion(betas, prediction=cfg.diffusion.prediction, snr_gamma=cfg.diffusion.snr_gamma)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.optim.lr, betas=tuple(cfg.optim.betas),
                            weight_decay=cfg.optim.weight_decay)
    train_model = torch.compile(model) if cfg.train.compile else model
    loader = build_loader(cfg)
    step = 0
    while step < cfg.train.total_steps:
        for images, labels in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            t = torch.randint(0, diffusion.num_timesteps, (images.shape[0],), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cfg.train.precision == "bf16"):
                loss = diffusion.training_losses(train_model, images, t, labels, cfg.diffusion.cond_drop_prob)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
            for group in opt.param_groups:
                group["lr"] = lr_at(step, cfg)
            opt.step()
            decay = cfg.train.ema_decay if step >= cfg.train.ema_start else 0.0
            update_ema(ema_model, model, decay)
            if step % cfg.train.ckpt_every == 0:
                save_checkpoint(f"checkpoints/{step:07d}.pt", step, model, ema_model, opt)
            step += 1
            if step >= cfg.train.total_steps:
                break


if __name__ == "__main__":
    main()
