"""Mix Transformer (MiT) encoder of SegFormer, as mmseg's backbones/mit.py writes it.

Four stages, each an overlapping patch embedding (a strided convolution wider than its stride, so no
positional table is needed) followed by blocks of efficient self-attention — keys and values come from a
map shrunk by `sr_ratio` — and a Mix-FFN whose 3x3 depthwise convolution leaks position into the tokens.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    return x * random_tensor / keep_prob


class OverlapPatchEmbed(nn.Module):
    def __init__(self, in_channels=3, embed_dims=64, patch_size=7, stride=4):
        super().__init__()
        self.proj = nn.Conv2d(in_channels, embed_dims, kernel_size=patch_size, stride=stride,
                              padding=patch_size // 2)
        self.norm = nn.LayerNorm(embed_dims, eps=1e-6)

    def forward(self, x):
        x = self.proj(x)
        hw_shape = x.shape[2:]
        x = x.flatten(2).transpose(1, 2)
        return self.norm(x), hw_shape


class EfficientMultiheadAttention(nn.Module):
    def __init__(self, embed_dims, num_heads, attn_drop=0.0, proj_drop=0.0, qkv_bias=True, sr_ratio=1):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (embed_dims // num_heads) ** -0.5
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.sr_ratio = sr_ratio
        if sr_ratio > 1:
            self.sr = nn.Conv2d(embed_dims, embed_dims, kernel_size=sr_ratio, stride=sr_ratio)
            self.norm = nn.LayerNorm(embed_dims, eps=1e-6)

    def forward(self, x, hw_shape):
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.num_heads, C // self.num_heads).transpose(1, 2)
        if self.sr_ratio > 1:
            x_ = x.transpose(1, 2).reshape(B, C, *hw_shape)
            x_ = self.sr(x_).reshape(B, C, -1).transpose(1, 2)
            x_ = self.norm(x_)
        else:
            x_ = x
        kv = self.kv(x_).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop if self.training else 0.0,
                                             scale=self.scale)
        out = out.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(out))


class MixFFN(nn.Module):
    def __init__(self, embed_dims, feedforward_channels, ffn_drop=0.0):
        super().__init__()
        self.fc1 = nn.Conv2d(embed_dims, feedforward_channels, kernel_size=1)
        self.dwconv = nn.Conv2d(feedforward_channels, feedforward_channels, kernel_size=3, padding=1,
                                groups=feedforward_channels)
        self.act = nn.GELU()
        self.fc2 = nn.Conv2d(feedforward_channels, embed_dims, kernel_size=1)
        self.drop = nn.Dropout(ffn_drop)

    def forward(self, x, hw_shape):
        B, N, C = x.shape
        x = x.transpose(1, 2).reshape(B, C, *hw_shape)
        x = self.drop(self.act(self.dwconv(self.fc1(x))))
        x = self.drop(self.fc2(x))
        return x.flatten(2).transpose(1, 2)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, embed_dims, num_heads, mlp_ratio=4, drop_rate=0.0, attn_drop_rate=0.0,
                 drop_path_rate=0.0, qkv_bias=True, sr_ratio=1):
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.attn = EfficientMultiheadAttention(embed_dims, num_heads, attn_drop_rate, drop_rate,
                                                qkv_bias=qkv_bias, sr_ratio=sr_ratio)
        self.norm2 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.ffn = MixFFN(embed_dims, embed_dims * mlp_ratio, ffn_drop=drop_rate)
        self.drop_path_rate = drop_path_rate

    def forward(self, x, hw_shape):
        x = x + drop_path(self.attn(self.norm1(x), hw_shape), self.drop_path_rate, self.training)
        x = x + drop_path(self.ffn(self.norm2(x), hw_shape), self.drop_path_rate, self.training)
        return x


class MixVisionTransformer(nn.Module):
    """MiT-B0..B5: `embed_dims` of the first stage times `num_heads`; B2 is depths (3, 4, 6, 3)."""

    def __init__(self, in_channels=3, embed_dims=64, num_stages=4, num_layers=(3, 4, 6, 3),
                 num_heads=(1, 2, 5, 8), patch_sizes=(7, 3, 3, 3), strides=(4, 2, 2, 2),
                 sr_ratios=(8, 4, 2, 1), out_indices=(0, 1, 2, 3), mlp_ratio=4, qkv_bias=True,
                 drop_rate=0.0, attn_drop_rate=0.0, drop_path_rate=0.1, with_cp=False):
        super().__init__()
        self.out_indices = out_indices
        self.with_cp = with_cp
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, sum(num_layers))]
        cur = 0
        self.layers = nn.ModuleList()
        for i, num_layer in enumerate(num_layers):
            dims_i = embed_dims * num_heads[i]
            patch_embed = OverlapPatchEmbed(in_channels, dims_i, patch_sizes[i], strides[i])
            blocks = nn.ModuleList([
                TransformerEncoderLayer(dims_i, num_heads[i], mlp_ratio, drop_rate, attn_drop_rate,
                                        dpr[cur + idx], qkv_bias, sr_ratios[i])
                for idx in range(num_layer)])
            norm = nn.LayerNorm(dims_i, eps=1e-6)
            self.layers.append(nn.ModuleList([patch_embed, blocks, norm]))
            in_channels = dims_i
            cur += num_layer
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
            nn.init.normal_(m.weight, 0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, x):
        outs = []
        for i, (patch_embed, blocks, norm) in enumerate(self.layers):
            x, hw_shape = patch_embed(x)
            for block in blocks:
                if self.with_cp and self.training:
                    x = torch.utils.checkpoint.checkpoint(block, x, hw_shape, use_reentrant=False)
                else:
                    x = block(x, hw_shape)
            x = norm(x)
            x = x.transpose(1, 2).reshape(x.shape[0], -1, *hw_shape)
            if i in self.out_indices:
                outs.append(x)
        return outs
