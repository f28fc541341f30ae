"""D4RL datasets as the offline learners read them: transitions with masks that tell a true terminal
from a time-limit cut, rewards rescaled per task family, and observations standardised by the
dataset's own statistics (kept, so evaluation sees the same inputs).
"""

import collections
from typing import Tuple

import d4rl
import gym
import numpy as np

Batch = collections.namedtuple("Batch", ["observations", "actions", "rewards", "masks", "next_observations"])


def split_into_trajectories(observations, actions, rewards, masks, dones_float, next_observations):
    trajs = [[]]
    for i in range(len(observations)):
        trajs[-1].append((observations[i], actions[i], rewards[i], masks[i], dones_float[i],
                          next_observations[i]))
        if dones_float[i] == 1.0 and i + 1 < len(observations):
            trajs.append([])
    return trajs


class D4RLDataset:
    def __init__(self, env: gym.Env, clip_to_eps: bool = True, eps: float = 1e-5):
        dataset = d4rl.qlearning_dataset(env)
        if clip_to_eps:
            lim = 1 - eps
            dataset["actions"] = np.clip(dataset["actions"], -lim, lim)

        dones_float = np.zeros_like(dataset["rewards"])
        for i in range(len(dones_float) - 1):
            if np.linalg.norm(dataset["observations"][i + 1] - dataset["next_observations"][i]) > 1e-6 \
                    or dataset["terminals"][i] == 1.0:
                dones_float[i] = 1
            else:
                dones_float[i] = 0
        dones_float[-1] = 1

        self.observations = dataset["observations"].astype(np.float32)
        self.actions = dataset["actions"].astype(np.float32)
        self.rewards = dataset["rewards"].astype(np.float32)
        self.masks = 1.0 - dataset["terminals"].astype(np.float32)
        self.dones_float = dones_float.astype(np.float32)
        self.next_observations = dataset["next_observations"].astype(np.float32)
        self.size = len(self.observations)

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        indx = rng.integers(self.size, size=batch_size)
        return Batch(observations=self.observations[indx], actions=self.actions[indx],
                     rewards=self.rewards[indx], masks=self.masks[indx],
                     next_observations=self.next_observations[indx])

    def sample_n(self, rng: np.random.Generator, batch_size: int, num_updates: int) -> Batch:
        indx = rng.integers(self.size, size=(num_updates, batch_size))
        return Batch(observations=self.observations[indx], actions=self.actions[indx],
                     rewards=self.rewards[indx], masks=self.masks[indx],
                     next_observations=self.next_observations[indx])


def normalize_rewards(dataset: D4RLDataset, env_name: str, reward_scale: float = 1000.0,
                      reward_bias: float = -1.0):
    if "antmaze" in env_name:
        dataset.rewards = dataset.rewards + reward_bias
    elif any(name in env_name for name in ("halfcheetah", "hopper", "walker2d")):
        trajs = split_into_trajectories(dataset.observations, dataset.actions, dataset.rewards,
                                        dataset.masks, dataset.dones_float, dataset.next_observations)
        returns = [sum(r for _, _, r, _, _, _ in traj) for traj in trajs]
        dataset.rewards = dataset.rewards / (max(returns) - min(returns)) * reward_scale


def normalize_observations(dataset: D4RLDataset, eps: float = 1e-3) -> Tuple[np.ndarray, np.ndarray]:
    mean = dataset.observations.mean(0)
    std = dataset.observations.std(0) + eps
    dataset.observations = (dataset.observations - mean) / std
    dataset.next_observations = (dataset.next_observations - mean) / std
    return mean, std


def filter_top_trajectories(dataset: D4RLDataset, fraction: float):
    trajs = split_into_trajectories(dataset.observations, dataset.actions, dataset.rewards,
                                    dataset.masks, dataset.dones_float, dataset.next_observations)
    returns = np.array([sum(t[2] for t in traj) for traj in trajs])
    keep = np.argsort(-returns)[: max(1, int(len(trajs) * fraction))]
    rows = [step for i in keep for step in trajs[i]]
    dataset.observations, dataset.actions, dataset.rewards, dataset.masks, dataset.dones_float, \
        dataset.next_observations = (np.stack(col).astype(np.float32) for col in zip(*rows))
    dataset.size = len(dataset.observations)


class NormalizedObservation(gym.ObservationWrapper):
    def __init__(self, env: gym.Env, mean: np.ndarray, std: np.ndarray):
        super().__init__(env)
        self.mean = mean
        self.std = std

    def observation(self, observation):
        return (observation - self.mean) / self.std


def make_env_and_dataset(env_name: str, seed: int, config) -> Tuple[gym.Env, D4RLDataset]:
    env = gym.make(env_name)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env.seed(seed)
    env.action_space.seed(seed)
    env.observation_space.seed(seed)

    dataset = D4RLDataset(env)
    if config.bc_top_fraction < 1.0:
        filter_top_trajectories(dataset, config.bc_top_fraction)
    normalize_rewards(dataset, env_name, config.reward_scale, config.reward_bias)
    if config.normalize_states:
        mean, std = normalize_observations(dataset)
        env = NormalizedObservation(env, mean, std)
    return env, dataset
