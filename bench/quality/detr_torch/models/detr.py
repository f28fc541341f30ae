"""DETR: a CNN, a transformer and a fixed set of learned object queries; trained with a set loss."""

import torch
import torch.nn.functional as F
from torch import nn

from .backbone import build_backbone
from .matcher import box_cxcywh_to_xyxy, build_matcher, generalized_box_iou
from .transformer import build_transformer


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        dims = [input_dim] + [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip(dims, dims[1:] + [output_dim]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < len(self.layers) - 1 else layer(x)
        return x


class DETR(nn.Module):
    def __init__(self, backbone, position_embedding, transformer, num_classes, num_queries=100,
                 aux_loss=True, focal_loss=False):
        super().__init__()
        self.backbone, self.position_embedding, self.transformer = backbone, position_embedding, transformer
        hidden_dim = transformer.d_model
        self.num_queries = num_queries
        self.class_embed = nn.Linear(hidden_dim, num_classes if focal_loss else num_classes + 1)
        self.bbox_embed = MLP(hidden_dim, hidden_dim, 4, 3)
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.input_proj = nn.Conv2d(backbone.num_channels[-1], hidden_dim, kernel_size=1)
        self.aux_loss = aux_loss

    def forward(self, images, pixel_mask):
        src, mask = self.backbone(images, pixel_mask)[str(len(self.backbone.strides) - 1)]
        pos = self.position_embedding(mask)
        hs = self.transformer(self.input_proj(src), mask, self.query_embed.weight, pos)[0]
        outputs_class = self.class_embed(hs)
        outputs_coord = self.bbox_embed(hs).sigmoid()
        out = {"pred_logits": outputs_class[-1], "pred_boxes": outputs_coord[-1]}
        if self.aux_loss:
            out["aux_outputs"] = [{"pred_logits": a, "pred_boxes": b}
                                  for a, b in zip(outputs_class[:-1], outputs_coord[:-1])]
        return out


def sigmoid_focal_loss(inputs, targets, num_boxes, alpha=0.25, gamma=2.0):
    prob = inputs.sigmoid()
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = prob * targets + (1 - prob) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    return loss.mean(1).sum() / num_boxes


class SetCriterion(nn.Module):
    """Matches predictions to targets, then scores classes (the rest as "no object") and the matched boxes."""

    def __init__(self, num_classes, matcher, weight_dict, eos_coef=0.1, focal_loss=False, focal_alpha=0.25):
        super().__init__()
        self.num_classes, self.matcher, self.weight_dict = num_classes, matcher, weight_dict
        self.eos_coef, self.focal_loss, self.focal_alpha = eos_coef, focal_loss, focal_alpha
        empty_weight = torch.ones(num_classes + 1)
        empty_weight[-1] = self.eos_coef
        self.register_buffer("empty_weight", empty_weight)

    def loss_labels(self, outputs, targets, indices, num_boxes):
        src_logits = outputs["pred_logits"]
        idx = self._get_src_permutation_idx(indices)
        target_classes_o = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], self.num_classes, dtype=torch.int64,
                                    device=src_logits.device)
        target_classes[idx] = target_classes_o
        if self.focal_loss:
            onehot = F.one_hot(target_classes, self.num_classes + 1)[..., :-1].to(src_logits.dtype)
            loss_ce = sigmoid_focal_loss(src_logits, onehot, num_boxes, self.focal_alpha) * src_logits.shape[1]
        else:
            loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)
        return {"loss_ce": loss_ce}

    def loss_boxes(self, outputs, targets, indices, num_boxes):
        idx = self._get_src_permutation_idx(indices)
        src_boxes = outputs["pred_boxes"][idx]
        target_boxes = torch.cat([t["boxes"][i] for t, (_, i) in zip(targets, indices)], dim=0)
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none")
        loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes),
                                                       box_cxcywh_to_xyxy(target_boxes)))
        return {"loss_bbox": loss_bbox.sum() / num_boxes, "loss_giou": loss_giou.sum() / num_boxes}

    @staticmethod
    def _get_src_permutation_idx(indices):
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for (src, _) in indices])
        return batch_idx, src_idx

    def forward(self, outputs, targets):
        num_boxes = max(sum(len(t["labels"]) for t in targets), 1)
        losses = {}
        stages = [("", outputs)] + [(f"_{i}", aux) for i, aux in enumerate(outputs.get("aux_outputs", []))]
        for suffix, out in stages:
            indices = self.matcher(out, targets)
            for loss in (self.loss_labels, self.loss_boxes):
                losses.update({k + suffix: v for k, v in loss(out, targets, indices, num_boxes).items()})
        return losses


@torch.no_grad()
def postprocess(outputs, target_sizes, focal_loss=False):
    prob = outputs["pred_logits"].sigmoid() if focal_loss else outputs["pred_logits"].softmax(-1)[..., :-1]
    scores, labels = prob.max(-1)
    img_h, img_w = target_sizes.unbind(1)
    scale = torch.stack([img_w, img_h, img_w, img_h], dim=1)
    boxes = box_cxcywh_to_xyxy(outputs["pred_boxes"]) * scale[:, None, :]
    return [{"scores": s, "labels": lab, "boxes": b} for s, lab, b in zip(scores, labels, boxes)]


def build(args):
    backbone, position_embedding = build_backbone(args)
    model = DETR(backbone, position_embedding, build_transformer(args), num_classes=args.num_classes,
                 num_queries=args.num_queries, aux_loss=args.aux_loss, focal_loss=args.focal_loss)
    weight_dict = {"loss_ce": args.cls_loss_coef, "loss_bbox": args.bbox_loss_coef,
                   "loss_giou": args.giou_loss_coef}
    if args.aux_loss:
        weight_dict.update({f"{k}_{i}": v for i in range(args.dec_layers - 1) for k, v in list(weight_dict.items())})
    criterion = SetCriterion(args.num_classes, build_matcher(args), weight_dict, eos_coef=args.eos_coef,
                             focal_loss=args.focal_loss, focal_alpha=args.focal_alpha)
    return model, criterion
