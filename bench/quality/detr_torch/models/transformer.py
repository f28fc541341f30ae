"""The encoder-decoder of DETR: post-norm layers, positions added to queries and keys at every layer."""

import copy

import torch
import torch.nn.functional as F
from torch import nn


def _get_clones(module, n):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(n)])


def with_pos_embed(tensor, pos):
    return tensor if pos is None else tensor + pos


class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, normalize_before=False):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.normalize_before = normalize_before

    def forward(self, src, src_key_padding_mask, pos):
        if self.normalize_before:
            src2 = self.norm1(src)
            q = k = with_pos_embed(src2, pos)
            src = src + self.dropout1(self.self_attn(q, k, src2, key_padding_mask=src_key_padding_mask)[0])
            src2 = self.linear2(self.dropout(F.relu(self.linear1(self.norm2(src)))))
            return src + self.dropout2(src2)
        q = k = with_pos_embed(src, pos)
        src = self.norm1(src + self.dropout1(self.self_attn(q, k, src, key_padding_mask=src_key_padding_mask)[0]))
        src2 = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout2(src2))


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, tgt, memory, memory_key_padding_mask, pos, query_pos):
        q = k = with_pos_embed(tgt, query_pos)
        tgt = self.norm1(tgt + self.dropout1(self.self_attn(q, k, tgt)[0]))
        tgt2 = self.multihead_attn(with_pos_embed(tgt, query_pos), with_pos_embed(memory, pos), memory,
                                   key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(tgt2))


class TransformerDecoder(nn.Module):
    def __init__(self, decoder_layer, num_layers, d_model, return_intermediate=True):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.norm = nn.LayerNorm(d_model)
        self.return_intermediate = return_intermediate

    def forward(self, tgt, memory, memory_key_padding_mask, pos, query_pos):
        intermediate = []
        for layer in self.layers:
            tgt = layer(tgt, memory, memory_key_padding_mask, pos, query_pos)
            if self.return_intermediate:
                intermediate.append(self.norm(tgt))
        if self.return_intermediate:
            return torch.stack(intermediate)
        return self.norm(tgt).unsqueeze(0)


class Transformer(nn.Module):
    def __init__(self, d_model=256, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, normalize_before=False, return_intermediate_dec=True):
        super().__init__()
        encoder_layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, normalize_before)
        self.encoder_layers = _get_clones(encoder_layer, num_encoder_layers)
        decoder_layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout)
        self.decoder = TransformerDecoder(decoder_layer, num_decoder_layers, d_model, return_intermediate_dec)
        self.d_model, self.nhead = d_model, nhead
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, mask, query_embed, pos_embed):
        bs, c, h, w = src.shape
        src = src.flatten(2).permute(2, 0, 1)
        pos_embed = pos_embed.flatten(2).permute(2, 0, 1)
        query_embed = query_embed.unsqueeze(1).repeat(1, bs, 1)
        mask = mask.flatten(1)
        memory = src
        for layer in self.encoder_layers:
            memory = layer(memory, mask, pos_embed)
        tgt = torch.zeros_like(query_embed)
        hs = self.decoder(tgt, memory, mask, pos_embed, query_embed)
        return hs.transpose(1, 2), memory.permute(1, 2, 0).view(bs, c, h, w)


def build_transformer(args):
    return Transformer(d_model=args.hidden_dim, nhead=args.nheads, num_encoder_layers=args.enc_layers,
                       num_decoder_layers=args.dec_layers, dim_feedforward=args.dim_feedforward,
                       dropout=args.dropout, normalize_before=args.pre_norm, return_intermediate_dec=True)
