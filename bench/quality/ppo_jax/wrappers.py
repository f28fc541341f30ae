"""Environment wrappers for Brax: vectorised envs, episode logging, observation and reward normalisation."""

from functools import partial

import jax
import jax.numpy as jnp
from flax import struct


class VecEnv:
    def __init__(self, env):
        self._env = env
        self.reset = jax.vmap(self._env.reset, in_axes=(0, None))
        self.step = jax.vmap(self._env.step, in_axes=(0, 0, 0, None))


@struct.dataclass
class LogEnvState:
    env_state: object
    episode_returns: float
    episode_lengths: int
    returned_episode_returns: float
    returned_episode_lengths: int
    timestep: int


class LogWrapper:
    def __init__(self, env):
        self._env = env

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key, state, action, params=None):
        obs, env_state, reward, done, info = self._env.step(key, state.env_state, action, params)
        new_episode_return = state.episode_returns + reward
        new_episode_length = state.episode_lengths + 1
        state = LogEnvState(
            env_state=env_state,
            episode_returns=new_episode_return * (1 - done),
            episode_lengths=new_episode_length * (1 - done),
            returned_episode_returns=state.returned_episode_returns * (1 - done) + new_episode_return * done,
            returned_episode_lengths=state.returned_episode_lengths * (1 - done) + new_episode_length * done,
            timestep=state.timestep + 1,
        )
        info["returned_episode_returns"] = state.returned_episode_returns
        return obs, state, reward, done, info


class ClipAction:
    def __init__(self, env, low=-1.0, high=1.0):
        self._env = env
        self.low, self.high = low, high

    def step(self, key, state, action, params=None):
        action = jnp.clip(action, self.low, self.high)
        return self._env.step(key, state, action, params)


@struct.dataclass
class NormalizeVecObsEnvState:
    mean: jnp.ndarray
    var: jnp.ndarray
    count: float
    env_state: object


class NormalizeVecObservation:
    def __init__(self, env):
        self._env = env

    def step(self, key, state, action, params=None):
        obs, env_state, reward, done, info = self._env.step(key, state.env_state, action, params)
        batch_mean = jnp.mean(obs, axis=0)
        batch_var = jnp.var(obs, axis=0)
        batch_count = obs.shape[0]
        delta = batch_mean - state.mean
        tot_count = state.count + batch_count
        new_mean = state.mean + delta * batch_count / tot_count
        m_a = state.var * state.count
        m_b = batch_var * batch_count
        M2 = m_a + m_b + jnp.square(delta) * state.count * batch_count / tot_count
        new_var = M2 / tot_count
        state = NormalizeVecObsEnvState(mean=new_mean, var=new_var, count=tot_count, env_state=env_state)
        return (obs - state.mean) / jnp.sqrt(state.var + 1e-8), state, reward, done, info


@struct.dataclass
class NormalizeVecRewEnvState:
    mean: jnp.ndarray
    var: jnp.ndarray
    count: float
    return_val: float
    env_state: object


class NormalizeVecReward:
    def __init__(self, env, gamma):
        self._env = env
        self.gamma = gamma

    def step(self, key, state, action, params=None):
        obs, env_state, reward, done, info = self._env.step(key, state.env_state, action, params)
        return_val = state.return_val * self.gamma * (1 - done) + reward
        batch_mean = jnp.mean(return_val, axis=0)
        batch_var = jnp.var(return_val, axis=0)
        batch_count = obs.shape[0]
        delta = batch_mean - state.mean
        tot_count = state.count + batch_count
        new_mean = state.mean + delta * batch_count / tot_count
        M2 = state.var * state.count + batch_var * batch_count + jnp.square(delta) * state.count * batch_count / tot_count
        state = NormalizeVecRewEnvState(mean=new_mean, var=M2 / tot_count, count=tot_count,
                                        return_val=return_val, env_state=env_state)
        return obs, state, reward / jnp.sqrt(state.var + 1e-8), done, info
