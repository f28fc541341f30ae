"""Networks for offline actor-critic on D4RL: an MLP trunk, a state-value net, twin Q nets and two actors.

Written as jaxrl / CORL's JAX ports write them: plain `nn.Module`s with `@nn.compact`, the twin critic
as two module instances, the actor a Gaussian squashed by tanh (IQL, CQL) or a deterministic tanh head (TD3+BC).
"""

from typing import Callable, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from tensorflow_probability.substrates import jax as tfp

tfd = tfp.distributions
tfb = tfp.bijectors


def default_init(scale: float = jnp.sqrt(2)):
    return nn.initializers.orthogonal(scale)


class MLP(nn.Module):
    hidden_dims: Sequence[int]
    activations: Callable[[jnp.ndarray], jnp.ndarray] = nn.relu
    activate_final: bool = False
    layer_norm: bool = False
    dropout_rate: Optional[float] = None

    @nn.compact
    def __call__(self, x: jnp.ndarray, training: bool = False) -> jnp.ndarray:
        for i, size in enumerate(self.hidden_dims):
            x = nn.Dense(size, kernel_init=default_init())(x)
            if i + 1 < len(self.hidden_dims) or self.activate_final:
                if self.layer_norm:
                    x = nn.LayerNorm()(x)
                x = self.activations(x)
                if self.dropout_rate is not None and self.dropout_rate > 0:
                    x = nn.Dropout(rate=self.dropout_rate)(x, deterministic=not training)
        return x


class ValueCritic(nn.Module):
    hidden_dims: Sequence[int]
    layer_norm: bool = False

    @nn.compact
    def __call__(self, observations: jnp.ndarray) -> jnp.ndarray:
        critic = MLP((*self.hidden_dims, 1), layer_norm=self.layer_norm)(observations)
        return jnp.squeeze(critic, -1)


class Critic(nn.Module):
    hidden_dims: Sequence[int]
    activations: Callable[[jnp.ndarray], jnp.ndarray] = nn.relu
    layer_norm: bool = False

    @nn.compact
    def __call__(self, observations: jnp.ndarray, actions: jnp.ndarray) -> jnp.ndarray:
        inputs = jnp.concatenate([observations, actions], -1)
        critic = MLP((*self.hidden_dims, 1), activations=self.activations,
                     layer_norm=self.layer_norm)(inputs)
        return jnp.squeeze(critic, -1)


class DoubleCritic(nn.Module):
    hidden_dims: Sequence[int]
    activations: Callable[[jnp.ndarray], jnp.ndarray] = nn.relu
    layer_norm: bool = False

    @nn.compact
    def __call__(self, observations: jnp.ndarray, actions: jnp.ndarray):
        critic1 = Critic(self.hidden_dims, activations=self.activations, layer_norm=self.layer_norm)(
            observations, actions)
        critic2 = Critic(self.hidden_dims, activations=self.activations, layer_norm=self.layer_norm)(
            observations, actions)
        return critic1, critic2


class NormalTanhPolicy(nn.Module):
    hidden_dims: Sequence[int]
    action_dim: int
    state_dependent_std: bool = False
    dropout_rate: Optional[float] = None
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    tanh_squash_distribution: bool = False

    @nn.compact
    def __call__(self, observations: jnp.ndarray, temperature: float = 1.0,
                 training: bool = False) -> tfd.Distribution:
        outputs = MLP(self.hidden_dims, activate_final=True,
                      dropout_rate=self.dropout_rate)(observations, training=training)
        means = nn.Dense(self.action_dim, kernel_init=default_init(1e-2))(outputs)
        if self.state_dependent_std:
            log_stds = nn.Dense(self.action_dim, kernel_init=default_init(1e-2))(outputs)
        else:
            log_stds = self.param("log_stds", nn.initializers.zeros, (self.action_dim,))
        log_stds = jnp.clip(log_stds, self.log_std_min, self.log_std_max)

        if not self.tanh_squash_distribution:
            means = nn.tanh(means)
        base_dist = tfd.MultivariateNormalDiag(loc=means, scale_diag=jnp.exp(log_stds) * temperature)
        if self.tanh_squash_distribution:
            return tfd.TransformedDistribution(distribution=base_dist, bijector=tfb.Tanh())
        return base_dist


class DeterministicPolicy(nn.Module):
    hidden_dims: Sequence[int]
    action_dim: int
    max_action: float = 1.0

    @nn.compact
    def __call__(self, observations: jnp.ndarray) -> jnp.ndarray:
        outputs = MLP(self.hidden_dims, activate_final=True)(observations)
        actions = nn.Dense(self.action_dim, kernel_init=default_init(1e-2))(outputs)
        return self.max_action * nn.tanh(actions)


def sample_actions(rng: jax.Array, actor_apply: Callable, actor_params, observations: jnp.ndarray,
                   temperature: float = 1.0):
    dist = actor_apply({"params": actor_params}, observations, temperature)
    rng, key = jax.random.split(rng)
    return rng, dist.sample(seed=key)
