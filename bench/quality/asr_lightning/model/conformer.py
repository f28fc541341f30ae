"""Conformer encoder (Gulati et al., 2020) as NeMo and ESPnet write it, for CTC."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvSubsampling(nn.Module):
    """Two 3x3 convolutions with stride 2: 4x fewer frames before the encoder."""

    def __init__(self, n_mels, d_model, channels=256, subsampling_factor=4):
        super().__init__()
        assert subsampling_factor == 4
        self.conv = nn.Sequential(
            nn.Conv2d(1, channels, kernel_size=3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(channels, channels, kernel_size=3, stride=2, padding=1), nn.ReLU())
        self.out = nn.Linear(channels * math.ceil(n_mels / 4), d_model)

    def forward(self, x, lengths):
        x = self.conv(x.transpose(1, 2).unsqueeze(1))
        b, c, t, f = x.shape
        x = self.out(x.transpose(1, 2).reshape(b, t, c * f))
        lengths = (lengths + 1) // 2
        lengths = (lengths + 1) // 2
        return x, lengths


class RelPositionalEncoding(nn.Module):
    """Sinusoidal encodings of relative distances -(T-1)..(T-1), for Transformer-XL style attention."""

    def __init__(self, d_model, max_len=5000, xscale=True, dropout_emb=0.0):
        super().__init__()
        self.d_model = d_model
        self.xscale = math.sqrt(d_model) if xscale else None
        self.dropout = nn.Dropout(dropout_emb)
        positions = torch.arange(max_len - 1, -max_len, -1.0).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2.0) * -(math.log(10000.0) / d_model))
        pe = torch.zeros(positions.size(0), d_model)
        pe[:, 0::2] = torch.sin(positions * div_term)
        pe[:, 1::2] = torch.cos(positions * div_term)
        self.register_buffer("pe", pe.unsqueeze(0), persistent=False)

    def forward(self, x):
        if self.xscale:
            x = x * self.xscale
        center = self.pe.size(1) // 2
        pos_emb = self.pe[:, center - x.size(1) + 1:center + x.size(1)]
        return self.dropout(x), pos_emb


class RelPositionMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout_att=0.1):
        super().__init__()
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.linear_qkv = nn.Linear(d_model, 3 * d_model)
        self.linear_pos = nn.Linear(d_model, d_model, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(n_heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.zeros(n_heads, self.d_k))
        self.linear_out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout_att)

    @staticmethod
    def rel_shift(x):
        b, h, t, n = x.shape
        x = F.pad(x, (1, 0)).view(b, h, n + 1, t)
        return x[:, :, 1:].view(b, h, t, n)[..., : n // 2 + 1]

    def forward(self, x, pos_emb, mask):
        b, t, _ = x.shape
        q, k, v = self.linear_qkv(x).view(b, t, 3, self.n_heads, self.d_k).unbind(2)
        p = self.linear_pos(pos_emb).view(1, -1, self.n_heads, self.d_k).transpose(1, 2)
        ac = torch.einsum("bthd,bshd->bhts", q + self.pos_bias_u, k)
        bd = self.rel_shift(torch.einsum("bthd,xhsd->bhts", q + self.pos_bias_v, p))
        scores = (ac + bd[..., :t]) / math.sqrt(self.d_k)
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        attn = self.dropout(scores.softmax(-1))
        out = torch.einsum("bhts,bshd->bthd", attn, v).reshape(b, t, -1)
        return self.linear_out(out)


class ConformerFeedForward(nn.Module):
    def __init__(self, d_model, expansion=4, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(d_model), nn.Linear(d_model, expansion * d_model), nn.SiLU(),
            nn.Dropout(dropout), nn.Linear(expansion * d_model, d_model), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class ConformerConvolution(nn.Module):
    """Pointwise conv + GLU, depthwise conv over time, batch norm, Swish, pointwise conv."""

    def __init__(self, d_model, conv_kernel_size=31, dropout=0.1, norm_type="batch_norm"):
        super().__init__()
        self.norm_in = nn.LayerNorm(d_model)
        self.pointwise_conv1 = nn.Conv1d(d_model, 2 * d_model, kernel_size=1)
        self.depthwise_conv = nn.Conv1d(d_model, d_model, kernel_size=conv_kernel_size,
                                        padding=(conv_kernel_size - 1) // 2, groups=d_model)
        self.batch_norm = nn.BatchNorm1d(d_model) if norm_type == "batch_norm" else nn.GroupNorm(1, d_model)
        self.pointwise_conv2 = nn.Conv1d(d_model, d_model, kernel_size=1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, pad_mask):
        x = self.norm_in(x).masked_fill(pad_mask.unsqueeze(-1), 0.0).transpose(1, 2)
        x = F.glu(self.pointwise_conv1(x), dim=1)
        x = F.silu(self.batch_norm(self.depthwise_conv(x)))
        return self.dropout(self.pointwise_conv2(x).transpose(1, 2))


class ConformerLayer(nn.Module):
    """Macaron block: half-step feed-forward, attention, convolution, half-step feed-forward."""

    def __init__(self, d_model, n_heads, conv_kernel_size, dropout, dropout_att, fc_factor=0.5):
        super().__init__()
        self.fc_factor = fc_factor
        self.feed_forward1 = ConformerFeedForward(d_model, dropout=dropout)
        self.norm_self_att = nn.LayerNorm(d_model)
        self.self_attn = RelPositionMultiHeadAttention(d_model, n_heads, dropout_att)
        self.conv = ConformerConvolution(d_model, conv_kernel_size, dropout)
        self.feed_forward2 = ConformerFeedForward(d_model, dropout=dropout)
        self.norm_out = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, pos_emb, mask):
        x = x + self.fc_factor * self.feed_forward1(x)
        x = x + self.dropout(self.self_attn(self.norm_self_att(x), pos_emb, mask))
        x = x + self.conv(x, ~mask)
        x = x + self.fc_factor * self.feed_forward2(x)
        return self.norm_out(x)


class ConformerEncoder(nn.Module):
    def __init__(self, n_mels=80, d_model=256, n_layers=16, n_heads=4, conv_kernel_size=31,
                 dropout=0.1, dropout_att=0.1, stochastic_depth_drop_prob=0.0):
        super().__init__()
        self.pre_encode = ConvSubsampling(n_mels, d_model)
        self.pos_enc = RelPositionalEncoding(d_model)
        self.layers = nn.ModuleList(
            ConformerLayer(d_model, n_heads, conv_kernel_size, dropout, dropout_att) for _ in range(n_layers))
        self.layer_drop = [stochastic_depth_drop_prob * (i + 1) / n_layers for i in range(n_layers)]

    def forward(self, spec, frame_lens, return_layers=()):
        x, lengths = self.pre_encode(spec.transpose(1, 2), frame_lens)
        x, pos_emb = self.pos_enc(x)
        mask = torch.arange(x.size(1), device=x.device)[None, :] < lengths[:, None]
        hidden = {}
        for i, layer in enumerate(self.layers):
            if self.training and torch.rand(()) < self.layer_drop[i]:
                continue
            x = layer(x, pos_emb, mask)
            if i in return_layers:
                hidden[i] = x
        return x, lengths, hidden
