"""Offline training on one D4RL task: build the dataset and the learner from a YAML preset, run
`max_steps` gradient steps in jitted chunks of `num_updates`, and score the policy every
`eval_interval` steps as the normalised D4RL score (0 = random, 100 = expert) over `eval_episodes`.
"""

import argparse
import dataclasses
import json
import os
import time
from typing import Dict, Tuple

import jax
import numpy as np
import yaml

from dataset import make_env_and_dataset
from iql import create_iql, update_n
from networks import sample_actions


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    env_name: str = "antmaze-large-play-v2"
    algo: str = "iql"
    seed: int = 42
    max_steps: int = 1_000_000
    num_updates: int = 8
    batch_size: int = 256
    eval_interval: int = 100_000
    eval_episodes: int = 100
    log_interval: int = 5000
    hidden_dims: Tuple[int, ...] = (256, 256)
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    value_lr: float = 3e-4
    discount: float = 0.99
    tau: float = 0.005
    expectile: float = 0.9
    temperature: float = 10.0
    exp_adv_max: float = 100.0
    dropout_rate: float = 0.0
    critic_layer_norm: bool = False
    opt_decay_schedule: str = "cosine"
    reward_scale: float = 1000.0
    reward_bias: float = -1.0
    normalize_states: bool = False
    bc_top_fraction: float = 1.0
    eval_temperature: float = 0.0
    save_dir: str = "./runs"


def load_config(path: str, overrides: Dict[str, str]) -> TrainConfig:
    with open(path) as f:
        raw = yaml.safe_load(f)
    raw.update({k: yaml.safe_load(v) for k, v in overrides.items()})
    if "hidden_dims" in raw:
        raw["hidden_dims"] = tuple(raw["hidden_dims"])
    return TrainConfig(**raw)


def normalized_score(env, returns: np.ndarray) -> float:
    return float(np.mean([env.get_normalized_score(r) for r in returns]) * 100.0)


def evaluate(state, env, num_episodes: int, temperature: float, rng) -> Dict[str, float]:
    returns, lengths = [], []
    for _ in range(num_episodes):
        observation, done = env.reset(), False
        episode_return, episode_length = 0.0, 0
        while not done:
            rng, action = sample_actions(rng, state.actor.apply_fn, state.actor.params, observation,
                                         temperature)
            action = np.clip(np.asarray(action), -1, 1)
            observation, reward, done, info = env.step(action)
            episode_return += reward
            episode_length += 1
        returns.append(episode_return)
        lengths.append(episode_length)
    return {"return": float(np.mean(returns)), "length": float(np.mean(lengths)),
            "normalized_score": normalized_score(env, np.array(returns))}


def save_checkpoint(path: str, step: int, params) -> None:
    os.makedirs(path, exist_ok=True)
    flat = jax.tree_util.tree_leaves(params)
    np.savez(os.path.join(path, f"ckpt_{step}.npz"), *[np.asarray(x) for x in flat])


def main(config: TrainConfig) -> None:
    np_rng = np.random.default_rng(config.seed)
    env, dataset = make_env_and_dataset(config.env_name, config.seed, config)
    sample = dataset.sample(np_rng, 1)
    state = create_iql(config.seed, sample.observations, sample.actions, config)
    eval_rng = jax.random.PRNGKey(config.seed + 100)

    run_dir = os.path.join(config.save_dir, f"{config.env_name}-{config.algo}-s{config.seed}")
    os.makedirs(run_dir, exist_ok=True)
    history = []
    start = time.time()
    for step in range(0, config.max_steps, config.num_updates):
        batches = dataset.sample_n(np_rng, config.batch_size, config.num_updates)
        state, info = update_n(state, batches, config.discount, config.tau, config.expectile,
                               config.temperature, config.exp_adv_max)

        if step % config.log_interval == 0:
            info = {k: float(v) for k, v in info.items()}
            info["sps"] = (step + config.num_updates) / (time.time() - start)
            print(step, json.dumps(info))

        if step % config.eval_interval == 0 or step + config.num_updates >= config.max_steps:
            result = evaluate(state, env, config.eval_episodes, config.eval_temperature, eval_rng)
            history.append({"step": step, **result})
            print(f"step {step}: normalized score {result['normalized_score']:.1f}")
            with open(os.path.join(run_dir, "eval.json"), "w") as f:
                json.dump(history, f)
    save_checkpoint(run_dir, config.max_steps, state.actor.params)


def parse_args() -> Tuple[str, Dict[str, str]]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/iql_antmaze.yaml")
    parser.add_argument("overrides", nargs="*", help="key=value pairs")
    args = parser.parse_args()
    return args.config, dict(o.split("=", 1) for o in args.overrides)


if __name__ == "__main__":
    path, overrides = parse_args()
    main(load_config(path, overrides))
