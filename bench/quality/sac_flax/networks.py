"""Actor and critic networks for SAC (Flax linen)."""
from typing import Callable, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import tensorflow_probability.substrates.jax as tfp

tfd = tfp.distributions
tfb = tfp.bijectors

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


def default_init(scale: float = jnp.sqrt(2)):
    return nn.initializers.orthogonal(scale)


class MLP(nn.Module):
    hidden_dims: Sequence[int]
    activations: Callable = nn.relu
    activate_final: bool = False
    use_layer_norm: bool = False
    dropout_rate: Optional[float] = None

    @nn.compact
    def __call__(self, x: jnp.ndarray, training: bool = False) -> jnp.ndarray:
        for i, size in enumerate(self.hidden_dims):
            x = nn.Dense(size, kernel_init=default_init())(x)
            if i + 1 < len(self.hidden_dims) or self.activate_final:
                if self.dropout_rate is not None and self.dropout_rate > 0:
                    x = nn.Dropout(rate=self.dropout_rate)(x, deterministic=not training)
                if self.use_layer_norm:
                    x = nn.LayerNorm()(x)
                x = self.activations(x)
        return x


class QNetwork(nn.Module):
    """One soft Q function Q(s, a)."""
    hidden_dims: Sequence[int] = (256, 256)
    use_layer_norm: bool = False
    dropout_rate: Optional[float] = None

    @nn.compact
    def __call__(self, obs: jnp.ndarray, action: jnp.ndarray, training: bool = False) -> jnp.ndarray:
        x = jnp.concatenate([obs, action], axis=-1)
        x = MLP((*self.hidden_dims, 1), use_layer_norm=self.use_layer_norm,
                dropout_rate=self.dropout_rate)(x, training)
        return jnp.squeeze(x, -1)


class Ensemble(nn.Module):
    """`num_qs` critics with separate parameters, evaluated in one call."""
    hidden_dims: Sequence[int] = (256, 256)
    num_qs: int = 2
    use_layer_norm: bool = False
    dropout_rate: Optional[float] = None

    @nn.compact
    def __call__(self, obs, action, training: bool = False):
        VmapCritic = nn.vmap(
            QNetwork,
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num_qs,
        )
        return VmapCritic(self.hidden_dims, self.use_layer_norm, self.dropout_rate)(obs, action, training)


def subsample_ensemble(key: jax.random.PRNGKey, params, num_sample: Optional[int], num_qs: int):
    """REDQ: pick `num_sample` of the `num_qs` critics for the target minimum."""
    if num_sample is None or num_sample == num_qs:
        return params
    indx = jax.random.choice(key, a=num_qs, shape=(num_sample,), replace=False)
    return jax.tree_util.tree_map(lambda p: p[indx], params)


class TanhNormal(tfd.TransformedDistribution):
    def __init__(self, loc, scale):
        super().__init__(tfd.MultivariateNormalDiag(loc=loc, scale_diag=scale), tfb.Tanh())

    def mode(self):
        return self.bijector.forward(self.distribution.mode())


class Actor(nn.Module):
    """Gaussian policy squashed through tanh into the action box."""
    action_dim: int
    hidden_dims: Sequence[int] = (256, 256)
    log_std_min: float = LOG_STD_MIN
    log_std_max: float = LOG_STD_MAX
    state_dependent_std: bool = True

    @nn.compact
    def __call__(self, obs: jnp.ndarray, temperature: float = 1.0):
        x = MLP(self.hidden_dims, activate_final=True)(obs)
        mean = nn.Dense(self.action_dim, kernel_init=default_init(1e-2))(x)
        if self.state_dependent_std:
            log_std = nn.Dense(self.action_dim, kernel_init=default_init(1e-2))(x)
        else:
            log_std = self.param("log_std", nn.initializers.zeros, (self.action_dim,))
        log_std = jnp.tanh(log_std)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1)
        return mean, jnp.exp(log_std) * temperature


def sample_and_log_prob(mean, std, key):
    """Reparameterised sample a = tanh(u) and log pi(a|s) with the tanh change of variables."""
    u = mean + std * jax.random.normal(key, mean.shape)
    action = jnp.tanh(u)
    log_prob = jax.scipy.stats.norm.logpdf(u, mean, std).sum(-1)
    log_prob -= jnp.log(1.0 - jnp.square(action) + 1e-6).sum(-1)
    return action, log_prob


class Temperature(nn.Module):
    """The entropy coefficient alpha, learned in log space."""
    initial_temperature: float = 1.0

    @nn.compact
    def __call__(self) -> jnp.ndarray:
        log_alpha = self.param("log_alpha", lambda _: jnp.full((), jnp.log(self.initial_temperature)))
        return jnp.exp(log_alpha)
