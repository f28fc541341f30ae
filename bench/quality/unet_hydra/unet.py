"""ADM-style UNet (Dhariwal & Nichol) for class-conditional 64x64 ImageNet, trimmed to what we train."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def zero_module(module):
    """Zero out the parameters of a module and return it."""
    for p in module.parameters():
        p.detach().zero_()
    return module


def normalization(channels):
    return nn.GroupNorm(32, channels)


def timestep_embedding(timesteps, dim, max_period=10000):
    """Sinusoidal embeddings of the (possibly fractional) timesteps, one row per batch element."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half).to(timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    embedding = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        embedding = torch.cat([embedding, torch.zeros_like(embedding[:, :1])], dim=-1)
    return embedding


class Downsample(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.op = nn.Conv2d(channels, channels, 3, stride=2, padding=1)

    def forward(self, x):
        return self.op(x)


class Upsample(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        return self.conv(x)


class ResBlock(nn.Module):
    def __init__(self, channels, emb_channels, dropout, out_channels=None,
                 use_scale_shift_norm=True, up=False, down=False):
        super().__init__()
        self.out_channels = out_channels or channels
        self.use_scale_shift_norm = use_scale_shift_norm
        self.in_layers = nn.Sequential(normalization(channels), nn.SiLU(),
                                       nn.Conv2d(channels, self.out_channels, 3, padding=1))
        self.updown = up or down
        self.h_upd = Upsample(channels) if up else Downsample(channels) if down else nn.Identity()
        self.x_upd = Upsample(channels) if up else Downsample(channels) if down else nn.Identity()
        self.emb_layers = nn.Sequential(
            nn.SiLU(), nn.Linear(emb_channels, 2 * self.out_channels if use_scale_shift_norm else self.out_channels))
        self.out_norm = normalization(self.out_channels)
        self.out_layers = nn.Sequential(nn.SiLU(), nn.Dropout(p=dropout),
                                        zero_module(nn.Conv2d(self.out_channels, self.out_channels, 3, padding=1)))
        self.skip_connection = (nn.Identity() if self.out_channels == channels
                                else nn.Conv2d(channels, self.out_channels, 1))

    def forward(self, x, emb):
        h = self.in_layers[:-1](x)
        if self.updown:
            h, x = self.h_upd(h), self.x_upd(x)
        h = self.in_layers[-1](h)
        emb_out = self.emb_layers(emb).type(h.dtype)[..., None, None]
        if self.use_scale_shift_norm:
            scale, shift = emb_out.chunk(2, dim=1)
            h = self.out_norm(h) * (1 + scale) + shift
        else:
            h = self.out_norm(h + emb_out)
        h = self.out_layers(h)
        return self.skip_connection(x) + h


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_head_channels=64):
        super().__init__()
        self.num_heads = channels // num_head_channels
        self.norm = normalization(channels)
        self.qkv = nn.Conv1d(channels, channels * 3, 1)
        self.proj_out = zero_module(nn.Conv1d(channels, channels, 1))

    def forward(self, x):
        b, c, *spatial = x.shape
        qkv = self.qkv(self.norm(x).reshape(b, c, -1))
        q, k, v = qkv.reshape(b * self.num_heads, 3 * c // self.num_heads, -1).chunk(3, dim=1)
        scale = 1 / math.sqrt(math.sqrt(c // self.num_heads))
        weight = torch.einsum("bct,bcs->bts", q * scale, k * scale).softmax(dim=-1)
        h = torch.einsum("bts,bcs->bct", weight, v).reshape(b, c, -1)
        return x + self.proj_out(h).reshape(b, c, *spatial)


class UNetModel(nn.Module):
    def __init__(self, in_channels, model_channels, out_channels, num_res_blocks, attention_resolutions,
                 channel_mult=(1, 2, 3, 4), num_head_channels=64, dropout=0.0, num_classes=None,
                 use_scale_shift_norm=True, resblock_updown=True, image_size=64):
        super().__init__()
        self.model_channels = model_channels
        time_embed_dim = model_channels * 4
        self.time_embed = nn.Sequential(nn.Linear(model_channels, time_embed_dim), nn.SiLU(),
                                        nn.Linear(time_embed_dim, time_embed_dim))
        self.num_classes = num_classes
        if num_classes is not None:
            # one extra row: the "null" label used when the class is dropped for guidance
            self.label_emb = nn.Embedding(num_classes + 1, time_embed_dim)

        self.input_blocks = nn.ModuleList([nn.Conv2d(in_channels, model_channels, 3, padding=1)])
        skip_chans, ch, resolution = [model_channels], model_channels, image_size
        for level, mult in enumerate(channel_mult):
            for _ in range(num_res_blocks):
                layers = [ResBlock(ch, time_embed_dim, dropout, mult * model_channels, use_scale_shift_norm)]
                ch = mult * model_channels
                if resolution in attention_resolutions:
                    layers.append(AttentionBlock(ch, num_head_channels))
                self.input_blocks.append(nn.ModuleList(layers))
                skip_chans.append(ch)
            if level != len(channel_mult) - 1:
                down = (ResBlock(ch, time_embed_dim, dropout, ch, use_scale_shift_norm, down=True)
                        if resblock_updown else Downsample(ch))
                self.input_blocks.append(nn.ModuleList([down]))
                skip_chans.append(ch)
                resolution //= 2

        self.middle_block = nn.ModuleList([
            ResBlock(ch, time_embed_dim, dropout, ch, use_scale_shift_norm),
            AttentionBlock(ch, num_head_channels),
            ResBlock(ch, time_embed_dim, dropout, ch, use_scale_shift_norm),
        ])

        self.output_blocks = nn.ModuleList([])
        for level, mult in list(enumerate(channel_mult))[::-1]:
            for i in range(num_res_blocks + 1):
                layers = [ResBlock(ch + skip_chans.pop(), time_embed_dim, dropout, mult * model_channels,
                                   use_scale_shift_norm)]
                ch = mult * model_channels
                if resolution in attention_resolutions:
                    layers.append(AttentionBlock(ch, num_head_channels))
                if level and i == num_res_blocks:
                    layers.append(ResBlock(ch, time_embed_dim, dropout, ch, use_scale_shift_norm, up=True)
                                  if resblock_updown else Upsample(ch))
                    resolution *= 2
                self.output_blocks.append(nn.ModuleList(layers))

        self.out = nn.Sequential(normalization(ch), nn.SiLU(),
                                 zero_module(nn.Conv2d(model_channels, out_channels, 3, padding=1)))

    def forward(self, x, timesteps, y=None):
        emb = self.time_embed(timestep_embedding(timesteps, self.model_channels))
        if self.num_classes is not None:
            emb = emb + self.label_emb(y)
        hs, h = [], x
        for module in self.input_blocks:
            h = _apply(module, h, emb)
            hs.append(h)
        h = _apply(self.middle_block, h, emb)
        for module in self.output_blocks:
            h = _apply(module, torch.cat([h, hs.pop()], dim=1), emb)
        return self.out(h)


def _apply(layers, h, emb):
    for layer in layers if isinstance(layers, nn.ModuleList) else [layers]:
        h = layer(h, emb) if isinstance(layer, ResBlock) else layer(h)
    return h
