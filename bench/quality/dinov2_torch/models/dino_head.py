"""Projection head shared by the image-level and patch-level objectives: an MLP to a bottleneck,
L2-normalised, then a weight-normalised linear layer onto the prototypes."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import trunc_normal_
from torch.nn.utils import weight_norm


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim=65536, nlayers=3, hidden_dim=2048, bottleneck_dim=256,
                 use_bn=False, norm_last_layer=True):
        super().__init__()
        layers = [nn.Linear(in_dim, hidden_dim)]
        for _ in range(nlayers - 2):
            if use_bn:
                layers.append(nn.BatchNorm1d(hidden_dim))
            layers += [nn.GELU(), nn.Linear(hidden_dim, hidden_dim)]
        if use_bn:
            layers.append(nn.BatchNorm1d(hidden_dim))
        layers += [nn.GELU(), nn.Linear(hidden_dim, bottleneck_dim)]
        self.mlp = nn.Sequential(*layers)
        self.apply(self._init_weights)
        self.last_layer = weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        if norm_last_layer:
            self.last_layer.weight_g.requires_grad = False

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.mlp(x)
        eps = 1e-6 if x.dtype == torch.float16 else 1e-12
        x = F.normalize(x, dim=-1, p=2, eps=eps)
        return self.last_layer(x)


def cancel_last_layer_gradients(head, epoch, freeze_last_layer_epochs):
    if epoch >= freeze_last_layer_epochs:
        return
    for name, p in head.named_parameters():
        if "last_layer" in name:
            p.grad = None
