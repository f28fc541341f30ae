"""The model's configuration, as transformers' `MixtralConfig` spells it, so a `config.json` from the hub loads as is."""

from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class MixtralConfig:
    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 14336
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: Optional[int] = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 32768
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-5
    rope_theta: float = 1_000_000.0
    rope_scaling_factor: float = 1.0
    sliding_window: Optional[int] = 4096
    attention_dropout: float = 0.0
    tie_word_embeddings: bool = False
    # sparse mixture of experts
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    norm_topk_prob: bool = True
    router_jitter_noise: float = 0.0
    output_router_logits: bool = True
    router_aux_loss_coef: float = 0.02
    router_z_loss_coef: float = 0.001
    pad_token_id: Optional[int] = None
    bos_token_id: int = 1
    eos_token_id: int = 2
    architectures: list = field(default_factory=lambda: ["MixtralForCausalLM"])

    def __post_init__(self):
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if not 0 < self.num_experts_per_tok <= self.num_local_experts:
            raise ValueError("num_experts_per_tok must be in 1..num_local_experts")

    @classmethod
    def from_dict(cls, raw: dict) -> "MixtralConfig":
        known = {k: v for k, v in raw.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def to_dict(self) -> dict:
        return asdict(self)
