"""Returns and advantages from a rollout: generalised advantage estimation, computed backwards."""

import numpy as np


def compute_gae(rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_value: np.ndarray,
                gamma: float = 0.99, lam: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """rewards, values, dones: (T, num_envs). `dones[t]` marks that step t ended an episode.

    delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t);  A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}
    """
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last_gae = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(num_steps)):
        next_value = last_value if t == num_steps - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * not_done - values[t]
        last_gae = delta + gamma * lam * not_done * last_gae
        advantages[t] = last_gae
    returns = advantages + values
    return advantages, returns


def normalize_advantages(advantages: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    return (advantages - advantages.mean()) / (advantages.std() + eps)
