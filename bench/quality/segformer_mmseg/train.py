"""Iteration-based training of SegFormer-B2 (or UperNet on ConvNeXt/Swin) on ADE20K, mmseg style:
AdamW with a 10x head lr and no decay on norms, poly decay after a linear warm-up, SyncBN, fp16 with a
dynamic loss scale, mIoU every `eval_interval` iterations."""
import argparse
import json
import time

import numpy as np
import torch
import torch.distributed as dist
import cv2
import yaml

from data.pipeline import load_annotations, normalize, train_pipeline

from models.heads import FCNHead, SegformerHead, UPerHead
from models.losses import CrossEntropyLoss, OHEMPixelSampler
from models.mit import MixVisionTransformer
from models.segmentor import EncoderDecoder


def load_config(path):
    with open(path) as f:
        return yaml.safe_load(f)


class SegDataset(torch.utils.data.Dataset):
    def __init__(self, index_file, cfg, train=True):
        with open(index_file) as f:
            self.items = [line.split() for line in f if line.strip()]
        self.cfg, self.train = cfg, train

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        img_path, seg_path = self.items[i]
        img, seg = cv2.imread(img_path), cv2.imread(seg_path, cv2.IMREAD_GRAYSCALE)
        if self.train:
            img, seg = train_pipeline(img, seg, self.cfg)
            return torch.from_numpy(img), torch.from_numpy(np.ascontiguousarray(seg)).long()
        seg = load_annotations(seg, self.cfg["reduce_zero_label"])
        return [torch.from_numpy(normalize(img.astype(np.float32)))], torch.from_numpy(seg).long()


def build_dataloaders(cfg):
    d = cfg["data"]
    train_set, val_set = SegDataset(d["train_index"], d), SegDataset(d["val_index"], d, train=False)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=d["samples_per_gpu"], shuffle=True,
                                               num_workers=d["workers_per_gpu"], drop_last=True, pin_memory=True)
    val_loader = torch.utils.data.DataLoader(val_set, batch_size=1, num_workers=d["workers_per_gpu"])
    return train_loader, val_loader


def build_segmentor(cfg):
    m = cfg["model"]
    backbone = MixVisionTransformer(**m["backbone"])
    head_cls = SegformerHead if m["decode_head"].pop("type") == "SegformerHead" else UPerHead
    decode_head = head_cls(**m["decode_head"])
    aux = FCNHead(**m["auxiliary_head"]) if m.get("auxiliary_head") else None
    loss = CrossEntropyLoss(**m["loss_decode"])
    sampler = OHEMPixelSampler(**m["sampler"]) if m.get("sampler") else None
    return EncoderDecoder(backbone, decode_head, aux, loss, sampler, test_cfg=m["test_cfg"])


def build_optimizer(model, cfg):
    """Parameter groups: `lr_mult` for the decode head, `decay_mult=0` for norms and position blocks."""
    o = cfg["optimizer"]
    custom_keys = o["paramwise_cfg"]["custom_keys"]
    groups = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        lr_mult, decay_mult = 1.0, 1.0
        for key, mults in custom_keys.items():
            if key in name:
                lr_mult, decay_mult = mults.get("lr_mult", 1.0), mults.get("decay_mult", 1.0)
        if param.ndim == 1 and o["paramwise_cfg"].get("norm_decay_mult") is not None:
            decay_mult = o["paramwise_cfg"]["norm_decay_mult"]
        groups.append({"params": [param], "lr": o["lr"] * lr_mult, "lr_mult": lr_mult,
                       "weight_decay": o["weight_decay"] * decay_mult})
    return torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), weight_decay=o["weight_decay"])


def poly_lr(it, base_lr, max_iters, power=1.0, min_lr=0.0, warmup_iters=1500, warmup_ratio=1e-6):
    """Linear warm-up from `warmup_ratio * lr`, then (1 - it / max_iters) ** power down to `min_lr`."""
    lr = (base_lr - min_lr) * (1 - it / max_iters) ** power + min_lr
    if it < warmup_iters:
        k = (1 - it / warmup_iters) * (1 - warmup_ratio)
        lr = lr * (1 - k)
    return lr


def intersect_and_union(pred, label, num_classes, ignore_index=255):
    mask = label != ignore_index
    pred, label = pred[mask], label[mask]
    intersect = pred[pred == label]
    area_intersect = torch.histc(intersect.float(), bins=num_classes, min=0, max=num_classes - 1)
    area_pred = torch.histc(pred.float(), bins=num_classes, min=0, max=num_classes - 1)
    area_label = torch.histc(label.float(), bins=num_classes, min=0, max=num_classes - 1)
    return area_intersect, area_pred + area_label - area_intersect, area_label


def mean_iou(results, num_classes):
    """Areas are summed over the whole validation set before dividing (not a mean of per-image IoUs);
    classes absent from every label are NaN and left out of the mean."""
    total_inter = sum(r[0] for r in results)
    total_union = sum(r[1] for r in results)
    total_label = sum(r[2] for r in results)
    iou = total_inter / total_union
    acc = total_inter / total_label
    return {"mIoU": float(np.nanmean(iou.cpu().numpy())), "aAcc": float(total_inter.sum() / total_label.sum()),
            "mAcc": float(np.nanmean(acc.cpu().numpy()))}


@torch.no_grad()
def evaluate(model, loader, cfg):
    model.eval()
    num_classes = cfg["model"]["decode_head"]["num_classes"]
    results = []
    for imgs, label in loader:
        if cfg["test"]["aug_test"]:
            pred = model.aug_test([i.cuda() for i in imgs], label.shape[-2:], num_classes, cfg["test"]["flip"])
        else:
            pred = model.inference(imgs[0].cuda(), label.shape[-2:], num_classes).argmax(dim=1)
        results.append(intersect_and_union(pred.cpu(), label, num_classes))
    model.train()
    return mean_iou(results, num_classes)


def train(cfg, train_loader, val_loader):
    model = build_segmentor(cfg)
    if cfg["sync_bn"] and dist.is_initialized():
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.cuda()
    optimizer = build_optimizer(model, cfg)
    scaler = torch.cuda.amp.GradScaler(init_scale=cfg["fp16"]["init_scale"], enabled=cfg["fp16"]["enabled"])
    s = cfg["schedule"]
    data_iter = iter(train_loader)
    for it in range(s["max_iters"]):
        lr = poly_lr(it, cfg["optimizer"]["lr"], s["max_iters"], s["power"], s["min_lr"], s["warmup_iters"],
                     s["warmup_ratio"])
        for group in optimizer.param_groups:
            group["lr"] = lr * group["lr_mult"]
        try:
            img, seg = next(data_iter)
        except StopIteration:
            data_iter = iter(train_loader)
            img, seg = next(data_iter)
        with torch.autocast("cuda", dtype=torch.float16, enabled=cfg["fp16"]["enabled"]):
            losses = model.forward_train(img.cuda(non_blocking=True), seg.cuda(non_blocking=True))
        loss = sum(losses.values())
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if cfg["optimizer"].get("grad_clip"):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["optimizer"]["grad_clip"])
        scaler.step(optimizer)
        scaler.update()
        if (it + 1) % s["eval_interval"] == 0:
            metrics = evaluate(model, val_loader, cfg)
            print(json.dumps({"iter": it + 1, "lr": lr, **metrics, "time": time.time()}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    args = parser.parse_args()
    cfg = load_config(args.config)
    torch.manual_seed(cfg["seed"])
    train(cfg, *build_dataloaders(cfg))


if __name__ == "__main__":
    main()
