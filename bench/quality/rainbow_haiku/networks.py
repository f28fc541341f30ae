"""Haiku networks of the agent: the Nature convolutional torso, noisy linear layers, and the head
(dueling, distributional over fixed atoms; or quantiles for the QR variant)."""

from __future__ import annotations

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np


def dqn_torso(inputs: jnp.ndarray) -> jnp.ndarray:
    """Three convolutions of the Nature DQN on uint8 frames scaled to [0, 1]."""
    x = inputs.astype(jnp.float32) / 255.0
    init = hk.initializers.VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform")
    x = jax.nn.relu(hk.Conv2D(32, kernel_shape=8, stride=4, padding="VALID", w_init=init)(x))
    x = jax.nn.relu(hk.Conv2D(64, kernel_shape=4, stride=2, padding="VALID", w_init=init)(x))
    x = jax.nn.relu(hk.Conv2D(64, kernel_shape=3, stride=1, padding="VALID", w_init=init)(x))
    return hk.Flatten()(x)


class NoisyLinear(hk.Module):
    """A linear layer with learned, factorised Gaussian noise on its weights (Fortunato et al.).

    The noise replaces epsilon-greedy exploration: `sigma0 / sqrt(fan_in)` initialises its scale, and a
    fresh draw is taken on every call from `hk.next_rng_key()`.
    """

    def __init__(self, output_size: int, sigma0: float = 0.5, with_bias: bool = True, name=None):
        super().__init__(name=name)
        self.output_size = output_size
        self.sigma0 = sigma0
        self.with_bias = with_bias

    @staticmethod
    def _factorised(key, size):
        noise = jax.random.normal(key, (size,))
        return jnp.sign(noise) * jnp.sqrt(jnp.abs(noise))

    def __call__(self, inputs: jnp.ndarray, noisy: bool = True) -> jnp.ndarray:
        fan_in = inputs.shape[-1]
        bound = 1.0 / np.sqrt(fan_in)
        mu_init = hk.initializers.RandomUniform(-bound, bound)
        sigma_init = hk.initializers.Constant(self.sigma0 * bound)
        w_mu = hk.get_parameter("w_mu", [fan_in, self.output_size], init=mu_init)
        w_sigma = hk.get_parameter("w_sigma", [fan_in, self.output_size], init=sigma_init)
        b_mu = hk.get_parameter("b_mu", [self.output_size], init=mu_init)
        b_sigma = hk.get_parameter("b_sigma", [self.output_size], init=sigma_init)
        if not noisy:
            return inputs @ w_mu + b_mu
        key_in, key_out = jax.random.split(hk.next_rng_key())
        eps_in = self._factorised(key_in, fan_in)
        eps_out = self._factorised(key_out, self.output_size)
        w = w_mu + w_sigma * jnp.outer(eps_in, eps_out)
        b = b_mu + b_sigma * eps_out
        return inputs @ w + b


def _linear(size: int, noisy_nets: bool, sigma0: float, name: str):
    if noisy_nets:
        return NoisyLinear(size, sigma0=sigma0, name=name)
    return hk.Linear(size, name=name)


def dueling_head(features, num_actions: int, num_atoms: int, hidden: int, noisy_nets: bool,
                 sigma0: float) -> jnp.ndarray:
    """Logits [batch, actions, atoms]: a value stream and an advantage stream, the advantages centred
    on their mean over actions before they are added to the value."""
    value = jax.nn.relu(_linear(hidden, noisy_nets, sigma0, "value_hidden")(features))
    value = _linear(num_atoms, noisy_nets, sigma0, "value")(value)
    advantages = jax.nn.relu(_linear(hidden, noisy_nets, sigma0, "advantage_hidden")(features))
    advantages = _linear(num_actions * num_atoms, noisy_nets, sigma0, "advantage")(advantages)
    value = value.reshape(-1, 1, num_atoms)
    advantages = advantages.reshape(-1, num_actions, num_atoms)
    advantages = advantages - jnp.mean(advantages, axis=1, keepdims=True)
    return value + advantages


def rainbow_network(num_actions: int, support: jnp.ndarray, config) -> hk.Transformed:
    """C51 over `support` with a dueling, noisy head: q = sum_atoms(softmax(logits) * support)."""
    num_atoms = support.shape[0]

    def forward(observation):
        features = dqn_torso(observation)
        if config.dueling:
            logits = dueling_head(features, num_actions, num_atoms, config.hidden_size,
                                  config.noisy_nets, config.noisy_sigma0)
        else:
            hidden = jax.nn.relu(_linear(config.hidden_size, config.noisy_nets, config.noisy_sigma0,
                                         "hidden")(features))
            logits = _linear(num_actions * num_atoms, config.noisy_nets, config.noisy_sigma0, "q")(hidden)
            logits = logits.reshape(-1, num_actions, num_atoms)
        probabilities = jax.nn.softmax(logits, axis=-1)
        q_values = jnp.sum(probabilities * support, axis=-1)
        return {"q_logits": logits, "q_values": jax.lax.stop_gradient(q_values)}

    return hk.transform(forward)


def quantile_network(num_actions: int, num_quantiles: int, config) -> hk.Transformed:
    """QR-DQN: `num_quantiles` equally weighted quantile estimates per action; q is their mean."""

    def forward(observation):
        features = dqn_torso(observation)
        hidden = jax.nn.relu(hk.Linear(config.hidden_size)(features))
        quantiles = hk.Linear(num_actions * num_quantiles)(hidden).reshape(-1, num_quantiles, num_actions)
        return {"q_dist": quantiles, "q_values": jnp.mean(quantiles, axis=1)}

    return hk.transform(forward)
