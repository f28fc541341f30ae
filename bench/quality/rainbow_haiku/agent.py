"""The learner and actor: Rainbow-style double Q-learning on a categorical return distribution
(or QR-DQN quantiles, or plain DQN with a Huber loss), a periodically copied target network,
optax Adam with a large epsilon and global-norm clipping, all jitted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import rlax

import networks
import replay as replay_lib


class LinearSchedule:
    """A value moving linearly from `begin_value` to `end_value` over `decay_steps`, after `begin_t`."""

    def __init__(self, begin_t: int, decay_steps: int, begin_value: float, end_value: float):
        self.begin_t = begin_t
        self.decay_steps = decay_steps
        self.begin_value = begin_value
        self.end_value = end_value

    def __call__(self, t: int) -> float:
        frac = min(max(t - self.begin_t, 0), self.decay_steps) / self.decay_steps
        return (1 - frac) * self.begin_value + frac * self.end_value


def categorical_l2_project(z_p: jnp.ndarray, probs: jnp.ndarray, z_q: jnp.ndarray) -> jnp.ndarray:
    """Projects a distribution on shifted atoms `z_p` back onto the fixed support `z_q` (C51's
    projection: each atom's mass split between its two neighbours, clipped at the ends)."""
    v_min, v_max = z_q[0], z_q[-1]
    delta_z = z_q[1] - z_q[0]
    z_p = jnp.clip(z_p, v_min, v_max)
    weights = jnp.clip(1.0 - jnp.abs(z_p[None, :] - z_q[:, None]) / delta_z, 0.0, 1.0)
    return jnp.sum(weights * probs[None, :], axis=-1)


def categorical_double_q_loss(logits_tm1, a_tm1, r_t, discount_t, logits_t, q_t_selector, support):
    """Cross entropy between the online distribution of the taken action and the projected target
    distribution of the action the online network picks at s_t, evaluated by the target network."""
    a_t = jnp.argmax(q_t_selector)
    target_z = r_t + discount_t * support
    target_probs = jax.nn.softmax(logits_t[a_t])
    target = jax.lax.stop_gradient(categorical_l2_project(target_z, target_probs, support))
    return -jnp.sum(target * jax.nn.log_softmax(logits_tm1[a_tm1]))


def quantile_huber_loss(dist_tm1, a_tm1, r_t, discount_t, dist_t, q_t_selector, tau, kappa):
    a_t = jnp.argmax(q_t_selector)
    target = jax.lax.stop_gradient(r_t + discount_t * dist_t[:, a_t])
    diff = target[None, :] - dist_tm1[:, a_tm1][:, None]
    huber = rlax.huber_loss(diff, kappa)
    weight = jnp.abs(tau[:, None] - (diff < 0).astype(jnp.float32))
    return jnp.sum(jnp.mean(weight * huber, axis=1))


class RainbowAgent:
    """Acts epsilon-greedily (or greedily through noisy layers) and learns every `learn_period` steps."""

    def __init__(self, num_actions: int, config, rng_key: jax.Array, sample_observation: np.ndarray):
        self.config = config
        self.num_actions = num_actions
        self.support = jnp.linspace(config.v_min, config.v_max, config.num_atoms)
        if config.loss == "quantile":
            self.network = networks.quantile_network(num_actions, config.num_quantiles, config)
            self.tau = (jnp.arange(config.num_quantiles) + 0.5) / config.num_quantiles
        else:
            self.network = networks.rainbow_network(num_actions, self.support, config)
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_global_norm),
            optax.adam(config.learning_rate, eps=config.adam_eps),
        )
        init_key, self._rng_key = jax.random.split(rng_key)
        self.online_params = self.network.init(init_key, sample_observation[None])
        self.target_params = self.online_params
        self.opt_state = self.optimizer.init(self.online_params)
        self.exploration_epsilon = LinearSchedule(
            begin_t=config.min_replay_size, decay_steps=config.exploration_epsilon_decay_steps,
            begin_value=1.0, end_value=config.exploration_epsilon_end)
        self.importance_sampling_exponent = LinearSchedule(
            begin_t=config.min_replay_size, decay_steps=config.num_iterations * config.steps_per_iteration,
            begin_value=config.importance_sampling_exponent_begin, end_value=1.0)
        self._update = jax.jit(self._update_fn)
        self._select = jax.jit(self._select_fn, static_argnames="noisy")
        self.t = 0

    def _loss_fn(self, online_params, target_params, transitions, weights, rng_key):
        key_tm1, key_t, key_sel = jax.random.split(rng_key, 3)
        online_tm1 = self.network.apply(online_params, key_tm1, transitions.s_tm1)
        target_t = self.network.apply(target_params, key_t, transitions.s_t)
        online_t = self.network.apply(online_params, key_sel, transitions.s_t)
        selector = online_t["q_values"] if self.config.double_q else target_t["q_values"]
        if self.config.loss == "categorical":
            losses = jax.vmap(categorical_double_q_loss, in_axes=(0, 0, 0, 0, 0, 0, None))(
                online_tm1["q_logits"], transitions.a_tm1, transitions.r_t, transitions.discount_t,
                target_t["q_logits"], selector, self.support)
        elif self.config.loss == "quantile":
            losses = jax.vmap(quantile_huber_loss, in_axes=(0, 0, 0, 0, 0, 0, None, None))(
                online_tm1["q_dist"], transitions.a_tm1, transitions.r_t, transitions.discount_t,
                target_t["q_dist"], selector, self.tau, self.config.huber_kappa)
        else:
            q_tm1 = online_tm1["q_values"][jnp.arange(weights.shape[0]), transitions.a_tm1]
            bootstrap = jnp.take_along_axis(target_t["q_values"], jnp.argmax(selector, -1)[:, None], -1)[:, 0]
            td = transitions.r_t + transitions.discount_t * jax.lax.stop_gradient(bootstrap) - q_tm1
            losses = rlax.huber_loss(td, self.config.huber_kappa)
        loss = jnp.mean(weights * losses)
        return loss, losses

    def _update_fn(self, online_params, target_params, opt_state, transitions, weights, rng_key):
        grads, losses = jax.grad(self._loss_fn, has_aux=True)(
            online_params, target_params, transitions, weights, rng_key)
        updates, opt_state = self.optimizer.update(grads, opt_state)
        online_params = optax.apply_updates(online_params, updates)
        return online_params, opt_state, losses

    def _select_fn(self, params, rng_key, observation, epsilon, noisy: bool):
        net_key, explore_key, action_key = jax.random.split(rng_key, 3)
        q_values = self.network.apply(params, net_key, observation[None])["q_values"][0]
        greedy = jnp.argmax(q_values)
        random_action = jax.random.randint(action_key, (), 0, self.num_actions)
        return jnp.where(jax.random.uniform(explore_key) < epsilon, random_action, greedy)

    def select_action(self, observation: np.ndarray, evaluation: bool = False) -> int:
        self._rng_key, key = jax.random.split(self._rng_key)
        if evaluation:
            epsilon = self.config.eval_epsilon
        elif self.config.noisy_nets:
            epsilon = 0.0
        else:
            epsilon = self.exploration_epsilon(self.t)
        return int(self._select(self.online_params, key, observation, epsilon, noisy=not evaluation))

    def learn(self, buffer: replay_lib.PrioritizedReplay) -> dict:
        beta = self.importance_sampling_exponent(self.t)
        indices, transitions, weights = buffer.sample(self.config.batch_size, beta)
        self._rng_key, key = jax.random.split(self._rng_key)
        self.online_params, self.opt_state, losses = self._update(
            self.online_params, self.target_params, self.opt_state, transitions, weights, key)
        priorities = np.abs(np.asarray(losses)) + self.config.priority_eps
        buffer.update_priorities(indices, np.minimum(priorities, self.config.max_abs_priority))
        return {"loss": float(np.mean(losses)), "beta": beta}

    def maybe_update_target(self) -> None:
        """Hard copy every `target_update_period` agent steps, or Polyak averaging with `target_tau`."""
        if self.config.target_tau > 0:
            self.target_params = optax.incremental_update(
                self.online_params, self.target_params, self.config.target_tau)
        elif self.t % self.config.target_update_period == 0:
            self.target_params = jax.tree_util.tree_map(jnp.copy, self.online_params)
