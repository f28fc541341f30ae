"""Soft actor-critic: jitted critic, actor and temperature updates on flax TrainStates."""
import functools
from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

from networks import Actor, Ensemble, Temperature, sample_and_log_prob, subsample_ensemble


class CriticTrainState(train_state.TrainState):
    target_params: flax.core.FrozenDict


class SACState(flax.struct.PyTreeNode):
    actor: train_state.TrainState
    critic: CriticTrainState
    temp: train_state.TrainState
    rng: Any


def create_sac_state(key, obs, action, cfg) -> SACState:
    actor_key, critic_key, temp_key, rng = jax.random.split(key, 4)
    act_dim = action.shape[-1]
    actor_def = Actor(act_dim, tuple(cfg.hidden_dims))
    actor = train_state.TrainState.create(
        apply_fn=actor_def.apply, params=actor_def.init(actor_key, obs)["params"],
        tx=optax.adam(learning_rate=cfg.actor_lr))
    critic_def = Ensemble(tuple(cfg.hidden_dims), num_qs=cfg.num_qs,
                          use_layer_norm=cfg.critic_layer_norm, dropout_rate=cfg.critic_dropout)
    critic_params = critic_def.init(critic_key, obs, action)["params"]
    critic = CriticTrainState.create(
        apply_fn=critic_def.apply, params=critic_params, target_params=critic_params,
        tx=optax.adam(learning_rate=cfg.critic_lr))
    temp_def = Temperature(cfg.init_temperature)
    temp = train_state.TrainState.create(
        apply_fn=temp_def.apply, params=temp_def.init(temp_key)["params"],
        tx=optax.adam(learning_rate=cfg.temp_lr, b1=0.5))
    return SACState(actor=actor, critic=critic, temp=temp, rng=rng)


def update_critic(state: SACState, batch, cfg):
    rng, next_key, sub_key, dropout_key = jax.random.split(state.rng, 4)
    mean, std = state.actor.apply_fn({"params": state.actor.params}, batch.next_observations)
    next_actions, next_log_probs = sample_and_log_prob(mean, std, next_key)
    target_params = subsample_ensemble(sub_key, state.critic.target_params, cfg.num_min_qs, cfg.num_qs)
    next_qs = state.critic.apply_fn({"params": target_params}, batch.next_observations, next_actions)
    next_q = next_qs.min(axis=0)
    alpha = state.temp.apply_fn({"params": state.temp.params})
    if cfg.backup_entropy:
        next_q -= alpha * next_log_probs
    target_q = cfg.reward_scale * batch.rewards + batch.discounts * (1.0 - batch.dones) * next_q
    target_q = jax.lax.stop_gradient(target_q)

    def critic_loss_fn(critic_params):
        qs = state.critic.apply_fn({"params": critic_params}, batch.observations, batch.actions,
                                   training=True, rngs={"dropout": dropout_key})
        critic_loss = ((qs - target_q) ** 2).mean()
        return critic_loss, {"critic_loss": critic_loss, "q": qs.mean()}

    grads, info = jax.grad(critic_loss_fn, has_aux=True)(state.critic.params)
    critic = state.critic.apply_gradients(grads=grads)
    target_params = optax.incremental_update(critic.params, critic.target_params, cfg.tau)
    critic = critic.replace(target_params=target_params)
    return state.replace(critic=critic, rng=rng), info


def update_actor(state: SACState, batch, cfg):
    rng, key = jax.random.split(state.rng)
    alpha = state.temp.apply_fn({"params": state.temp.params})

    def actor_loss_fn(actor_params):
        mean, std = state.actor.apply_fn({"params": actor_params}, batch.observations)
        actions, log_probs = sample_and_log_prob(mean, std, key)
        qs = state.critic.apply_fn({"params": state.critic.params}, batch.observations, actions)
        q = qs.mean(axis=0) if cfg.actor_mean_q else qs.min(axis=0)
        actor_loss = (alpha * log_probs - q).mean()
        return actor_loss, {"actor_loss": actor_loss, "entropy": -log_probs.mean()}

    grads, info = jax.grad(actor_loss_fn, has_aux=True)(state.actor.params)
    actor = state.actor.apply_gradients(grads=grads)
    return state.replace(actor=actor, rng=rng), info


def update_temperature(state: SACState, entropy: float, target_entropy: float):
    def temperature_loss_fn(temp_params):
        alpha = state.temp.apply_fn({"params": temp_params})
        temp_loss = alpha * (entropy - target_entropy).mean()
        return temp_loss, {"alpha": alpha, "temp_loss": temp_loss}

    grads, info = jax.grad(temperature_loss_fn, has_aux=True)(state.temp.params)
    temp = state.temp.apply_gradients(grads=grads)
    return state.replace(temp=temp), info


@functools.partial(jax.jit, static_argnames=("cfg", "utd_ratio", "update_actor_now"))
def update(state: SACState, batch, cfg, utd_ratio: int, update_actor_now: bool):
    """`utd_ratio` critic steps on slices of one big batch, then (every `policy_frequency`) the actor."""
    for i in range(utd_ratio):
        def slice_(x):
            size = x.shape[0] // utd_ratio
            return x[size * i:size * (i + 1)]
        mini_batch = jax.tree_util.tree_map(slice_, batch)
        state, critic_info = update_critic(state, mini_batch, cfg)
    if not update_actor_now:
        return state, critic_info
    for _ in range(cfg.policy_frequency if cfg.delayed_actor_catchup else 1):
        state, actor_info = update_actor(state, mini_batch, cfg)
    target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -mini_batch.actions.shape[-1]
    if cfg.autotune:
        state, temp_info = update_temperature(state, actor_info["entropy"], target_entropy)
    else:
        temp_info = {}
    return state, {**critic_info, **actor_info, **temp_info}


@jax.jit
def sample_actions(state: SACState, obs, key):
    mean, std = state.actor.apply_fn({"params": state.actor.params}, obs)
    return jnp.tanh(mean + std * jax.random.normal(key, mean.shape))


@jax.jit
def eval_actions(state: SACState, obs):
    mean, _ = state.actor.apply_fn({"params": state.actor.params}, obs)
    return jnp.tanh(mean)
