"""Small layers shared by the ConvNeXt and ResNet models."""

import torch
import torch.nn as nn


def drop_path(x, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True):
    """Drop whole residual paths per sample (stochastic depth); the kept ones are scaled by 1/keep_prob."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True):
        super().__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)


class Mlp(nn.Module):
    """Inverted bottleneck: expand, GELU, (GRN,) project back; Linear on NHWC or 1x1 conv on NCHW."""

    def __init__(self, in_features, hidden_features=None, act_layer=nn.GELU, use_conv=False, use_grn=False,
                 drop=0.0):
        super().__init__()
        hidden_features = hidden_features or in_features
        linear = nn.Conv2d if use_conv else nn.Linear
        extra = dict(kernel_size=1) if use_conv else {}
        self.fc1 = linear(in_features, hidden_features, **extra)
        self.act = act_layer()
        self.drop = nn.Dropout(drop)
        self.norm = GlobalResponseNorm(hidden_features, channels_last=not use_conv) if use_grn else nn.Identity()
        self.fc2 = linear(hidden_features, in_features, **extra)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop(x)
        x = self.norm(x)
        return self.fc2(x)


class GlobalResponseNorm(nn.Module):
    """ConvNeXt-V2 GRN: divide each channel's spatial L2 norm by its mean over channels, learned gain + bias."""

    def __init__(self, dim, eps=1e-6, channels_last=True):
        super().__init__()
        self.eps = eps
        self.spatial_dim = (1, 2) if channels_last else (2, 3)
        self.channel_dim = -1 if channels_last else 1
        self.weight = nn.Parameter(torch.zeros(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        gx = x.norm(p=2, dim=self.spatial_dim, keepdim=True)
        nx = gx / (gx.mean(dim=self.channel_dim, keepdim=True) + self.eps)
        return x + torch.addcmul(self.bias, self.weight, x * nx)
