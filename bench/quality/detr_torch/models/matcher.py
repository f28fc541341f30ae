"""Box utilities and the one-to-one assignment of predictions to ground-truth objects."""

import torch
from scipy.optimize import linear_sum_assignment
from torch import nn
from torchvision.ops.boxes import box_area


def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([x_c - 0.5 * w, y_c - 0.5 * h, x_c + 0.5 * w, y_c + 0.5 * h], dim=-1)


def box_xyxy_to_cxcywh(x):
    x0, y0, x1, y1 = x.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)


def generalized_box_iou(boxes1, boxes2):
    """IoU minus the share of the smallest enclosing box that neither box covers, for every pair."""
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    union = area1[:, None] + area2 - inter
    iou = inter / union
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    area = (rb - lt).clamp(min=0).prod(-1)
    return iou - (area - union) / area


class HungarianMatcher(nn.Module):
    """Each target gets exactly one query: the assignment of least total class + L1 + GIoU cost."""

    def __init__(self, cost_class=1.0, cost_bbox=5.0, cost_giou=2.0, focal_alpha=0.25, use_focal=False):
        super().__init__()
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou
        self.focal_alpha, self.use_focal = focal_alpha, use_focal

    @torch.no_grad()
    def forward(self, outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]
        out_bbox = outputs["pred_boxes"].flatten(0, 1)
        tgt_ids = torch.cat([t["labels"] for t in targets])
        tgt_bbox = torch.cat([t["boxes"] for t in targets])
        if self.use_focal:
            prob = outputs["pred_logits"].flatten(0, 1).sigmoid()
            neg = (1 - self.focal_alpha) * prob ** 2 * -(1 - prob + 1e-8).log()
            pos = self.focal_alpha * (1 - prob) ** 2 * -(prob + 1e-8).log()
            cost_class = pos[:, tgt_ids] - neg[:, tgt_ids]
        else:
            cost_class = -outputs["pred_logits"].flatten(0, 1).softmax(-1)[:, tgt_ids]
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
        cost = self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou
        cost = cost.view(bs, num_queries, -1).cpu()
        sizes = [len(t["boxes"]) for t in targets]
        indices = [linear_sum_assignment(c[i]) for i, c in enumerate(cost.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64)) for i, j in indices]


def build_matcher(args):
    return HungarianMatcher(cost_class=args.set_cost_class, cost_bbox=args.set_cost_bbox,
                            cost_giou=args.set_cost_giou, focal_alpha=args.focal_alpha, use_focal=args.focal_loss)
