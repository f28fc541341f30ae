"""Self-supervised pretraining loop: a student and an EMA teacher over multi-crop views, the DINO,
iBOT and KoLeo losses, cosine schedules for lr / weight decay / momentum / teacher temperature."""

import argparse
import json
import math
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import yaml
from torchvision.datasets import ImageFolder

from data import DataAugmentationDINO, MaskingGenerator, collate_data_and_cast
from loss import DINOLoss, KoLeoLoss, iBOTPatchLoss
from models import vision_transformer as vits
from models.dino_head import DINOHead, cancel_last_layer_gradients


def load_config(path):
    with open(path) as f:
        return yaml.safe_load(f)


class CosineScheduler:
    def __init__(self, base_value, final_value, total_iters, warmup_iters=0, start_warmup_value=0, freeze_iters=0):
        freeze_schedule = np.zeros((freeze_iters))
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
        iters = np.arange(total_iters - warmup_iters - freeze_iters)
        schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
        self.schedule = np.concatenate((freeze_schedule, warmup_schedule, schedule))
        self.final_value = final_value

    def __getitem__(self, it):
        return self.schedule[it] if it < len(self.schedule) else self.final_value


def build_schedulers(cfg):
    ep = cfg["train"]["OFFICIAL_EPOCH_LENGTH"]
    o, t = cfg["optim"], cfg["teacher"]
    lr = CosineScheduler(o["lr"], o["min_lr"], o["epochs"] * ep, warmup_iters=o["warmup_epochs"] * ep)
    wd = CosineScheduler(o["weight_decay"], o["weight_decay_end"], o["epochs"] * ep)
    momentum = CosineScheduler(t["momentum_teacher"], t["final_momentum_teacher"], o["epochs"] * ep)
    teacher_temp = CosineScheduler(t["teacher_temp"], t["teacher_temp"], t["warmup_teacher_temp_epochs"] * ep,
                                   warmup_iters=t["warmup_teacher_temp_epochs"] * ep,
                                   start_warmup_value=t["warmup_teacher_temp"])
    return lr, wd, momentum, teacher_temp


def get_vit_lr_decay_rate(name, lr_decay_rate=1.0, num_layers=12):
    layer_id = num_layers + 1
    if name.startswith("backbone"):
        if ".pos_embed" in name or ".patch_embed" in name or ".mask_token" in name or ".cls_token" in name \
                or ".register_tokens" in name:
            layer_id = 0
        elif ".blocks." in name:
            layer_id = int(name[name.find(".blocks."):].split(".")[2]) + 1
    return lr_decay_rate ** (num_layers + 1 - layer_id)


def get_params_groups(model, cfg):
    o, depth = cfg["optim"], len(model.student.backbone.blocks)
    groups = []
    for name, param in model.student.named_parameters():
        if not param.requires_grad:
            continue
        decay_rate = get_vit_lr_decay_rate(name, o["layerwise_decay"], depth)
        group = {"params": param, "lr_multiplier": decay_rate, "wd_multiplier": 1.0, "name": name}
        if name.endswith(".bias") or "norm" in name or "gamma" in name:
            group["wd_multiplier"] = 0.0
        if "patch_embed" in name:
            group["lr_multiplier"] *= o["patch_embed_lr_mult"]
        groups.append(group)
    return groups


class SSLMetaArch(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        s, d = cfg["student"], cfg["dino"]
        make = partial(getattr(vits, s["arch"]), patch_size=s["patch_size"], init_values=s["layerscale"],
                       ffn_layer=s["ffn_layer"], num_register_tokens=s["num_register_tokens"],
                       interpolate_offset=s["interpolate_offset"])
        head = partial(DINOHead, out_dim=d["head_n_prototypes"], hidden_dim=d["head_hidden_dim"],
                       bottleneck_dim=d["head_bottleneck_dim"], nlayers=d["head_nlayers"])
        student_backbone = make(drop_path_rate=s["drop_path_rate"], drop_path_uniform=s["drop_path_uniform"])
        teacher_backbone = make()
        dim = student_backbone.norm.normalized_shape[0]
        self.student = nn.ModuleDict({"backbone": student_backbone, "dino_head": head(in_dim=dim)})
        self.teacher = nn.ModuleDict({"backbone": teacher_backbone, "dino_head": head(in_dim=dim)})
        self.teacher.load_state_dict(self.student.state_dict())
        for p in self.teacher.parameters():
            p.requires_grad = False
        self.dino_loss = DINOLoss(d["head_n_prototypes"])
        self.ibot_patch_loss = iBOTPatchLoss(cfg["ibot"]["head_n_prototypes"])
        self.koleo_loss = KoLeoLoss()
        self.cfg = cfg

    @torch.no_grad()
    def get_teacher_output(self, images, masks, teacher_temp, n_masked):
        out = self.teacher["backbone"].forward_features(images)
        cls, patches = out["x_norm_clstoken"], out["x_norm_patchtokens"]
        masked_patches = torch.index_select(patches.flatten(0, 1), 0, masks)[:n_masked]
        logits = self.teacher["dino_head"](torch.cat((cls, masked_patches)))
        cls_logits, patch_logits = logits[: len(cls)], logits[len(cls):]
        if self.cfg["train"]["centering"] == "sinkhorn_knopp":
            return (self.dino_loss.sinkhorn_knopp_teacher(cls_logits, teacher_temp),
                    self.dino_loss.sinkhorn_knopp_teacher(patch_logits, teacher_temp))
        cls_probs = self.dino_loss.softmax_center_teacher(cls_logits, teacher_temp)
        patch_probs = self.ibot_patch_loss.softmax_center_teacher(patch_logits, teacher_temp)
        self.dino_loss.update_center(cls_logits)
        self.ibot_patch_loss.update_center(patch_logits)
        return cls_probs, patch_probs

    def forward_backward(self, batch, teacher_temp):
        d, i = self.cfg["dino"], self.cfg["ibot"]
        g, l = batch["collated_global_crops"].cuda(), batch["collated_local_crops"].cuda()
        masks, idx = batch["collated_masks"].cuda(), batch["mask_indices_list"].cuda()
        n_masked = int(batch["n_masked_patches"][0])
        teacher_cls, teacher_patch = self.get_teacher_output(g, idx, teacher_temp, n_masked)
        s_global = self.student["backbone"].forward_features(g, masks=masks)
        s_local = self.student["backbone"].forward_features(l)
        n_local = self.cfg["crops"]["local_crops_number"]
        s_patch = torch.index_select(s_global["x_norm_patchtokens"].flatten(0, 1), 0, idx)[:n_masked]
        logits = self.student["dino_head"](torch.cat((s_global["x_norm_clstoken"], s_local["x_norm_clstoken"], s_patch)))
        n_g = len(g)
        s_g_cls, s_l_cls, s_p = logits[:n_g], logits[n_g: n_g + len(l)], logits[n_g + len(l):]
        loss = d["loss_weight"] * self.dino_loss(s_l_cls.chunk(n_local), teacher_cls.chunk(2)) / (2 * n_local)
        loss += d["loss_weight"] * self.dino_loss(s_g_cls.chunk(2), teacher_cls.chunk(2)[::-1]) / 2
        koleo = sum(self.koleo_loss(p) for p in s_global["x_norm_clstoken"].chunk(2))
        loss += d["koleo_loss_weight"] * koleo
        loss += i["loss_weight"] * self.ibot_patch_loss.forward_masked(
            s_p, teacher_patch, student_masks_flat=masks, n_masked_patches=n_masked,
            masks_weight=batch["masks_weight"].cuda())
        loss.backward()
        return loss.detach()

    @torch.no_grad()
    def update_teacher(self, m):
        student_params = list(self.student.parameters())
        teacher_params = list(self.teacher.parameters())
        torch._foreach_mul_(teacher_params, m)
        torch._foreach_add_(teacher_params, student_params, alpha=1 - m)


def apply_optim_scheduler(optimizer, lr, wd, last_layer_lr):
    for group in optimizer.param_groups:
        group["weight_decay"] = wd * group["wd_multiplier"]
        group["lr"] = (last_layer_lr if "last_layer" in group["name"] else lr) * group["lr_multiplier"]


def save_checkpoint(model, optimizer, iteration, path):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": iteration}, path)


def do_train(cfg, model, loader):
    o = cfg["optim"]
    o["lr"] = o["base_lr"] * math.sqrt(cfg["train"]["batch_size_per_gpu"] * torch.distributed.get_world_size() / 1024)
    optimizer = torch.optim.AdamW(get_params_groups(model, cfg), betas=(o["adamw_beta1"], o["adamw_beta2"]))
    lr_s, wd_s, m_s, tt_s = build_schedulers(cfg)
    ep = cfg["train"]["OFFICIAL_EPOCH_LENGTH"]
    if cfg["train"]["compile"]:
        model.student["backbone"] = torch.compile(model.student["backbone"])
    for it, batch in enumerate(loader):
        last_layer_lr = 0.0 if it < o["freeze_last_layer_epochs"] * ep else lr_s[it]
        apply_optim_scheduler(optimizer, lr_s[it], wd_s[it], last_layer_lr)
        optimizer.zero_grad(set_to_none=True)
        loss = model.forward_backward(batch, teacher_temp=tt_s[it])
        nn.utils.clip_grad_norm_(model.student.parameters(), o["clip_grad"])
        cancel_last_layer_gradients(model.student["dino_head"], it // ep, o["freeze_last_layer_epochs"])
        optimizer.step()
        model.update_teacher(m_s[it])
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"loss is {loss.item()} at iteration {it}")
        if it % 1000 == 0:
            log_stats({"iteration": it, "loss": loss.item(), "lr": lr_s[it], "momentum": m_s[it]})
        if it % (10 * ep) == 0:
            save_checkpoint(model, optimizer, it, f"model_{it:07d}.pth")


def log_stats(stats, path="training_metrics.json"):
    with open(path, "a") as f:
        f.write(json.dumps(stats) + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-file", default="configs/vitl14_reg4.yaml")
    cfg = load_config(parser.parse_args().config_file)
    c, s = cfg["crops"], cfg["student"]
    transform = DataAugmentationDINO(c["global_crops_scale"], c["local_crops_scale"], c["local_crops_number"],
                                     c["global_crops_size"], c["local_crops_size"])
    n_tokens = (c["global_crops_size"] // s["patch_size"]) ** 2
    mask_generator = MaskingGenerator((c["global_crops_size"] // s["patch_size"],) * 2,
                                      max_num_patches=0.5 * n_tokens)
    collate = partial(collate_data_and_cast, mask_ratio_tuple=cfg["ibot"]["mask_ratio_min_max"],
                      mask_probability=cfg["ibot"]["mask_sample_probability"], dtype=torch.half,
                      n_tokens=n_tokens, mask_generator=mask_generator)
    model = SSLMetaArch(cfg).cuda()
    dataset = ImageFolder(cfg["train"]["dataset_path"], transform=transform)
    sampler = torch.utils.data.DistributedSampler(dataset, shuffle=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=cfg["train"]["batch_size_per_gpu"], sampler=sampler,
                                         collate_fn=collate, num_workers=10, drop_last=True, pin_memory=True)
    do_train(cfg, model, loader)


if __name__ == "__main__":
    main()
