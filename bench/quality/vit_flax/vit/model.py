"""Vision Transformer in Flax (linen): patch embedding, pre-norm encoder, class-token or GAP head."""

from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

Dtype = Any


def posemb_sincos_2d(h: int, w: int, width: int, temperature: float = 10_000.0) -> jnp.ndarray:
    """Fixed 2-D sine-cosine position table, (1, h*w, width)."""
    y, x = np.mgrid[:h, :w]
    omega = np.arange(width // 4) / (width // 4 - 1)
    omega = 1.0 / (temperature ** omega)
    y = np.einsum("m,d->md", y.flatten(), omega)
    x = np.einsum("m,d->md", x.flatten(), omega)
    pe = np.concatenate([np.sin(x), np.cos(x), np.sin(y), np.cos(y)], axis=1)
    return jnp.asarray(pe, jnp.float32)[None, :, :]


class PatchEmbed(nn.Module):
    """Non-overlapping patches through one strided convolution, flattened to tokens."""
    patch_size: int = 16
    hidden_size: int = 384
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, images: jnp.ndarray) -> jnp.ndarray:
        x = nn.Conv(self.hidden_size, kernel_size=(self.patch_size, self.patch_size),
                    strides=(self.patch_size, self.patch_size), padding="VALID",
                    dtype=self.dtype, name="embedding")(images)
        n, h, w, c = x.shape
        return jnp.reshape(x, (n, h * w, c))


class MlpBlock(nn.Module):
    mlp_dim: int
    dropout_rate: float = 0.0
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, inputs: jnp.ndarray, *, deterministic: bool) -> jnp.ndarray:
        out_dim = inputs.shape[-1]
        x = nn.Dense(self.mlp_dim, dtype=self.dtype, kernel_init=nn.initializers.xavier_uniform(),
                     bias_init=nn.initializers.normal(stddev=1e-6))(inputs)
        x = nn.gelu(x)
        x = nn.Dropout(rate=self.dropout_rate)(x, deterministic=deterministic)
        x = nn.Dense(out_dim, dtype=self.dtype, kernel_init=nn.initializers.xavier_uniform(),
                     bias_init=nn.initializers.normal(stddev=1e-6))(x)
        return nn.Dropout(rate=self.dropout_rate)(x, deterministic=deterministic)


class DropPath(nn.Module):
    """Drops the whole residual branch per example with probability `rate`."""
    rate: float = 0.0

    @nn.compact
    def __call__(self, x: jnp.ndarray, *, deterministic: bool) -> jnp.ndarray:
        if deterministic or self.rate == 0.0:
            return x
        keep = 1.0 - self.rate
        mask = jax.random.bernoulli(self.make_rng("droppath"), keep, (x.shape[0],) + (1,) * (x.ndim - 1))
        return x * mask / keep


class Encoder1DBlock(nn.Module):
    mlp_dim: int
    num_heads: int
    dropout_rate: float = 0.0
    attention_dropout_rate: float = 0.0
    droppath_rate: float = 0.0
    layerscale_init: Optional[float] = None
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, inputs: jnp.ndarray, *, deterministic: bool) -> jnp.ndarray:
        x = nn.LayerNorm(dtype=self.dtype)(inputs)
        x = nn.MultiHeadDotProductAttention(
            num_heads=self.num_heads, dtype=self.dtype, dropout_rate=self.attention_dropout_rate,
            deterministic=deterministic, kernel_init=nn.initializers.xavier_uniform())(x, x)
        if self.layerscale_init is not None:
            x = x * self.param("ls1", nn.initializers.constant(self.layerscale_init), (x.shape[-1],))
        x = DropPath(self.droppath_rate)(x, deterministic=deterministic)
        x = x + inputs
        y = nn.LayerNorm(dtype=self.dtype)(x)
        y = MlpBlock(self.mlp_dim, self.dropout_rate, self.dtype)(y, deterministic=deterministic)
        if self.layerscale_init is not None:
            y = y * self.param("ls2", nn.initializers.constant(self.layerscale_init), (y.shape[-1],))
        return x + DropPath(self.droppath_rate)(y, deterministic=deterministic)


class Encoder(nn.Module):
    num_layers: int
    mlp_dim: int
    num_heads: int
    dropout_rate: float = 0.0
    attention_dropout_rate: float = 0.0
    droppath_rate: float = 0.1
    layerscale_init: Optional[float] = None

    def setup(self):
        # Stochastic depth grows linearly with depth, 0 at the first block.
        rates = np.linspace(0.0, self.droppath_rate, self.num_layers)
        self.blocks = [Encoder1DBlock(self.mlp_dim, self.num_heads, self.dropout_rate,
                                      self.attention_dropout_rate, float(rate), self.layerscale_init,
                                      name=f"encoderblock_{i}") for i, rate in enumerate(rates)]
        self.encoder_norm = nn.LayerNorm(name="encoder_norm")

    def __call__(self, x: jnp.ndarray, *, train: bool) -> jnp.ndarray:
        for block in self.blocks:
            x = block(x, deterministic=not train)
        return self.encoder_norm(x)


class VisionTransformer(nn.Module):
    num_classes: int
    patch_size: int = 16
    hidden_size: int = 384
    num_layers: int = 12
    num_heads: int = 6
    mlp_dim: int = 1536
    pool_type: str = "gap"  # "gap" or "token"
    posemb: str = "sincos2d"  # "sincos2d" or "learn"
    droppath_rate: float = 0.1
    head_zeroinit: bool = True
    representation_size: Optional[int] = None
    act_fn: Callable = nn.tanh

    @nn.compact
    def __call__(self, images: jnp.ndarray, *, train: bool = False) -> jnp.ndarray:
        x = PatchEmbed(self.patch_size, self.hidden_size)(images)
        n, l, c = x.shape
        side = int(np.sqrt(l))
        if self.posemb == "learn":
            pe = self.param("pos_embedding", nn.initializers.normal(stddev=1 / np.sqrt(c)), (1, l, c))
        else:
            pe = posemb_sincos_2d(side, side, c)
        x = x + pe
        if self.pool_type == "token":
            cls = self.param("cls", nn.initializers.zeros, (1, 1, c))
            x = jnp.concatenate([jnp.tile(cls, [n, 1, 1]), x], axis=1)
        x = Encoder(self.num_layers, self.mlp_dim, self.num_heads, droppath_rate=self.droppath_rate)(x, train=train)
        x = x[:, 0] if self.pool_type == "token" else jnp.mean(x, axis=1)
        if self.representation_size is not None:
            x = self.act_fn(nn.Dense(self.representation_size, name="pre_logits")(x))
        head_init = nn.initializers.zeros if self.head_zeroinit else nn.initializers.lecun_normal()
        return nn.Dense(self.num_classes, kernel_init=head_init, name="head")(x)
