"""Mixtral-style sparse mixture-of-experts decoder, vendored from transformers' modeling_mixtral and trimmed to
what we fine-tune: we patch the attention mask for packed documents and add the router z-loss, which upstream
does not have."""

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .configuration import MixtralConfig

IGNORE_INDEX = -100


class MixtralRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class MixtralRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 1_000_000.0, scaling_factor: float = 1.0):
        super().__init__()
        self.scaling_factor = scaling_factor
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        positions = position_ids.float() / self.scaling_factor
        freqs = torch.einsum("bs,d->bsd", positions, self.inv_freq.to(x.device))
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(batch, num_key_value_heads, seq, head_dim) -> (batch, num_attention_heads, seq, head_dim)."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def sliding_window_causal_mask(seq_len: int, sliding_window: Optional[int], dtype, device,
                               segment_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Additive mask: causal, each query sees at most the last `sliding_window` keys, and with packing only the
    keys of its own document (`segment_ids`, one id per packed example)."""
    i = torch.arange(seq_len, device=device)[:, None]
    j = torch.arange(seq_len, device=device)[None, :]
    allowed = j <= i
    if sliding_window is not None:
        allowed = allowed & ((i - j) < sliding_window)
    allowed = allowed[None, None]
    if segment_ids is not None:
        allowed = allowed & (segment_ids[:, None, :, None] == segment_ids[:, None, None, :])
    mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)


class MixtralAttention(nn.Module):
    def __init__(self, config: MixtralConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.head_dim = config.head_dim
        self.attention_dropout = config.attention_dropout
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)
        self.rotary_emb = MixtralRotaryEmbedding(self.head_dim, base=config.rope_theta,
                                                 scaling_factor=config.rope_scaling_factor)

    def forward(self, hidden_states, attention_mask, position_ids):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(v, position_ids)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = repeat_kv(k, self.num_key_value_groups)
        v = repeat_kv(v, self.num_key_value_groups)
        attn_output = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attention_mask, dropout_p=self.attention_dropout if self.training else 0.0)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class MixtralBlockSparseTop2MLP(nn.Module):
    def __init__(self, config: MixtralConfig):
        super().__init__()
        self.w1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.w2 = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        self.w3 = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states):
        return self.w2(self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states))


class MixtralSparseMoeBlock(nn.Module):
    """Each token goes to its `top_k` experts out of `num_experts`, weighted by the router's renormalised
    probabilities; returns the router logits for the auxiliary losses."""

    def __init__(self, config: MixtralConfig):
        super().__init__()
        self.hidden_dim = config.hidden_size
        self.num_experts = config.num_local_experts
        self.top_k = config.num_experts_per_tok
        self.norm_topk_prob = config.norm_topk_prob
        self.jitter_noise = config.router_jitter_noise
        self.gate = nn.Linear(self.hidden_dim, self.num_experts, bias=False)
        self.experts = nn.ModuleList([MixtralBlockSparseTop2MLP(config) for _ in range(self.num_experts)])

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        if self.training and self.jitter_noise > 0:
            hidden_states = hidden_states * torch.empty_like(hidden_states).uniform_(
                1.0 - self.jitter_noise, 1.0 + self.jitter_noise)
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros_like(hidden_states)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        for expert_idx in range(self.num_experts):
            idx, top_x = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[top_x]
            current = self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current.to(hidden_states.dtype))
        return final_hidden_states.view(batch_size, sequence_length, hidden_dim), router_logits


def load_balancing_loss_func(router_logits, num_experts: int, top_k: int, attention_mask=None):
    """Switch-Transformer auxiliary loss: num_experts * sum over experts of (share of tokens sent to the expert)
    times (mean router probability of the expert); padding tokens left out."""
    logits = torch.cat([layer_logits.float() for layer_logits in router_logits], dim=0)
    routing_weights = F.softmax(logits, dim=-1)
    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    expert_mask = F.one_hot(selected_experts, num_experts).float()
    if attention_mask is None:
        tokens_per_expert = expert_mask.mean(dim=0)
        router_prob_per_expert = routing_weights.mean(dim=0)
    else:
        keep = attention_mask.reshape(-1).repeat(len(router_logits)).float()
        tokens_per_expert = (expert_mask * keep[:, None, None]).sum(dim=0) / keep.sum()
        router_prob_per_expert = (routing_weights * keep[:, None]).sum(dim=0) / keep.sum()
    return num_experts * torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))


def router_z_loss_func(router_logits) -> torch.Tensor:
    """ST-MoE's z-loss: the squared log-sum-exp of the router logits, which keeps them small in bf16."""
    logits = torch.cat([layer_logits.float() for layer_logits in router_logits], dim=0)
    return torch.logsumexp(logits, dim=-1).pow(2).mean()


class MixtralDecoderLayer(nn.Module):
    def __init__(self, config: MixtralConfig, layer_idx: int):
        super().__init__()
        self.self_attn = MixtralAttention(config, layer_idx)
        self.block_sparse_moe = MixtralSparseMoeBlock(config)
        self.input_layernorm = MixtralRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = MixtralRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask, position_ids):
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states), attention_mask, position_ids)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states, router_logits = self.block_sparse_moe(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states, router_logits


class MixtralForCausalLM(nn.Module):
    def __init__(self, config: MixtralConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList([MixtralDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = MixtralRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def forward(self, input_ids, attention_mask=None, position_ids=None, segment_ids=None, labels=None,
                num_items_in_batch=None, output_router_logits=None):
        bsz, seq_len = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=input_ids.device)[None].expand(bsz, -1)
        mask = sliding_window_causal_mask(seq_len, self.config.sliding_window, hidden_states.dtype,
                                          input_ids.device, segment_ids)
        all_router_logits = []
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden_states, router_logits = checkpoint(layer, hidden_states, mask, position_ids,
                                                          use_reentrant=False)
            else:
                hidden_states, router_logits = layer(hidden_states, mask, position_ids)
            all_router_logits.append(router_logits)
        logits = self.lm_head(self.norm(hidden_states)).float()
        if labels is None:
            return {"logits": logits}
        shift_logits = logits[:, :-1].reshape(-1, logits.size(-1))
        shift_labels = labels[:, 1:].reshape(-1)
        reduction = "mean" if num_items_in_batch is None else "sum"
        loss = F.cross_entropy(shift_logits, shift_labels, ignore_index=IGNORE_INDEX, reduction=reduction)
        if num_items_in_batch is not None:
            loss = loss / num_items_in_batch
        aux_loss = z_loss = torch.zeros((), device=logits.device)
        if output_router_logits if output_router_logits is not None else self.config.output_router_logits:
            aux_loss = load_balancing_loss_func(all_router_logits, self.config.num_local_experts,
                                                self.config.num_experts_per_tok, attention_mask)
            z_loss = router_z_loss_func(all_router_logits)
        total = loss + self.config.router_aux_loss_coef * aux_loss + self.config.router_z_loss_coef * z_loss
        return {"loss": total, "lm_loss": loss, "aux_loss": aux_loss, "z_loss": z_loss, "logits": logits}
