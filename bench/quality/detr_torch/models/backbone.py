"""ResNet backbone with frozen BatchNorm and sine position encodings, as DETR builds it."""

import math

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torchvision.models._utils import IntermediateLayerGetter


class FrozenBatchNorm2d(nn.Module):
    """BatchNorm2d whose batch statistics and affine parameters are fixed buffers.

    Detection batches hold two images per GPU, far too few for batch statistics; the ImageNet ones are kept.
    """

    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.register_buffer("weight", torch.ones(n))
        self.register_buffer("bias", torch.zeros(n))
        self.register_buffer("running_mean", torch.zeros(n))
        self.register_buffer("running_var", torch.ones(n))
        self.eps = eps

    def forward(self, x):
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + self.eps).rsqrt()
        bias = b - rm * scale
        return x * scale + bias


class Backbone(nn.Module):
    def __init__(self, name, train_backbone, return_interm_layers, dilation):
        super().__init__()
        backbone = getattr(torchvision.models, name)(
            replace_stride_with_dilation=[False, False, dilation],
            weights="IMAGENET1K_V1", norm_layer=FrozenBatchNorm2d)
        for layer_name, parameter in backbone.named_parameters():
            if not train_backbone or ("layer2" not in layer_name and "layer3" not in layer_name
                                      and "layer4" not in layer_name):
                parameter.requires_grad_(False)
        if return_interm_layers:
            return_layers = {"layer2": "0", "layer3": "1", "layer4": "2"}
            self.strides, self.num_channels = [8, 16, 32], [512, 1024, 2048]
        else:
            return_layers = {"layer4": "0"}
            self.strides, self.num_channels = [32], [2048]
        self.body = IntermediateLayerGetter(backbone, return_layers=return_layers)

    def forward(self, images, pixel_mask):
        features = {}
        for key, x in self.body(images).items():
            mask = F.interpolate(pixel_mask[None].float(), size=x.shape[-2:]).to(torch.bool)[0]
            features[key] = (x, mask)
        return features


class PositionEmbeddingSine(nn.Module):
    """Sine/cosine of the normalised row and column of every feature cell, half the channels each."""

    def __init__(self, num_pos_feats=128, temperature=10000, normalize=True, scale=2 * math.pi):
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.normalize = normalize
        self.scale = scale

    def forward(self, mask):
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        if self.normalize:
            eps = 1e-6
            y_embed = (y_embed - 0.5) / (y_embed[:, -1:, :] + eps) * self.scale
            x_embed = (x_embed - 0.5) / (x_embed[:, :, -1:] + eps) * self.scale
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=mask.device)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


def build_backbone(args):
    train_backbone = args.lr_backbone > 0
    backbone = Backbone(args.backbone, train_backbone, args.masks, args.dilation)
    position_embedding = PositionEmbeddingSine(args.hidden_dim // 2, temperature=args.pe_temperature)
    return backbone, position_embedding
