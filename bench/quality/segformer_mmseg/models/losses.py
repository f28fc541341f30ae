"""Losses of the decode heads: pixel-wise cross entropy that skips the 255 label, an OHEM pixel sampler,
and Dice / Lovász-softmax as options (mmseg's losses/ and structures/sampler/)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CrossEntropyLoss(nn.Module):
    def __init__(self, class_weight=None, loss_weight=1.0, ignore_index=255, avg_non_ignore=True,
                 label_smoothing=0.0):
        super().__init__()
        self.class_weight = torch.tensor(class_weight) if class_weight is not None else None
        self.loss_weight = loss_weight
        self.ignore_index = ignore_index
        self.avg_non_ignore = avg_non_ignore
        self.label_smoothing = label_smoothing

    def forward(self, logits, label, pixel_weight=None):
        weight = self.class_weight.to(logits) if self.class_weight is not None else None
        loss = F.cross_entropy(logits, label, weight=weight, ignore_index=self.ignore_index, reduction="none",
                               label_smoothing=self.label_smoothing)
        if pixel_weight is not None:
            loss = loss * pixel_weight
        if self.avg_non_ignore:
            denom = (label != self.ignore_index).sum().clamp(min=1)
        else:
            denom = label.numel()
        return self.loss_weight * loss.sum() / denom


class OHEMPixelSampler:
    """Online hard example mining: keep the pixels whose probability of the true class is below `thresh`,
    but never fewer than `min_kept` of them."""

    def __init__(self, thresh=0.7, min_kept=100000, ignore_index=255):
        self.thresh = thresh
        self.min_kept = min_kept
        self.ignore_index = ignore_index

    @torch.no_grad()
    def sample(self, logits, label):
        weight = torch.zeros_like(label, dtype=logits.dtype)
        valid = label != self.ignore_index
        prob = logits.softmax(dim=1)
        tmp = label.clone()
        tmp[~valid] = 0
        true_prob = prob.gather(1, tmp.unsqueeze(1)).squeeze(1)[valid]
        sorted_prob, _ = true_prob.sort()
        if sorted_prob.numel() > 0:
            min_threshold = sorted_prob[min(self.min_kept, sorted_prob.numel() - 1)]
            threshold = max(min_threshold, self.thresh)
            weight[valid] = (true_prob < threshold).to(weight)
        return weight


class DiceLoss(nn.Module):
    def __init__(self, smooth=1.0, exponent=2, loss_weight=1.0, ignore_index=255):
        super().__init__()
        self.smooth = smooth
        self.exponent = exponent
        self.loss_weight = loss_weight
        self.ignore_index = ignore_index

    def forward(self, logits, label):
        num_classes = logits.shape[1]
        prob = logits.softmax(dim=1)
        valid = (label != self.ignore_index).unsqueeze(1)
        one_hot = F.one_hot(label.clamp(0, num_classes - 1), num_classes).permute(0, 3, 1, 2)
        prob, one_hot = prob * valid, one_hot * valid
        inter = (prob * one_hot).sum(dim=(0, 2, 3))
        union = prob.pow(self.exponent).sum(dim=(0, 2, 3)) + one_hot.pow(self.exponent).sum(dim=(0, 2, 3))
        dice = (2 * inter + self.smooth) / (union + self.smooth)
        return self.loss_weight * (1 - dice).mean()


def lovasz_grad(gt_sorted):
    gts = gt_sorted.sum()
    intersection = gts - gt_sorted.float().cumsum(0)
    union = gts + (1 - gt_sorted).float().cumsum(0)
    jaccard = 1.0 - intersection / union
    jaccard[1:] = jaccard[1:] - jaccard[:-1]
    return jaccard


def lovasz_softmax(logits, label, ignore_index=255, classes="present"):
    prob = logits.softmax(dim=1).permute(0, 2, 3, 1).reshape(-1, logits.shape[1])
    label = label.reshape(-1)
    keep = label != ignore_index
    prob, label = prob[keep], label[keep]
    losses = []
    for c in range(prob.shape[1]):
        fg = (label == c).float()
        if classes == "present" and fg.sum() == 0:
            continue
        errors = (fg - prob[:, c]).abs()
        errors_sorted, perm = torch.sort(errors, descending=True)
        losses.append(torch.dot(errors_sorted, lovasz_grad(fg[perm])))
    return torch.stack(losses).mean() if losses else prob.sum() * 0
