"""PPO for Brax locomotion, the whole training loop jitted: rollouts and updates under jax.lax.scan."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from brax import envs
from flax.training.train_state import TrainState

from network import ActorCritic
from wrappers import ClipAction, LogWrapper, NormalizeVecObservation, NormalizeVecReward, VecEnv


class Transition(NamedTuple):
    done: jnp.ndarray
    action: jnp.ndarray
    value: jnp.ndarray
    reward: jnp.ndarray
    log_prob: jnp.ndarray
    obs: jnp.ndarray
    info: jnp.ndarray


def make_env(config):
    env = envs.get_environment(config["env_name"], backend=config["backend"])
    env = LogWrapper(env)
    env = ClipAction(env)
    env = VecEnv(env)
    if config["normalize_env"]:
        env = NormalizeVecObservation(env)
        env = NormalizeVecReward(env, config["gamma"])
    return env


def make_train(config):
    config["num_updates"] = config["total_timesteps"] // config["num_steps"] // config["num_envs"]
    config["minibatch_size"] = config["num_envs"] * config["num_steps"] // config["num_minibatches"]
    env = make_env(config)

    def linear_schedule(count):
        frac = 1.0 - (count // (config["num_minibatches"] * config["update_epochs"])) / config["num_updates"]
        return config["lr"] * frac

    def train(rng):
        network = ActorCritic(config["action_dim"], activation=config["activation"])
        rng, _rng = jax.random.split(rng)
        network_params = network.init(_rng, jnp.zeros(config["obs_dim"]))
        if config["anneal_lr"]:
            tx = optax.chain(optax.clip_by_global_norm(config["max_grad_norm"]),
                             optax.adam(learning_rate=linear_schedule, eps=1e-5))
        else:
            tx = optax.chain(optax.clip_by_global_norm(config["max_grad_norm"]),
                             optax.adam(config["lr"], eps=1e-5))
        train_state = TrainState.create(apply_fn=network.apply, params=network_params, tx=tx)
        rng, _rng = jax.random.split(rng)
        reset_rng = jax.random.split(_rng, config["num_envs"])
        obsv, env_state = env.reset(reset_rng, None)

        def _update_step(runner_state, unused):
            def _env_step(runner_state, unused):
                train_state, env_state, last_obs, rng = runner_state
                rng, _rng = jax.random.split(rng)
                pi, value = network.apply(train_state.params, last_obs)
                action = pi.sample(seed=_rng)
                log_prob = pi.log_prob(action)
                rng, _rng = jax.random.split(rng)
                rng_step = jax.random.split(_rng, config["num_envs"])
                obsv, env_state, reward, done, info = env.step(rng_step, env_state, action, None)
                transition = Transition(done, action, value, reward, log_prob, last_obs, info)
                return (train_state, env_state, obsv, rng), transition

            runner_state, traj_batch = jax.lax.scan(_env_step, runner_state, None, config["num_steps"])
            train_state, env_state, last_obs, rng = runner_state
            _, last_val = network.apply(train_state.params, last_obs)

            def _calculate_gae(traj_batch, last_val):
                def _get_advantages(gae_and_next_value, transition):
                    gae, next_value = gae_and_next_value
                    done, value, reward = transition.done, transition.value, transition.reward
                    delta = reward + config["gamma"] * next_value * (1 - done) - value
                    gae = delta + config["gamma"] * config["gae_lambda"] * (1 - done) * gae
                    return (gae, value), gae

                _, advantages = jax.lax.scan(_get_advantages, (jnp.zeros_like(last_val), last_val),
                                             traj_batch, reverse=True, unroll=16)
                return advantages, advantages + traj_batch.value

            advantages, targets = _calculate_gae(traj_batch, last_val)

            def _update_epoch(update_state, unused):
                def _update_minbatch(train_state, batch_info):
                    traj_batch, advantages, targets = batch_info

                    def _loss_fn(params, traj_batch, gae, targets):
                        pi, value = network.apply(params, traj_batch.obs)
                        log_prob = pi.log_prob(traj_batch.action)
                        value_pred_clipped = traj_batch.value + (value - traj_batch.value).clip(
                            -config["clip_eps"], config["clip_eps"])
                        value_losses = jnp.square(value - targets)
                        value_losses_clipped = jnp.square(value_pred_clipped - targets)
                        value_loss = 0.5 * jnp.maximum(value_losses, value_losses_clipped).mean()
                        ratio = jnp.exp(log_prob - traj_batch.log_prob)
                        gae = (gae - gae.mean()) / (gae.std() + 1e-8)
                        loss_actor1 = ratio * gae
                        loss_actor2 = jnp.clip(ratio, 1.0 - config["clip_eps"], 1.0 + config["clip_eps"]) * gae
                        loss_actor = -jnp.minimum(loss_actor1, loss_actor2).mean()
                        entropy = pi.entropy().mean()
                        total_loss = loss_actor + config["vf_coef"] * value_loss - config["ent_coef"] * entropy
                        return total_loss, (value_loss, loss_actor, entropy)

                    grad_fn = jax.value_and_grad(_loss_fn, has_aux=True)
                    total_loss, grads = grad_fn(train_state.params, traj_batch, advantages, targets)
                    return train_state.apply_gradients(grads=grads), total_loss

                train_state, traj_batch, advantages, targets, rng = update_state
                rng, _rng = jax.random.split(rng)
                batch_size = config["minibatch_size"] * config["num_minibatches"]
                permutation = jax.random.permutation(_rng, batch_size)
                batch = jax.tree_util.tree_map(lambda x: x.reshape((batch_size,) + x.shape[2:]),
                                               (traj_batch, advantages, targets))
                shuffled = jax.tree_util.tree_map(lambda x: jnp.take(x, permutation, axis=0), batch)
                minibatches = jax.tree_util.tree_map(
                    lambda x: jnp.reshape(x, [config["num_minibatches"], -1] + list(x.shape[1:])), shuffled)
                train_state, total_loss = jax.lax.scan(_update_minbatch, train_state, minibatches)
                return (train_state, traj_batch, advantages, targets, rng), total_loss

            update_state = (train_state, traj_batch, advantages, targets, rng)
            update_state, loss_info = jax.lax.scan(_update_epoch, update_state, None, config["update_epochs"])
            train_state, rng = update_state[0], update_state[-1]
            return (train_state, env_state, last_obs, rng), traj_batch.info

        rng, _rng = jax.random.split(rng)
        runner_state = (train_state, env_state, obsv, _rng)
        runner_state, metric = jax.lax.scan(_update_step, runner_state, None, config["num_updates"])
        return {"runner_state": runner_state, "metrics": metric}

    return train


def run_seeds(config, num_seeds):
    rngs = jax.random.split(jax.random.PRNGKey(config["seed"]), num_seeds)
    train_vjit = jax.jit(jax.vmap(make_train(config)))
    return train_vjit(rngs)


def summarize(metrics):
    returns = np.asarray(metrics["returned_episode_returns"])
    return {"final_return": float(returns[:, -1].mean()), "best_return": float(returns.max())}
