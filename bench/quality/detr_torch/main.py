"""Trains DETR on COCO 2017: multi-scale augmentation, AdamW with a lower backbone lr, one lr drop."""

import argparse
import json
import math
import random

import torch
import torchvision.transforms.functional as TF

from models.detr import build, postprocess
from models.matcher import box_xyxy_to_cxcywh


def get_args_parser():
    parser = argparse.ArgumentParser("DETR detector", add_help=False)
    parser.add_argument("--lr", default=1e-4, type=float)
    parser.add_argument("--lr_backbone", default=1e-5, type=float)
    parser.add_argument("--batch_size", default=2, type=int)
    parser.add_argument("--weight_decay", default=1e-4, type=float)
    parser.add_argument("--epochs", default=300, type=int)
    parser.add_argument("--lr_drop", default=200, type=int)
    parser.add_argument("--clip_max_norm", default=0.1, type=float, help="gradient clipping max norm")
    parser.add_argument("--backbone", default="resnet50", type=str)
    parser.add_argument("--dilation", action="store_true", help="dilate the last stage (DC5)")
    parser.add_argument("--masks", action="store_true")
    parser.add_argument("--pe_temperature", default=10000, type=int)
    parser.add_argument("--enc_layers", default=6, type=int)
    parser.add_argument("--dec_layers", default=6, type=int)
    parser.add_argument("--dim_feedforward", default=2048, type=int)
    parser.add_argument("--hidden_dim", default=256, type=int)
    parser.add_argument("--dropout", default=0.1, type=float)
    parser.add_argument("--nheads", default=8, type=int)
    parser.add_argument("--num_queries", default=100, type=int)
    parser.add_argument("--pre_norm", action="store_true")
    parser.add_argument("--no_aux_loss", dest="aux_loss", action="store_false")
    parser.add_argument("--focal_loss", action="store_true")
    parser.add_argument("--focal_alpha", default=0.25, type=float)
    parser.add_argument("--set_cost_class", default=1, type=float)
    parser.add_argument("--set_cost_bbox", default=5, type=float)
    parser.add_argument("--set_cost_giou", default=2, type=float)
    parser.add_argument("--cls_loss_coef", default=1, type=float)
    parser.add_argument("--bbox_loss_coef", default=5, type=float)
    parser.add_argument("--giou_loss_coef", default=2, type=float)
    parser.add_argument("--eos_coef", default=0.1, type=float, help="relative weight of the no-object class")
    parser.add_argument("--num_classes", default=91, type=int)
    parser.add_argument("--coco_path", type=str)
    parser.add_argument("--output_dir", default="outputs")
    parser.add_argument("--seed", default=42, type=int)
    return parser


SCALES = [480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800]


def random_resize(image, target, sizes=SCALES, max_size=1333):
    """Shorter side to one of `sizes` at random, the longer side capped at `max_size`; boxes scaled alike."""
    size = random.choice(sizes)
    w, h = image.size
    if max(w, h) / min(w, h) * size > max_size:
        size = int(round(max_size * min(w, h) / max(w, h)))
    new_h, new_w = (size, int(size * w / h)) if w > h else (int(size * h / w), size)
    image = TF.resize(image, [new_h, new_w])
    target["boxes"] = target["boxes"] * torch.tensor([new_w / w, new_h / h, new_w / w, new_h / h])
    return image, target


def random_size_crop(image, target, min_size=384, max_size=600):
    w, h = image.size
    cw, ch = random.randint(min_size, min(w, max_size)), random.randint(min_size, min(h, max_size))
    top, left = random.randint(0, h - ch), random.randint(0, w - cw)
    image = TF.crop(image, top, left, ch, cw)
    boxes = target["boxes"] - torch.tensor([left, top, left, top])
    boxes = torch.min(boxes.reshape(-1, 2, 2), torch.tensor([cw, ch])).clamp(min=0)
    keep = (boxes[:, 1] > boxes[:, 0]).all(1)
    target["boxes"], target["labels"] = boxes.reshape(-1, 4)[keep], target["labels"][keep]
    return image, target


def train_transform(image, target):
    if random.random() < 0.5:
        image = TF.hflip(image)
        w = image.size[0]
        target["boxes"] = target["boxes"][:, [2, 1, 0, 3]] * torch.tensor([-1, 1, -1, 1]) + torch.tensor([w, 0, w, 0])
    if random.random() < 0.5:
        image, target = random_resize(image, target, sizes=[400, 500, 600])
        image, target = random_size_crop(image, target)
    image, target = random_resize(image, target)
    w, h = image.size
    target["boxes"] = box_xyxy_to_cxcywh(target["boxes"]) / torch.tensor([w, h, w, h])
    return TF.normalize(TF.to_tensor(image), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]), target


def train_one_epoch(model, criterion, data_loader, optimizer, device, clip_max_norm=0.1):
    model.train()
    for images, pixel_mask, targets in data_loader:
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        outputs = model(images.to(device), pixel_mask.to(device))
        loss_dict = criterion(outputs, targets)
        losses = sum(loss_dict[k] * criterion.weight_dict[k] for k in loss_dict if k in criterion.weight_dict)
        if not math.isfinite(losses.item()):
            raise SystemExit(f"Loss is {losses.item()}, stopping training")
        optimizer.zero_grad()
        losses.backward()
        if clip_max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_max_norm)
        optimizer.step()


@torch.no_grad()
def write_detections(model, data_loader, device, path):
    model.eval()
    results = []
    for images, pixel_mask, targets in data_loader:
        sizes = torch.stack([t["orig_size"] for t in targets]).to(device)
        for target, found in zip(targets, postprocess(model(images.to(device), pixel_mask.to(device)), sizes)):
            results.append({"image_id": int(target["image_id"]), **{k: v.tolist() for k, v in found.items()}})
    with open(path, "w", encoding="utf-8") as out:
        json.dump(results, out)


def main(args, train_loader):
    torch.manual_seed(args.seed)
    model, criterion = build(args)
    param_dicts = [
        {"params": [p for n, p in model.named_parameters() if "backbone" not in n and p.requires_grad]},
        {"params": [p for n, p in model.named_parameters() if "backbone" in n and p.requires_grad],
         "lr": args.lr_backbone},
    ]
    optimizer = torch.optim.AdamW(param_dicts, lr=args.lr, weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)
    for _ in range(args.epochs):
        train_one_epoch(model, criterion, train_loader, optimizer, "cuda", args.clip_max_norm)
        lr_scheduler.step()


if __name__ == "__main__":
    main(argparse.ArgumentParser("DETR", parents=[get_args_parser()]).parse_args(), train_loader=None)
