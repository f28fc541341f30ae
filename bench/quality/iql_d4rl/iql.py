"""Implicit Q-learning (IQL) as one jitted learner: expectile regression of V towards the twin target Q,
a one-step TD backup of Q through V, and advantage-weighted extraction of the policy.

The update of all three nets is one pure function over a `flax.struct` state; `update_n` runs several
gradient steps inside one `jax.jit` with `jax.lax.scan`, which is what keeps the 1M-step runs short.
"""

from functools import partial
from typing import Any, Callable, Tuple

import flax
import jax
import jax.numpy as jnp
import optax
from flax import struct

from networks import DoubleCritic, NormalTanhPolicy, ValueCritic

Params = flax.core.FrozenDict[str, Any]


class Model(struct.PyTreeNode):
    apply_fn: Callable = struct.field(pytree_node=False)
    params: Params
    tx: optax.GradientTransformation = struct.field(pytree_node=False)
    opt_state: optax.OptState
    step: int = 0

    @classmethod
    def create(cls, module, params, tx):
        return cls(apply_fn=module.apply, params=params, tx=tx, opt_state=tx.init(params))

    def apply_gradient(self, loss_fn) -> Tuple["Model", Any]:
        grads, info = jax.grad(loss_fn, has_aux=True)(self.params)
        updates, new_opt_state = self.tx.update(grads, self.opt_state, self.params)
        new_params = optax.apply_updates(self.params, updates)
        return self.replace(params=new_params, opt_state=new_opt_state, step=self.step + 1), info


class IQLState(struct.PyTreeNode):
    actor: Model
    critic: Model
    value: Model
    target_critic: Params
    rng: jax.Array


def expectile_loss(diff: jnp.ndarray, expectile: float = 0.8) -> jnp.ndarray:
    weight = jnp.where(diff > 0, expectile, 1 - expectile)
    return weight * (diff ** 2)


def update_v(state: IQLState, batch, expectile: float):
    q1, q2 = state.critic.apply_fn({"params": state.target_critic}, batch.observations, batch.actions)
    q = jnp.minimum(q1, q2)

    def value_loss_fn(value_params):
        v = state.value.apply_fn({"params": value_params}, batch.observations)
        value_loss = expectile_loss(q - v, expectile).mean()
        return value_loss, {"value_loss": value_loss, "v": v.mean()}

    new_value, info = state.value.apply_gradient(value_loss_fn)
    return new_value, info


def update_q(state: IQLState, new_value: Model, batch, discount: float):
    next_v = new_value.apply_fn({"params": new_value.params}, batch.next_observations)
    target_q = batch.rewards + discount * batch.masks * next_v

    def critic_loss_fn(critic_params):
        q1, q2 = state.critic.apply_fn({"params": critic_params}, batch.observations, batch.actions)
        critic_loss = ((q1 - target_q) ** 2 + (q2 - target_q) ** 2).mean()
        return critic_loss, {"critic_loss": critic_loss, "q1": q1.mean(), "q2": q2.mean()}

    new_critic, info = state.critic.apply_gradient(critic_loss_fn)
    return new_critic, info


def update_actor(state: IQLState, new_value: Model, batch, temperature: float, exp_adv_max: float):
    v = new_value.apply_fn({"params": new_value.params}, batch.observations)
    q1, q2 = state.critic.apply_fn({"params": state.target_critic}, batch.observations, batch.actions)
    q = jnp.minimum(q1, q2)
    exp_a = jnp.exp((q - v) * temperature)
    exp_a = jnp.minimum(exp_a, exp_adv_max)
    rng, key = jax.random.split(state.rng)

    def actor_loss_fn(actor_params):
        dist = state.actor.apply_fn({"params": actor_params}, batch.observations, training=True,
                                    rngs={"dropout": key})
        log_probs = dist.log_prob(batch.actions)
        actor_loss = -(exp_a * log_probs).mean()
        return actor_loss, {"actor_loss": actor_loss, "adv": (q - v).mean()}

    new_actor, info = state.actor.apply_gradient(actor_loss_fn)
    return new_actor, rng, info


def target_update(critic: Model, target_params: Params, tau: float) -> Params:
    return jax.tree_util.tree_map(lambda p, tp: p * tau + tp * (1 - tau), critic.params, target_params)


def _update_step(state: IQLState, batch, discount: float, tau: float, expectile: float,
                 temperature: float, exp_adv_max: float):
    new_value, value_info = update_v(state, batch, expectile)
    new_actor, rng, actor_info = update_actor(state, new_value, batch, temperature, exp_adv_max)
    new_critic, critic_info = update_q(state, new_value, batch, discount)
    new_target = target_update(new_critic, state.target_critic, tau)
    new_state = state.replace(actor=new_actor, critic=new_critic, value=new_value,
                              target_critic=new_target, rng=rng)
    return new_state, {**critic_info, **value_info, **actor_info}


@partial(jax.jit, static_argnames=("discount", "tau", "expectile", "temperature", "exp_adv_max"))
def update_n(state: IQLState, batches, discount: float, tau: float, expectile: float,
             temperature: float, exp_adv_max: float):
    """`batches` carries a leading axis of `num_updates`: one scan step per gradient step."""
    def body(carry, batch):
        return _update_step(carry, batch, discount, tau, expectile, temperature, exp_adv_max)

    state, infos = jax.lax.scan(body, state, batches)
    return state, jax.tree_util.tree_map(lambda x: x[-1], infos)


def create_iql(seed: int, observations: jnp.ndarray, actions: jnp.ndarray, config) -> IQLState:
    rng = jax.random.PRNGKey(seed)
    rng, actor_key, critic_key, value_key = jax.random.split(rng, 4)
    action_dim = actions.shape[-1]

    actor_def = NormalTanhPolicy(config.hidden_dims, action_dim, log_std_min=-5.0,
                                 state_dependent_std=False, tanh_squash_distribution=False,
                                 dropout_rate=config.dropout_rate)
    if config.opt_decay_schedule == "cosine":
        schedule_fn = optax.cosine_decay_schedule(-config.actor_lr, config.max_steps)
        actor_tx = optax.chain(optax.scale_by_adam(), optax.scale_by_schedule(schedule_fn))
    else:
        actor_tx = optax.adam(learning_rate=config.actor_lr)
    actor_params = actor_def.init(actor_key, observations)["params"]
    actor = Model.create(actor_def, actor_params, actor_tx)

    critic_def = DoubleCritic(config.hidden_dims, layer_norm=config.critic_layer_norm)
    critic_params = critic_def.init(critic_key, observations, actions)["params"]
    critic = Model.create(critic_def, critic_params, optax.adam(learning_rate=config.critic_lr))

    value_def = ValueCritic(config.hidden_dims, layer_norm=config.critic_layer_norm)
    value_params = value_def.init(value_key, observations)["params"]
    value = Model.create(value_def, value_params, optax.adam(learning_rate=config.value_lr))

    return IQLState(actor=actor, critic=critic, value=value, target_critic=critic_params, rng=rng)
