"""Gymnasium wrappers for continuous control: running observation/return normalisation, clipping."""

import gymnasium as gym
import numpy as np


class RunningMeanStd:
    """Streaming mean and variance (parallel algorithm of Chan et al.)."""

    def __init__(self, shape=(), epsilon: float = 1e-4):
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, x: np.ndarray) -> None:
        batch_mean, batch_var, batch_count = x.mean(axis=0), x.var(axis=0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta ** 2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total


class NormalizeObservation(gym.vector.VectorWrapper):
    def __init__(self, env, clip_obs: float = 10.0, epsilon: float = 1e-8):
        super().__init__(env)
        self.obs_rms = RunningMeanStd(shape=env.single_observation_space.shape)
        self.clip_obs = clip_obs
        self.epsilon = epsilon
        self.frozen = False

    def _normalize(self, obs):
        if not self.frozen:
            self.obs_rms.update(obs)
        return np.clip((obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon),
                       -self.clip_obs, self.clip_obs)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._normalize(obs), info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        return self._normalize(obs), rewards, terminated, truncated, info


class ScaleReward(gym.vector.VectorWrapper):
    """Divide rewards by the running std of the discounted return (not of the reward itself)."""

    def __init__(self, env, gamma: float = 0.99, clip_reward: float = 10.0, epsilon: float = 1e-8):
        super().__init__(env)
        self.return_rms = RunningMeanStd(shape=())
        self.returns = np.zeros(env.num_envs)
        self.gamma = gamma
        self.clip_reward = clip_reward
        self.epsilon = epsilon

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.returns = self.returns * self.gamma * (1 - terminated) + rewards
        self.return_rms.update(self.returns)
        rewards = np.clip(rewards / np.sqrt(self.return_rms.var + self.epsilon), -self.clip_reward, self.clip_reward)
        self.returns[terminated | truncated] = 0.0
        return obs, rewards, terminated, truncated, info


def make_env(env_id: str, num_envs: int, seed: int, gamma: float):
    envs = gym.vector.SyncVectorEnv([lambda: gym.wrappers.ClipAction(gym.make(env_id)) for _ in range(num_envs)])
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs = NormalizeObservation(envs)
    envs = ScaleReward(envs, gamma=gamma)
    envs.reset(seed=seed)
    return envs
