"""Multi-crop views, block-wise patch masks, and the collate that stacks crops and masks for one step."""

import math
import random

import numpy as np
import torch
from torchvision import transforms

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class GaussianBlur(transforms.RandomApply):
    def __init__(self, p=0.5, radius_min=0.1, radius_max=2.0):
        blur = transforms.GaussianBlur(kernel_size=9, sigma=(radius_min, radius_max))
        super().__init__(transforms=[blur], p=p)


class DataAugmentationDINO:
    def __init__(self, global_crops_scale, local_crops_scale, local_crops_number,
                 global_crops_size=224, local_crops_size=98):
        self.local_crops_number = local_crops_number
        self.geometric_global = transforms.Compose([
            transforms.RandomResizedCrop(global_crops_size, scale=global_crops_scale,
                                         interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.RandomHorizontalFlip(p=0.5)])
        self.geometric_local = transforms.Compose([
            transforms.RandomResizedCrop(local_crops_size, scale=local_crops_scale,
                                         interpolation=transforms.InterpolationMode.BICUBIC),
            transforms.RandomHorizontalFlip(p=0.5)])
        color_jittering = transforms.Compose([
            transforms.RandomApply([transforms.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)],
                                   p=0.8),
            transforms.RandomGrayscale(p=0.2)])
        self.normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
        self.global_transfo1 = transforms.Compose([color_jittering, GaussianBlur(p=1.0), self.normalize])
        self.global_transfo2 = transforms.Compose([
            color_jittering, GaussianBlur(p=0.1), transforms.RandomSolarize(threshold=128, p=0.2), self.normalize])
        self.local_transfo = transforms.Compose([color_jittering, GaussianBlur(p=0.5), self.normalize])

    def __call__(self, image):
        global_crop_1 = self.global_transfo1(self.geometric_global(image))
        global_crop_2 = self.global_transfo2(self.geometric_global(image))
        local_crops = [self.local_transfo(self.geometric_local(image)) for _ in range(self.local_crops_number)]
        return {"global_crops": [global_crop_1, global_crop_2], "local_crops": local_crops}


class MaskingGenerator:
    def __init__(self, input_size, num_masking_patches=None, min_num_patches=4, max_num_patches=None,
                 min_aspect=0.3, max_aspect=None):
        self.height, self.width = input_size
        self.num_patches = self.height * self.width
        self.num_masking_patches = num_masking_patches
        self.min_num_patches = min_num_patches
        self.max_num_patches = num_masking_patches if max_num_patches is None else max_num_patches
        max_aspect = max_aspect or 1 / min_aspect
        self.log_aspect_ratio = (math.log(min_aspect), math.log(max_aspect))

    def _mask(self, mask, max_mask_patches):
        delta = 0
        for _ in range(10):
            target_area = random.uniform(self.min_num_patches, max_mask_patches)
            aspect_ratio = math.exp(random.uniform(*self.log_aspect_ratio))
            h = int(round(math.sqrt(target_area * aspect_ratio)))
            w = int(round(math.sqrt(target_area / aspect_ratio)))
            if w < self.width and h < self.height:
                top = random.randint(0, self.height - h)
                left = random.randint(0, self.width - w)
                num_masked = mask[top: top + h, left: left + w].sum()
                if 0 < h * w - num_masked <= max_mask_patches:
                    mask[top: top + h, left: left + w] = 1
                    delta += h * w - num_masked
                if delta > 0:
                    break
        return delta

    def __call__(self, num_masking_patches=0):
        mask = np.zeros((self.height, self.width), dtype=bool)
        mask_count = 0
        while mask_count < num_masking_patches:
            delta = self._mask(mask, min(num_masking_patches - mask_count, self.max_num_patches))
            if delta == 0:
                break
            mask_count += delta
        return mask


def collate_data_and_cast(samples_list, mask_ratio_tuple, mask_probability, dtype, n_tokens, mask_generator):
    n_global_crops = len(samples_list[0]["global_crops"])
    n_local_crops = len(samples_list[0]["local_crops"])
    collated_global_crops = torch.stack([s["global_crops"][i] for i in range(n_global_crops) for s in samples_list])
    collated_local_crops = torch.stack([s["local_crops"][i] for i in range(n_local_crops) for s in samples_list])
    B = len(collated_global_crops)
    n_samples_masked = int(B * mask_probability)
    probs = torch.linspace(*mask_ratio_tuple, n_samples_masked + 1)
    masks_list = []
    for i in range(n_samples_masked):
        masks_list.append(torch.BoolTensor(mask_generator(int(n_tokens * random.uniform(probs[i], probs[i + 1])))))
    for _ in range(n_samples_masked, B):
        masks_list.append(torch.BoolTensor(mask_generator(0)))
    random.shuffle(masks_list)
    collated_masks = torch.stack(masks_list).flatten(1)
    mask_indices_list = collated_masks.flatten().nonzero().flatten()
    masks_weight = (1 / collated_masks.sum(-1).clamp(min=1.0)).unsqueeze(-1).expand_as(collated_masks)[collated_masks]
    return {
        "collated_global_crops": collated_global_crops.to(dtype),
        "collated_local_crops": collated_local_crops.to(dtype),
        "collated_masks": collated_masks,
        "mask_indices_list": mask_indices_list,
        "masks_weight": masks_weight,
        "n_masked_patches": torch.full((1,), fill_value=mask_indices_list.shape[0], dtype=torch.long),
    }
