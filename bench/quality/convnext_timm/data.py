"""ImageNet input pipeline: timm-style train/eval transforms, repeated augmentation, Mixup/CutMix targets."""

import math

import numpy as np
import torch
from timm.data.auto_augment import rand_augment_transform
from timm.data.random_erasing import RandomErasing
from torch.utils.data import DataLoader, Sampler
from torchvision import transforms

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)


def create_transform(img_size=224, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), hflip=0.5, auto_augment=None,
                     interpolation="bicubic", re_prob=0.0, re_mode="pixel", re_count=1):
    interp = transforms.InterpolationMode(interpolation)
    tfl = [transforms.RandomResizedCrop(img_size, scale=scale, ratio=ratio, interpolation=interp)]
    if hflip > 0.0:
        tfl.append(transforms.RandomHorizontalFlip(p=hflip))
    if auto_augment and auto_augment.startswith("rand"):
        aa_params = dict(translate_const=int(img_size * 0.45),
                         img_mean=tuple(round(255 * x) for x in IMAGENET_DEFAULT_MEAN))
        tfl.append(rand_augment_transform(auto_augment, aa_params))
    tfl += [transforms.ToTensor(), transforms.Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)]
    if re_prob > 0.0:
        tfl.append(RandomErasing(re_prob, mode=re_mode, max_count=re_count, device="cpu"))
    return transforms.Compose(tfl)


def create_eval_transform(img_size=224, crop_pct=0.875, interpolation="bicubic"):
    """Resize the short side to img_size / crop_pct, then center-crop img_size."""
    scale_size = math.floor(img_size / crop_pct)
    interp = transforms.InterpolationMode(interpolation)
    return transforms.Compose([
        transforms.Resize(scale_size, interpolation=interp),
        transforms.CenterCrop(img_size),
        transforms.ToTensor(),
        transforms.Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD),
    ])


class RepeatAugSampler(Sampler):
    """Each index `num_repeats` times per epoch, spread over ranks so each copy gets its own augmentation."""

    def __init__(self, dataset, num_replicas, rank, shuffle=True, num_repeats=3, seed=0):
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.num_repeats, self.seed, self.epoch = shuffle, num_repeats, seed, 0
        self.num_samples = int(math.ceil(len(dataset) * num_repeats / num_replicas))
        self.total_size = self.num_samples * num_replicas
        self.num_selected_samples = int(math.floor(len(dataset) // 256 * 256 / num_replicas))

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        indices = torch.randperm(len(self.dataset), generator=g) if self.shuffle else torch.arange(len(self.dataset))
        indices = torch.repeat_interleave(indices, repeats=self.num_repeats, dim=0).tolist()
        indices += indices[: self.total_size - len(indices)]
        return iter(indices[self.rank:self.total_size:self.num_replicas][: self.num_selected_samples])

    def __len__(self):
        return self.num_selected_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


def one_hot(x, num_classes, on_value=1.0, off_value=0.0):
    return torch.full((x.size(0), num_classes), off_value, device=x.device).scatter_(1, x.long().view(-1, 1), on_value)


def mixup_target(target, num_classes, lam=1.0, smoothing=0.0):
    off_value = smoothing / num_classes
    on_value = 1.0 - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value, off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value, off_value)
    return y1 * lam + y2 * (1.0 - lam)


def rand_bbox(img_shape, lam):
    """A box covering (1 - lam) of the image, centre uniform; clipped at the borders."""
    img_h, img_w = img_shape[-2:]
    cut_rat = np.sqrt(1 - lam)
    cut_h, cut_w = int(img_h * cut_rat), int(img_w * cut_rat)
    cy, cx = np.random.randint(img_h), np.random.randint(img_w)
    yl, yh = np.clip(cy - cut_h // 2, 0, img_h), np.clip(cy + cut_h // 2, 0, img_h)
    xl, xh = np.clip(cx - cut_w // 2, 0, img_w), np.clip(cx + cut_w // 2, 0, img_w)
    return yl, yh, xl, xh


class Mixup:
    """Batch-wise Mixup or CutMix (chosen per batch with switch_prob), soft targets with label smoothing."""

    def __init__(self, mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, label_smoothing=0.1,
                 num_classes=1000, correct_lam=True):
        self.mixup_alpha, self.cutmix_alpha = mixup_alpha, cutmix_alpha
        self.mix_prob, self.switch_prob = prob, switch_prob
        self.label_smoothing, self.num_classes, self.correct_lam = label_smoothing, num_classes, correct_lam
        self.mixup_enabled = True

    def _params(self):
        lam, use_cutmix = 1.0, False
        if self.mixup_enabled and np.random.rand() < self.mix_prob:
            if self.mixup_alpha > 0.0 and self.cutmix_alpha > 0.0:
                use_cutmix = np.random.rand() < self.switch_prob
                alpha = self.cutmix_alpha if use_cutmix else self.mixup_alpha
            else:
                use_cutmix = self.cutmix_alpha > 0.0
                alpha = self.cutmix_alpha if use_cutmix else self.mixup_alpha
            lam = float(np.random.beta(alpha, alpha))
        return lam, use_cutmix

    def __call__(self, x, target):
        assert len(x) % 2 == 0, "Batch size should be even when using this"
        lam, use_cutmix = self._params()
        if lam != 1.0:
            if use_cutmix:
                yl, yh, xl, xh = rand_bbox(x.shape, lam)
                x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
                if self.correct_lam:
                    lam = 1.0 - (yh - yl) * (xh - xl) / float(x.shape[-2] * x.shape[-1])
            else:
                x_flipped = x.flip(0).mul_(1.0 - lam)
                x.mul_(lam).add_(x_flipped)
        return x, mixup_target(target, self.num_classes, lam, self.label_smoothing)


def create_loader(dataset, batch_size, is_training, num_workers=8, sampler=None):
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, sampler=sampler, num_workers=num_workers,
                      pin_memory=True, drop_last=is_training, persistent_workers=True)
