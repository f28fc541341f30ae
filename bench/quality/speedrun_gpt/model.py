"""The speedrun GPT (124M class): modded-nanogpt's architecture as of our 2025 records.

Everything here is chosen by a record in the pool: RMS norm without weights, QK-norm, half-truncated
rotary, ReLU^2, value embeddings, U-net skips, long/short sliding windows over a document mask, a
zero-initialised output projection in every residual branch, an untied head and tanh logit soft-capping.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention


def norm(x: Tensor) -> Tensor:
    # parameter-free RMS norm: the learned gains bought nothing and cost Adam state
    return F.rms_norm(x, (x.size(-1),))


def next_multiple_of_n(v: float | int, *, n: int) -> int:
    return next(x for x in range(n, int(v) + 1 + n, n) if x >= v)


class FP8Matmul(torch.autograd.Function):
    """x @ w.T in float8 e4m3 with fixed scales; the gradient comes back in e5m2."""

    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor, x_s: float, w_s: float, grad_s: float) -> Tensor:
        x_f8 = x.div(x_s).to(torch.float8_e4m3fn)
        w_f8 = w.div(w_s).to(torch.float8_e4m3fn)
        out = torch._scaled_mm(x_f8, w_f8.T, out_dtype=torch.bfloat16,
                               scale_a=x.new_tensor(x_s, dtype=torch.float32),
                               scale_b=x.new_tensor(w_s, dtype=torch.float32), use_fast_accum=True)
        ctx.save_for_backward(x_f8, w_f8)
        ctx.scales = (x_s, w_s, grad_s)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x_f8, w_f8 = ctx.saved_tensors
        x_s, w_s, grad_s = ctx.scales
        one = grad.new_tensor(1.0, dtype=torch.float32)
        grad_f8 = grad.div(grad_s).to(torch.float8_e5m2)
        grad_x = torch._scaled_mm(grad_f8, w_f8.T.contiguous().T, out_dtype=torch.bfloat16,
                                  scale_a=grad.new_tensor(grad_s, dtype=torch.float32),
                                  scale_b=grad.new_tensor(w_s, dtype=torch.float32), use_fast_accum=False)
        grad_w = torch._scaled_mm(x_f8.T.contiguous(), grad_f8.T.contiguous().T, out_dtype=torch.float32,
                                  scale_a=grad.new_tensor(x_s, dtype=torch.float32),
                                  scale_b=grad.new_tensor(grad_s, dtype=torch.float32) * one,
                                  use_fast_accum=False).T
        return grad_x, grad_w, None, None, None


class CastedLinear(nn.Linear):
    """A bias-free linear layer whose fp32 weight is cast to the activations' dtype (bf16) at use."""

    def __init__(self, in_features: int, out_features: int, use_fp8: bool = False,
                 x_s: float = 1.0, w_s: float = 1.0, grad_s: float = 1.0):
        super().__init__(in_features, out_features, bias=False)
        self.use_fp8 = use_fp8
        self.x_s, self.w_s, self.grad_s = x_s, w_s, grad_s

    def reset_parameters(self) -> None:
        std = 0.5 * (self.in_features ** -0.5)
        bound = (3 ** 0.5) * std
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        if self.use_fp8 and self.training:
            flat = x.flatten(0, -2)
            out = FP8Matmul.apply(flat, self.weight, self.x_s, self.w_s, self.grad_s)
            return out.reshape(*x.shape[:-1], -1)
        return F.linear(x, self.weight.type_as(x))


class Rotary(nn.Module):
    def __init__(self, dim: int, max_seq_len: int, base: float = 1024.0):
        super().__init__()
        # half-truncated: a quarter of the dims rotate at frequencies down to 1/base, a quarter not at all
        angular_freq = (1 / base) ** torch.linspace(0, 1, steps=dim // 4, dtype=torch.float32)
        angular_freq = torch.cat([angular_freq, angular_freq.new_zeros(dim // 4)])
        t = torch.arange(max_seq_len, dtype=torch.float32)
        theta = torch.einsum("i,j -> ij", t, angular_freq)
        self.cos = nn.Buffer(theta.cos(), persistent=False)
        self.sin = nn.Buffer(theta.sin(), persistent=False)

    def forward(self, x_BTHD: Tensor) -> Tensor:
        assert self.cos.size(0) >= x_BTHD.size(-3)
        cos = self.cos[None, :x_BTHD.size(-3), None, :]
        sin = self.sin[None, :x_BTHD.size(-3), None, :]
        x1, x2 = x_BTHD.to(dtype=torch.float32).chunk(2, dim=-1)
        y1 = x1 * cos + x2 * sin
        y2 = x1 * (-sin) + x2 * cos
        return torch.cat((y1, y2), 3).type_as(x_BTHD)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, max_seq_len: int, head_dim: int = 128,
                 rope_base: float = 1024.0, attn_scale: float = 0.12):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_dim
        hdim = num_heads * head_dim
        std = 0.5 * (dim ** -0.5)
        bound = (3 ** 0.5) * std
        # q, k and v in one (3, hdim, dim) weight, so that Muon orthogonalises each of them apart
        self.qkv_w = nn.Parameter(torch.empty(3, hdim, dim).uniform_(-bound, bound))
        self.lambdas = nn.Parameter(torch.tensor([0.5, 0.5]))
        self.rotary = Rotary(head_dim, max_seq_len, base=rope_base)
        self.c_proj = CastedLinear(hdim, dim)
        self.c_proj.weight.detach().zero_()
        self.attn_scale = attn_scale

    def forward(self, x: Tensor, ve: Tensor | None, block_mask: BlockMask) -> Tensor:
        B, T = x.size(0), x.size(1)
        assert B == 1, "one packed sequence of documents per rank"
        qkv = F.linear(x, self.qkv_w.flatten(end_dim=1).type_as(x))
        q, k, v = qkv.view(B, T, 3 * self.num_heads, self.head_dim).chunk(3, dim=-2)
        q, k = norm(q), norm(k)
        q, k = self.rotary(q), self.rotary(k)
        if ve is not None:
            v = self.lambdas[0] * v + self.lambdas[1] * ve.view_as(v)
        else:
            v = self.lambdas[0] * v
        y = flex_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                           block_mask=block_mask, scale=self.attn_scale).transpose(1, 2)
        y = y.contiguous().view(B, T, self.num_heads * self.head_dim)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, dim: int, expansion: int = 4):
        super().__init__()
        hdim = expansion * dim
        self.c_fc = CastedLinear(dim, hdim)
        self.c_proj = CastedLinear(hdim, dim)
        self.c_proj.weight.detach().zero_()

    def forward(self, x: Tensor) -> Tensor:
        x = self.c_fc(x)
        x = F.relu(x).square()
        return self.c_proj(x)


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, max_seq_len: int, layer_idx: int, cfg):
        super().__init__()
        skip_attn = layer_idx in cfg.attn_free_layers
        self.attn = None if skip_attn else CausalSelfAttention(
            dim, num_heads, max_seq_len, head_dim=cfg.head_dim, rope_base=cfg.rope_base, attn_scale=cfg.attn_scale)
        self.mlp = MLP(dim, expansion=cfg.mlp_expansion)
        self.lambdas = nn.Parameter(torch.tensor([1.0, 0.0]))

    def forward(self, x: Tensor, ve: Tensor | None, x0: Tensor, block_mask: BlockMask) -> Tensor:
        x = self.lambdas[0] * x + self.lambdas[1] * x0
        if self.attn is not None:
            x = x + self.attn(norm(x), ve, block_mask)
        x = x + self.mlp(norm(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.model_dim)
        # value embeddings: one table per entry, mixed into v of the first and of the last layers
        self.value_embeds = nn.ModuleList([nn.Embedding(cfg.vocab_size, cfg.model_dim)
                                           for _ in range(cfg.num_value_embeds)])
        self.blocks = nn.ModuleList([Block(cfg.model_dim, cfg.num_heads, cfg.max_seq_len, i, cfg)
                                     for i in range(cfg.num_layers)])
        self.lm_head = CastedLinear(cfg.model_dim, next_multiple_of_n(cfg.vocab_size, n=128),
                                    use_fp8=cfg.fp8_head, x_s=cfg.fp8_x_s, w_s=cfg.fp8_w_s, grad_s=cfg.fp8_grad_s)
        self.lm_head.weight.detach().zero_()
        assert cfg.num_layers % 2 == 0
        self.skip_weights = nn.Parameter(torch.ones(cfg.num_layers // 2))
        self.logit_softcap = cfg.logit_softcap
        self.bos_id = cfg.bos_id

    def create_blockmasks(self, input_seq: Tensor, sliding_window_num_blocks: Tensor):
        BLOCK_SIZE = 128
        docs = (input_seq == self.bos_id).cumsum(0)

        def document_causal(b, h, q_idx, kv_idx):
            causal_mask = q_idx >= kv_idx
            document_mask = docs[q_idx] == docs[kv_idx]
            return causal_mask & document_mask

        def dense_to_ordered(dense_blockmask: Tensor):
            num_blocks = dense_blockmask.sum(dim=-1, dtype=torch.int32)
            indices = dense_blockmask.argsort(dim=-1, descending=False, stable=True).flip(-1).to(torch.int32)
            return num_blocks[None, None].contiguous(), indices[None, None].contiguous()

        assert len(input_seq) % BLOCK_SIZE == 0
        num_blocks = len(input_seq) // BLOCK_SIZE
        block_idx = torch.arange(num_blocks, dtype=torch.int32, device=input_seq.device)
        causal_blockmask_any = block_idx[:, None] >= block_idx
        causal_blockmask_all = block_idx[:, None] > block_idx
        docs_low = docs.view(-1, BLOCK_SIZE)[:, 0].contiguous()
        docs_high = docs.view(-1, BLOCK_SIZE)[:, -1].contiguous()
        document_blockmask_any = (docs_low[:, None] <= docs_high) & (docs_high[:, None] >= docs_low)
        document_blockmask_all = (docs_low[:, None] == docs_high) & (docs_high[:, None] == docs_low)
        blockmask_any = causal_blockmask_any & document_blockmask_any
        blockmask_all = causal_blockmask_all & document_blockmask_all
        partial_kv_num_blocks, partial_kv_indices = dense_to_ordered(blockmask_any & ~blockmask_all)
        full_kv_num_blocks, full_kv_indices = dense_to_ordered(blockmask_all)

        def build_bm(window_size_blocks: Tensor) -> BlockMask:
            return BlockMask.from_kv_blocks(
                torch.clamp_max(partial_kv_num_blocks, torch.clamp_min(window_size_blocks - full_kv_num_blocks, 1)),
                partial_kv_indices,
                torch.clamp_max(full_kv_num_blocks, window_size_blocks - 1),
                full_kv_indices,
                BLOCK_SIZE=BLOCK_SIZE,
                mask_mod=document_causal,
            )
        # long-short: the short layers see half the window
        return build_bm(sliding_window_num_blocks), build_bm(sliding_window_num_blocks // 2)

    def forward(self, input_seq: Tensor, target_seq: Tensor, sliding_window_num_blocks: Tensor) -> Tensor:
        assert input_seq.ndim == 1
        ve = [value_embed(input_seq) for value_embed in self.value_embeds]
        n_ve = len(ve)
        ve = ve + [None] * (len(self.blocks) - 2 * n_ve) + ve
        long_bm, short_bm = self.create_blockmasks(input_seq, sliding_window_num_blocks)
        block_masks = [long_bm if i in self.cfg.long_window_layers else short_bm for i in range(len(self.blocks))]

        x = x0 = norm(self.embed(input_seq)[None])
        skip_connections = []
        n = len(self.skip_weights)
        for i in range(len(self.blocks)):
            if i >= n:
                x = x + self.skip_weights[i - n] * skip_connections.pop()
            x = self.blocks[i](x, ve[i], x0, block_masks[i])
            if i < n:
                skip_connections.append(x)

        x = norm(x)
        logits = self.lm_head(x).float()
        logits = self.logit_softcap * torch.tanh(logits / self.logit_softcap)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), target_seq,
                               reduction="sum" if self.training else "mean")
        return loss
