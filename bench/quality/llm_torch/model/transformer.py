"""Decoder-only transformer: pre-norm blocks, rotary positions, tied or untied output head."""

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import Attention, KVCache
from .layers import FeedForward, RMSNorm, init_linear_, precompute_freqs_cis, scaled_init_std


@dataclass
class ModelArgs:
    dim: int = 2048
    n_layers: int = 24
    n_heads: int = 16
    n_kv_heads: Optional[int] = 4
    vocab_size: int = 32000
    multiple_of: int = 256
    ffn_dim_multiplier: Optional[float] = 1.3
    norm_eps: float = 1e-5
    rope_theta: float = 1_000_000.0
    rope_scaling: Optional[float] = None
    max_seq_len: int = 4096
    qk_norm: bool = False
    tie_embeddings: bool = False
    dropout: float = 0.0


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.layer_id = layer_id
        self.attention = Attention(args.dim, args.n_heads, args.n_kv_heads, qk_norm=args.qk_norm,
                                   norm_eps=args.norm_eps)
        self.feed_forward = FeedForward(args.dim, 4 * args.dim, args.multiple_of,
                                        args.ffn_dim_multiplier, dropout=args.dropout)
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor, start_pos: int = 0,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), freqs_cis, start_pos, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(TransformerBlock(i, args) for i in range(args.n_layers))
        self.norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        if args.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        self.register_buffer("freqs_cis", precompute_freqs_cis(
            args.dim // args.n_heads, args.max_seq_len * 2, args.rope_theta, args.rope_scaling),
            persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.tok_embeddings.weight, std=1.0)
        residual_std = scaled_init_std(self.args.dim, self.args.n_layers)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                std = residual_std if name.endswith(("wo", "w2")) else 0.02
                init_linear_(module, std)

    def setup_cache(self, max_batch_size: int, dtype: torch.dtype = torch.bfloat16) -> None:
        head_dim = self.args.dim // self.args.n_heads
        n_kv = self.args.n_kv_heads or self.args.n_heads
        for layer in self.layers:
            layer.attention.cache = KVCache(max_batch_size, self.args.max_seq_len, n_kv, head_dim, dtype)

    def forward(self, tokens: torch.Tensor, start_pos: int = 0,
                targets: Optional[torch.Tensor] = None, z_loss_weight: float = 0.0):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[start_pos:start_pos + seqlen]
        mask = None
        if self.layers[0].attention.cache is not None and seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"), device=tokens.device).triu(1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos), device=tokens.device), mask]).type_as(h)
        for layer in self.layers:
            h = layer(h, freqs_cis, start_pos, mask)
        logits = self.output(self.norm(h)).float()
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)
        if z_loss_weight > 0:
            log_z = torch.logsumexp(logits, dim=-1)
            loss = loss + z_loss_weight * (log_z ** 2).mean()
        return logits, loss
