"""PPO-clip update: clipped surrogate, clipped value loss, entropy bonus, early stop on KL."""

from dataclasses import dataclass

import numpy as np
import keras
import tensorflow as tf
from keras import ops

from .gae import normalize_advantages
from .networks import Critic, GaussianActor, gaussian_entropy, gaussian_log_prob


@dataclass
class PPOConfig:
    clip_ratio: float = 0.2
    value_clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    update_epochs: int = 10
    num_minibatches: int = 32
    max_grad_norm: float = 0.5
    target_kl: float = 0.015
    norm_adv: bool = True


class PPOAgent:
    def __init__(self, obs_dim: int, action_dim: int, cfg: PPOConfig, hidden_sizes=(64, 64)):
        self.cfg = cfg
        self.actor = GaussianActor(action_dim, hidden_sizes)
        self.critic = Critic(hidden_sizes)
        self.actor.build((None, obs_dim))
        self.critic.build((None, obs_dim))
        self.optimizer = keras.optimizers.Adam(learning_rate=cfg.learning_rate, epsilon=1e-5,
                                               global_clipnorm=cfg.max_grad_norm)

    def act(self, obs: np.ndarray):
        mean, log_std = self.actor(obs)
        action = mean + ops.exp(log_std) * keras.random.normal(ops.shape(mean))
        return np.asarray(action), np.asarray(gaussian_log_prob(action, mean, log_std)), np.asarray(self.critic(obs))

    def policy_loss(self, obs, actions, old_logp, advantages):
        mean, log_std = self.actor(obs)
        logp = gaussian_log_prob(actions, mean, log_std)
        ratio = ops.exp(logp - old_logp)
        clipped = ops.clip(ratio, 1.0 - self.cfg.clip_ratio, 1.0 + self.cfg.clip_ratio)
        surrogate = ops.minimum(ratio * advantages, clipped * advantages)
        entropy = ops.mean(gaussian_entropy(log_std))
        approx_kl = ops.mean((ratio - 1.0) - ops.log(ratio))
        clip_frac = ops.mean(ops.cast(ops.abs(ratio - 1.0) > self.cfg.clip_ratio, "float32"))
        return -ops.mean(surrogate) - self.cfg.ent_coef * entropy, approx_kl, clip_frac

    def value_loss(self, obs, returns, old_values):
        values = self.critic(obs)
        unclipped = ops.square(values - returns)
        clipped_values = old_values + ops.clip(values - old_values, -self.cfg.value_clip, self.cfg.value_clip)
        clipped = ops.square(clipped_values - returns)
        return 0.5 * ops.mean(ops.maximum(unclipped, clipped))

    def update(self, batch: dict) -> dict:
        cfg = self.cfg
        n = batch["obs"].shape[0]
        minibatch = n // cfg.num_minibatches
        stats = {"approx_kl": 0.0, "clip_frac": 0.0}
        variables = self.actor.trainable_variables + self.critic.trainable_variables
        for epoch in range(cfg.update_epochs):
            order = np.random.permutation(n)
            for start in range(0, n, minibatch):
                idx = order[start:start + minibatch]
                adv = batch["advantages"][idx]
                if cfg.norm_adv:
                    adv = normalize_advantages(adv)
                with tf.GradientTape() as tape:
                    pg_loss, approx_kl, clip_frac = self.policy_loss(
                        batch["obs"][idx], batch["actions"][idx], batch["logp"][idx], adv)
                    v_loss = self.value_loss(batch["obs"][idx], batch["returns"][idx], batch["values"][idx])
                    loss = pg_loss + cfg.vf_coef * v_loss
                grads = tape.gradient(loss, variables)
                self.optimizer.apply_gradients(zip(grads, variables))
                stats = {"approx_kl": float(approx_kl), "clip_frac": float(clip_frac)}
            if cfg.target_kl is not None and stats["approx_kl"] > 1.5 * cfg.target_kl:
                stats["stopped_epoch"] = epoch
                break
        return stats
