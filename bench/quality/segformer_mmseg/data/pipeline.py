"""Training and test pipelines for ADE20K / Cityscapes (mmseg's datasets/transforms), on numpy arrays:
img HxWx3 uint8 (BGR as read by cv2), seg HxW uint8 with 255 for "ignore"."""
import cv2
import numpy as np


def load_annotations(seg, reduce_zero_label=True):
    """ADE20K's label 0 is "other": it becomes 255 and the 150 classes move down by one."""
    seg = seg.astype(np.int64)
    if reduce_zero_label:
        seg[seg == 0] = 256
        seg = seg - 1
        seg[seg == 255] = 255
    return seg.astype(np.uint8)


class RandomResize:
    """Rescale to `scale` times a ratio drawn from `ratio_range`, keeping the aspect ratio."""

    def __init__(self, scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True):
        self.scale = scale
        self.ratio_range = ratio_range
        self.keep_ratio = keep_ratio

    def __call__(self, img, seg):
        ratio = np.random.uniform(*self.ratio_range)
        long_edge, short_edge = int(max(self.scale) * ratio), int(min(self.scale) * ratio)
        h, w = img.shape[:2]
        factor = min(long_edge / max(h, w), short_edge / min(h, w))
        new_w, new_h = int(w * factor + 0.5), int(h * factor + 0.5)
        img = cv2.resize(img, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
        seg = cv2.resize(seg, (new_w, new_h), interpolation=cv2.INTER_NEAREST)
        return img, seg


class RandomCrop:
    """A crop of `crop_size`; retried up to 10 times while one class covers more than `cat_max_ratio`."""

    def __init__(self, crop_size=(512, 512), cat_max_ratio=0.75, ignore_index=255):
        self.crop_size = crop_size
        self.cat_max_ratio = cat_max_ratio
        self.ignore_index = ignore_index

    def _bbox(self, img):
        margin_h = max(img.shape[0] - self.crop_size[0], 0)
        margin_w = max(img.shape[1] - self.crop_size[1], 0)
        y1, x1 = np.random.randint(0, margin_h + 1), np.random.randint(0, margin_w + 1)
        return y1, y1 + self.crop_size[0], x1, x1 + self.crop_size[1]

    def __call__(self, img, seg):
        y1, y2, x1, x2 = self._bbox(img)
        if self.cat_max_ratio < 1.0:
            for _ in range(10):
                labels, cnt = np.unique(seg[y1:y2, x1:x2], return_counts=True)
                cnt = cnt[labels != self.ignore_index]
                if len(cnt) > 1 and np.max(cnt) / np.sum(cnt) < self.cat_max_ratio:
                    break
                y1, y2, x1, x2 = self._bbox(img)
        return img[y1:y2, x1:x2], seg[y1:y2, x1:x2]


class PhotoMetricDistortion:
    """Brightness, contrast (before or after the saturation/hue pair, at random), saturation, hue."""

    def __init__(self, brightness_delta=32, contrast_range=(0.5, 1.5), saturation_range=(0.5, 1.5), hue_delta=18):
        self.brightness_delta = brightness_delta
        self.contrast_lower, self.contrast_upper = contrast_range
        self.saturation_lower, self.saturation_upper = saturation_range
        self.hue_delta = hue_delta

    def __call__(self, img, seg):
        img = img.astype(np.float32)
        if np.random.randint(2):
            img += np.random.uniform(-self.brightness_delta, self.brightness_delta)
        mode = np.random.randint(2)
        if mode == 1 and np.random.randint(2):
            img *= np.random.uniform(self.contrast_lower, self.contrast_upper)
        hsv = cv2.cvtColor(np.clip(img, 0, 255).astype(np.uint8), cv2.COLOR_BGR2HSV).astype(np.float32)
        if np.random.randint(2):
            hsv[..., 1] *= np.random.uniform(self.saturation_lower, self.saturation_upper)
        if np.random.randint(2):
            hsv[..., 0] = (hsv[..., 0] + np.random.randint(-self.hue_delta, self.hue_delta)) % 180
        img = cv2.cvtColor(np.clip(hsv, 0, 255).astype(np.uint8), cv2.COLOR_HSV2BGR).astype(np.float32)
        if mode == 0 and np.random.randint(2):
            img *= np.random.uniform(self.contrast_lower, self.contrast_upper)
        return np.clip(img, 0, 255), seg


def random_flip(img, seg, prob=0.5):
    if np.random.rand() < prob:
        img, seg = img[:, ::-1], seg[:, ::-1]
    return img, seg


def pad_to_crop(img, seg, size=(512, 512), pad_val=0, seg_pad_val=255):
    """Pad on the bottom/right so every image is `size`; padded labels are ignored by the loss."""
    pad_h, pad_w = max(size[0] - img.shape[0], 0), max(size[1] - img.shape[1], 0)
    img = cv2.copyMakeBorder(img, 0, pad_h, 0, pad_w, cv2.BORDER_CONSTANT, value=pad_val)
    seg = cv2.copyMakeBorder(seg, 0, pad_h, 0, pad_w, cv2.BORDER_CONSTANT, value=seg_pad_val)
    return img, seg


def normalize(img, mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), to_rgb=True):
    if to_rgb:
        img = img[..., ::-1]
    return ((img - np.array(mean)) / np.array(std)).transpose(2, 0, 1).astype(np.float32)


def train_pipeline(img, seg, cfg):
    seg = load_annotations(seg, cfg["reduce_zero_label"])
    img, seg = RandomResize(cfg["img_scale"], cfg["ratio_range"])(img, seg)
    img, seg = RandomCrop(cfg["crop_size"], cfg["cat_max_ratio"])(img, seg)
    img, seg = random_flip(img, seg, cfg["flip_prob"])
    img, seg = PhotoMetricDistortion()(img, seg)
    img, seg = pad_to_crop(img, seg, cfg["crop_size"])
    return normalize(img), seg
