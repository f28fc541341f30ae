"""The two other learners of the offline sheet, on the same `Model` state as IQL: conservative Q-learning
(CQL: a logsumexp penalty over sampled actions pushes Q down off the data, with a Lagrange-tuned weight)
and TD3+BC (a deterministic actor maximising a normalised Q plus a squared error to the data's action).
"""

from functools import partial

import jax
import jax.numpy as jnp
import optax
from flax import struct

from iql import Model, Params, target_update


class CQLState(struct.PyTreeNode):
    actor: Model
    critic: Model
    target_critic: Params
    log_alpha: Model
    log_cql_alpha: Model
    rng: jax.Array


def _repeat(x: jnp.ndarray, n: int) -> jnp.ndarray:
    return jnp.repeat(x[:, None, :], n, axis=1).reshape(-1, x.shape[-1])


def cql_critic_loss(state: CQLState, critic_params, batch, key, config):
    batch_size, action_dim = batch.actions.shape
    n = config.cql_n_actions
    k1, k2, k3 = jax.random.split(key, 3)

    next_dist = state.actor.apply_fn({"params": state.actor.params}, batch.next_observations)
    next_actions, next_log_probs = next_dist.sample_and_log_prob(seed=k1)
    tq1, tq2 = state.critic.apply_fn({"params": state.target_critic}, batch.next_observations, next_actions)
    target_q = jnp.minimum(tq1, tq2)
    if config.backup_entropy:
        alpha = jnp.exp(state.log_alpha.params["log_alpha"])
        target_q = target_q - alpha * next_log_probs
    target_q = batch.rewards + config.discount * batch.masks * target_q

    q1, q2 = state.critic.apply_fn({"params": critic_params}, batch.observations, batch.actions)
    td_loss = ((q1 - target_q) ** 2).mean() + ((q2 - target_q) ** 2).mean()

    obs_rep = _repeat(batch.observations, n)
    random_actions = jax.random.uniform(k2, (batch_size * n, action_dim), minval=-1.0, maxval=1.0)
    pi_dist = state.actor.apply_fn({"params": state.actor.params}, obs_rep)
    pi_actions, pi_log_probs = pi_dist.sample_and_log_prob(seed=k3)

    def ood_q(actions):
        a1, a2 = state.critic.apply_fn({"params": critic_params}, obs_rep, actions)
        return a1.reshape(batch_size, n), a2.reshape(batch_size, n)

    rand1, rand2 = ood_q(random_actions)
    pi1, pi2 = ood_q(pi_actions)
    random_density = jnp.log(0.5 ** action_dim)
    pi_log_probs = pi_log_probs.reshape(batch_size, n)
    cat1 = jnp.concatenate([rand1 - random_density, pi1 - pi_log_probs], axis=1)
    cat2 = jnp.concatenate([rand2 - random_density, pi2 - pi_log_probs], axis=1)
    lse1 = jax.scipy.special.logsumexp(cat1 / config.cql_temp, axis=1) * config.cql_temp
    lse2 = jax.scipy.special.logsumexp(cat2 / config.cql_temp, axis=1) * config.cql_temp
    gap1 = (lse1 - q1).mean()
    gap2 = (lse2 - q2).mean()

    if config.cql_lagrange:
        cql_alpha = jnp.clip(jnp.exp(state.log_cql_alpha.params["log_alpha"]), 0.0, 1e6)
        penalty = cql_alpha * (gap1 - config.cql_target_action_gap) + cql_alpha * (
            gap2 - config.cql_target_action_gap)
    else:
        penalty = config.cql_alpha * (gap1 + gap2)
    loss = td_loss + penalty
    return loss, {"td_loss": td_loss, "cql_gap": (gap1 + gap2) / 2, "q1": q1.mean()}


def update_cql_alpha(state: CQLState, gap, config):
    def loss_fn(params):
        log_alpha = params["log_alpha"]
        return -jnp.exp(log_alpha) * (gap - config.cql_target_action_gap), {}

    new_alpha, _ = state.log_cql_alpha.apply_gradient(loss_fn)
    return new_alpha


def update_temperature(state: CQLState, log_probs, target_entropy: float):
    def loss_fn(params):
        alpha = jnp.exp(params["log_alpha"])
        return (alpha * (-log_probs - target_entropy)).mean(), {}

    new_alpha, _ = state.log_alpha.apply_gradient(loss_fn)
    return new_alpha


@partial(jax.jit, static_argnames=("config",))
def cql_update(state: CQLState, batch, config):
    rng, key, actor_key = jax.random.split(state.rng, 3)
    grads, info = jax.grad(cql_critic_loss, argnums=1, has_aux=True)(state, state.critic.params, batch,
                                                                      key, config)
    updates, opt_state = state.critic.tx.update(grads, state.critic.opt_state, state.critic.params)
    critic = state.critic.replace(params=optax.apply_updates(state.critic.params, updates),
                                  opt_state=opt_state)

    def actor_loss_fn(actor_params):
        dist = state.actor.apply_fn({"params": actor_params}, batch.observations)
        actions, log_probs = dist.sample_and_log_prob(seed=actor_key)
        q1, q2 = critic.apply_fn({"params": critic.params}, batch.observations, actions)
        alpha = jnp.exp(state.log_alpha.params["log_alpha"])
        return (alpha * log_probs - jnp.minimum(q1, q2)).mean(), {"log_probs": log_probs}

    actor, actor_info = state.actor.apply_gradient(actor_loss_fn)
    log_alpha = update_temperature(state, actor_info["log_probs"], config.target_entropy)
    log_cql_alpha = update_cql_alpha(state, info["cql_gap"], config) if config.cql_lagrange \
        else state.log_cql_alpha
    target = target_update(critic, state.target_critic, config.tau)
    return state.replace(actor=actor, critic=critic, target_critic=target, log_alpha=log_alpha,
                         log_cql_alpha=log_cql_alpha, rng=rng), info


def td3_bc_actor_loss(actor_params, actor: Model, critic: Model, batch, alpha: float):
    pi = actor.apply_fn({"params": actor_params}, batch.observations)
    q, _ = critic.apply_fn({"params": critic.params}, batch.observations, pi)
    lmbda = alpha / jax.lax.stop_gradient(jnp.abs(q).mean())
    bc_loss = ((pi - batch.actions) ** 2).mean()
    actor_loss = -lmbda * q.mean() + bc_loss
    return actor_loss, {"bc_loss": bc_loss, "lmbda": lmbda}


def td3_target(actor: Model, target_actor: Params, critic: Model, target_critic: Params, batch, key,
               discount: float, policy_noise: float, noise_clip: float):
    noise = jnp.clip(jax.random.normal(key, batch.actions.shape) * policy_noise, -noise_clip, noise_clip)
    next_actions = jnp.clip(actor.apply_fn({"params": target_actor}, batch.next_observations) + noise,
                            -1.0, 1.0)
    tq1, tq2 = critic.apply_fn({"params": target_critic}, batch.next_observations, next_actions)
    return batch.rewards + discount * batch.masks * jnp.minimum(tq1, tq2)
