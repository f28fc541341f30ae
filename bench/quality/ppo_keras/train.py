"""Config-driven PPO trainer: `python train.py configs/halfcheetah.yaml [key=value ...]`."""

import logging
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from agents.gae import compute_gae
from agents.ppo import PPOAgent, PPOConfig
from envs.wrappers import make_env

log = logging.getLogger("ppo")


def load_config(path: str, overrides: list[str]) -> dict:
    config = yaml.safe_load(Path(path).read_text())
    for item in overrides:
        key, _, value = item.partition("=")
        section, _, name = key.rpartition(".")
        target = config[section] if section else config
        target[name] = yaml.safe_load(value)
    return config


class RolloutBuffer:
    def __init__(self, num_steps: int, num_envs: int, obs_dim: int, action_dim: int):
        self.obs = np.zeros((num_steps, num_envs, obs_dim), np.float32)
        self.actions = np.zeros((num_steps, num_envs, action_dim), np.float32)
        self.logp = np.zeros((num_steps, num_envs), np.float32)
        self.rewards = np.zeros((num_steps, num_envs), np.float32)
        self.dones = np.zeros((num_steps, num_envs), np.float32)
        self.values = np.zeros((num_steps, num_envs), np.float32)

    def flatten(self, advantages: np.ndarray, returns: np.ndarray) -> dict:
        def flat(x):
            return x.reshape((-1,) + x.shape[2:])
        return {"obs": flat(self.obs), "actions": flat(self.actions), "logp": flat(self.logp),
                "values": flat(self.values), "advantages": flat(advantages), "returns": flat(returns)}


def train(config: dict) -> None:
    env_cfg, ppo_cfg = config["env"], PPOConfig(**config["ppo"])
    num_envs, num_steps = env_cfg["num_envs"], config["rollout"]["num_steps"]
    gamma, gae_lambda = config["rollout"]["gamma"], config["rollout"]["gae_lambda"]
    envs = make_env(env_cfg["id"], num_envs, config["seed"], gamma)
    obs_dim = envs.single_observation_space.shape[0]
    action_dim = envs.single_action_space.shape[0]
    agent = PPOAgent(obs_dim, action_dim, ppo_cfg, tuple(config["model"]["hidden_sizes"]))
    buffer = RolloutBuffer(num_steps, num_envs, obs_dim, action_dim)
    num_updates = config["total_timesteps"] // (num_envs * num_steps)

    obs, _ = envs.reset()
    started = time.time()
    for update in range(1, num_updates + 1):
        if ppo_cfg.anneal_lr:
            frac = 1.0 - (update - 1.0) / num_updates
            agent.optimizer.learning_rate = frac * ppo_cfg.learning_rate
        for step in range(num_steps):
            action, logp, value = agent.act(obs)
            next_obs, reward, terminated, truncated, info = envs.step(action)
            buffer.obs[step], buffer.actions[step], buffer.logp[step] = obs, action, logp
            buffer.rewards[step], buffer.values[step] = reward, value
            buffer.dones[step] = np.logical_or(terminated, truncated)
            obs = next_obs
        last_value = np.asarray(agent.critic(obs))
        advantages, returns = compute_gae(buffer.rewards, buffer.values, buffer.dones, last_value,
                                          gamma=gamma, lam=gae_lambda)
        stats = agent.update(buffer.flatten(advantages, returns))
        if update % 10 == 0:
            sps = int(update * num_envs * num_steps / (time.time() - started))
            log.info("update %d kl %.4f clip %.3f sps %d", update, stats["approx_kl"], stats["clip_frac"], sps)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    train(load_config(sys.argv[1], sys.argv[2:]))
