"""A uniform replay buffer on host memory, n-step returns and running observation statistics."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Batch(NamedTuple):
    observations: jnp.ndarray
    actions: jnp.ndarray
    rewards: jnp.ndarray
    next_observations: jnp.ndarray
    dones: jnp.ndarray
    discounts: jnp.ndarray


class ReplayBuffer:
    def __init__(self, obs_dim: int, act_dim: int, capacity: int, n_step: int = 1, gamma: float = 0.99):
        self.capacity = capacity
        self.n_step = n_step
        self.gamma = gamma
        self.observations = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.actions = np.zeros((capacity, act_dim), dtype=np.float32)
        self.rewards = np.zeros((capacity,), dtype=np.float32)
        self.next_observations = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.dones = np.zeros((capacity,), dtype=np.float32)
        self.discounts = np.zeros((capacity,), dtype=np.float32)
        self.insert_index = 0
        self.size = 0
        self._pending = []

    def insert(self, obs, action, reward, next_obs, terminated, truncated):
        self._pending.append((obs, action, reward, next_obs, terminated))
        if len(self._pending) == self.n_step or terminated or truncated:
            while self._pending:
                self._flush_nstep()
                if not (terminated or truncated):
                    break

    def _flush_nstep(self):
        """Fold the pending transitions into one n-step transition from the oldest."""
        obs, action = self._pending[0][0], self._pending[0][1]
        ret, discount, done = 0.0, 1.0, 0.0
        for _, _, r, next_obs, terminated in self._pending:
            ret += discount * r
            discount *= self.gamma
            if terminated:
                done = 1.0
                break
        i = self.insert_index
        self.observations[i], self.actions[i], self.rewards[i] = obs, action, ret
        self.next_observations[i], self.dones[i], self.discounts[i] = next_obs, done, discount
        self.insert_index = (self.insert_index + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self._pending.pop(0)

    def sample(self, key: jax.random.PRNGKey, batch_size: int) -> Batch:
        indx = np.asarray(jax.random.randint(key, (batch_size,), 0, self.size))
        return Batch(self.observations[indx], self.actions[indx], self.rewards[indx],
                     self.next_observations[indx], self.dones[indx], self.discounts[indx])


class RunningMeanStd:
    """Welford statistics of the observations, to feed the networks standardised inputs."""

    def __init__(self, shape, epsilon: float = 1e-4, clip_obs: float = 10.0):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon
        self.clip_obs = clip_obs

    def update(self, x):
        batch_mean, batch_var, batch_count = x.mean(0), x.var(0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total

    def normalize(self, x):
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -self.clip_obs, self.clip_obs)
