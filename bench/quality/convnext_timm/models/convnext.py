"""ConvNeXt (Liu et al. 2022) as timm writes it: a patchify stem, four stages of depthwise 7x7 blocks with an
inverted MLP, separate norm + strided-conv downsampling between stages, layer scale and linearly growing drop path."""

from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import trunc_normal_

from .layers import DropPath, Mlp


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channel dim of an NCHW tensor (permute to NHWC, normalise, permute back)."""

    def __init__(self, num_channels, eps=1e-6, affine=True):
        super().__init__(num_channels, eps=eps, elementwise_affine=affine)

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    """dwconv 7x7 -> norm -> pw Linear (4x) -> GELU -> pw Linear -> layer scale -> drop path, residual."""

    def __init__(self, in_chs, out_chs=None, kernel_size=7, stride=1, mlp_ratio=4, conv_mlp=False,
                 ls_init_value=1e-6, use_grn=False, norm_layer=None, drop_path=0.0):
        super().__init__()
        out_chs = out_chs or in_chs
        if norm_layer is None:
            norm_layer = LayerNorm2d if conv_mlp else partial(nn.LayerNorm, eps=1e-6)
        self.use_conv_mlp = conv_mlp
        self.conv_dw = nn.Conv2d(in_chs, out_chs, kernel_size=kernel_size, stride=stride,
                                 padding=kernel_size // 2, groups=in_chs, bias=True)
        self.norm = norm_layer(out_chs)
        hidden = int(mlp_ratio * out_chs)
        self.mlp = Mlp(out_chs, hidden, act_layer=nn.GELU, use_conv=conv_mlp, use_grn=use_grn)
        self.gamma = nn.Parameter(ls_init_value * torch.ones(out_chs)) if ls_init_value is not None else None
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()

    def forward(self, x):
        shortcut = x
        x = self.conv_dw(x)
        if self.use_conv_mlp:
            x = self.norm(x)
            x = self.mlp(x)
        else:
            x = x.permute(0, 2, 3, 1)
            x = self.norm(x)
            x = self.mlp(x)
            x = x.permute(0, 3, 1, 2)
        if self.gamma is not None:
            x = x.mul(self.gamma.reshape(1, -1, 1, 1))
        x = self.drop_path(x) + shortcut
        return x


class ConvNeXtStage(nn.Module):
    def __init__(self, in_chs, out_chs, stride=2, depth=2, drop_path_rates=None, ls_init_value=1.0,
                 conv_mlp=False, kernel_size=7, use_grn=False, norm_layer=None):
        super().__init__()
        if in_chs != out_chs or stride > 1:
            self.downsample = nn.Sequential(
                norm_layer(in_chs),
                nn.Conv2d(in_chs, out_chs, kernel_size=stride, stride=stride, bias=True),
            )
            in_chs = out_chs
        else:
            self.downsample = nn.Identity()
        drop_path_rates = drop_path_rates or [0.0] * depth
        self.blocks = nn.Sequential(*[
            ConvNeXtBlock(in_chs, out_chs, kernel_size=kernel_size, drop_path=drop_path_rates[i],
                          ls_init_value=ls_init_value, conv_mlp=conv_mlp, use_grn=use_grn)
            for i in range(depth)
        ])

    def forward(self, x):
        x = self.downsample(x)
        return self.blocks(x)


class ConvNeXt(nn.Module):
    def __init__(self, in_chans=3, num_classes=1000, global_pool="avg", depths=(3, 3, 9, 3),
                 dims=(96, 192, 384, 768), kernel_size=7, ls_init_value=1e-6, stem_type="patch",
                 patch_size=4, head_init_scale=1.0, head_norm_first=False, conv_mlp=False, use_grn=False,
                 drop_rate=0.0, drop_path_rate=0.0):
        super().__init__()
        self.num_classes = num_classes
        self.drop_rate = drop_rate
        norm_layer = LayerNorm2d
        if stem_type == "patch":
            # non-overlapping 4x4 "patchify" convolution, like a ViT patch embedding
            self.stem = nn.Sequential(
                nn.Conv2d(in_chans, dims[0], kernel_size=patch_size, stride=patch_size),
                norm_layer(dims[0]),
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(in_chans, dims[0], kernel_size=7, stride=2, padding=3),
                norm_layer(dims[0]),
                nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            )
        dp_rates = [x.tolist() for x in torch.linspace(0, drop_path_rate, sum(depths)).split(depths)]
        stages = []
        prev_chs = dims[0]
        for i in range(4):
            stride = 2 if i > 0 else 1
            stages.append(ConvNeXtStage(prev_chs, dims[i], stride=stride, depth=depths[i],
                                        drop_path_rates=dp_rates[i], ls_init_value=ls_init_value,
                                        conv_mlp=conv_mlp, kernel_size=kernel_size, use_grn=use_grn,
                                        norm_layer=norm_layer))
            prev_chs = dims[i]
        self.stages = nn.Sequential(*stages)
        self.num_features = prev_chs
        self.norm_pre = norm_layer(self.num_features) if head_norm_first else nn.Identity()
        self.head = nn.ModuleDict(dict(
            global_pool=nn.AdaptiveAvgPool2d(1),
            norm=nn.Identity() if head_norm_first else norm_layer(self.num_features),
            flatten=nn.Flatten(1),
            drop=nn.Dropout(self.drop_rate),
            fc=nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity(),
        ))
        self.apply(_init_weights)
        if isinstance(self.head.fc, nn.Linear):
            self.head.fc.weight.data.mul_(head_init_scale)
            self.head.fc.bias.data.mul_(head_init_scale)

    @torch.jit.ignore
    def no_weight_decay(self):
        return set()

    def forward_features(self, x):
        x = self.stem(x)
        x = self.stages(x)
        return self.norm_pre(x)

    def forward_head(self, x, pre_logits=False):
        x = self.head.global_pool(x)
        x = self.head.norm(x)
        x = self.head.flatten(x)
        x = self.head.drop(x)
        return x if pre_logits else self.head.fc(x)

    def forward(self, x):
        x = self.forward_features(x)
        return self.forward_head(x)


def _init_weights(module):
    if isinstance(module, (nn.Conv2d, nn.Linear)):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def convnext_tiny(**kwargs):
    return ConvNeXt(depths=(3, 3, 9, 3), dims=(96, 192, 384, 768), **kwargs)


def convnext_small(**kwargs):
    return ConvNeXt(depths=(3, 3, 27, 3), dims=(96, 192, 384, 768), **kwargs)
