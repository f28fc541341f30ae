"""Causal self-attention with grouped-query heads, a KV cache for decoding, and optional QK-norm."""

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .layers import RMSNorm, apply_rotary_emb


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(bs, seqlen, n_kv_heads, head_dim) -> (bs, seqlen, n_kv_heads * n_rep, head_dim)."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (x[:, :, :, None, :]
            .expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim))


class KVCache(nn.Module):
    def __init__(self, max_batch_size: int, max_seq_len: int, n_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        shape = (max_batch_size, max_seq_len, n_kv_heads, head_dim)
        self.register_buffer("cache_k", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("cache_v", torch.zeros(shape, dtype=dtype), persistent=False)

    def update(self, start_pos: int, xk: torch.Tensor, xv: torch.Tensor):
        bsz, seqlen = xk.shape[:2]
        self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos:start_pos + seqlen] = xv
        return self.cache_k[:bsz, :start_pos + seqlen], self.cache_v[:bsz, :start_pos + seqlen]


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int, n_kv_heads: Optional[int] = None,
                 qk_norm: bool = False, attn_dropout: float = 0.0, norm_eps: float = 1e-5):
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.q_norm = RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, eps=norm_eps) if qk_norm else None
        self.attn_dropout = attn_dropout
        self.cache: Optional[KVCache] = None

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor, start_pos: int = 0,
                mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None:
            xq, xk = self.q_norm(xq), self.k_norm(xk)

        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
        if self.cache is not None:
            xk, xv = self.cache.update(start_pos, xk, xv)

        keys = repeat_kv(xk, self.n_rep)
        values = repeat_kv(xv, self.n_rep)
        xq, keys, values = (t.transpose(1, 2) for t in (xq, keys, values))
        output = F.scaled_dot_product_attention(
            xq, keys, values, attn_mask=mask, is_causal=mask is None and seqlen > 1,
            dropout_p=self.attn_dropout if self.training else 0.0)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)
