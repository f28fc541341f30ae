"""Trains the agent on one Atari game: iterations of `steps_per_iteration` agent steps, each followed
by an evaluation phase with a small epsilon, as the Dopamine/dqn_zoo protocol reports scores.

    python run_atari.py --config config.yaml --game Pong --seed 1
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import yaml

import agent as agent_lib
import atari
import replay as replay_lib


def load_config(path: str, overrides: list[str]) -> SimpleNamespace:
    with open(path) as f:
        raw = yaml.safe_load(f)
    for item in overrides:
        key, value = item.split("=", 1)
        raw[key] = yaml.safe_load(value)
    return SimpleNamespace(**raw)


def save_checkpoint(directory: Path, iteration: int, agent) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    state = {"online_params": agent.online_params, "target_params": agent.target_params,
             "opt_state": agent.opt_state, "t": agent.t}
    with open(directory / f"ckpt_{iteration:03d}.pkl", "wb") as f:
        pickle.dump(jax.device_get(state), f)


def log_iteration(log_path: Path, iteration: int, stats: dict) -> None:
    with open(log_path, "a") as f:
        f.write(json.dumps({"iteration": iteration, **stats}) + "\n")
    print(f"[{iteration:3d}] " + " ".join(f"{k}={v:.3f}" for k, v in stats.items()))


def run_evaluation(env, agent, config, rng) -> float:
    """Mean unclipped score of full games (no life-loss terminals) with epsilon = eval_epsilon."""
    returns, steps = [], 0
    while steps < config.eval_steps:
        observation, episode_return, done = env.reset(rng), 0.0, False
        while not done and steps < config.eval_steps:
            action = agent.select_action(observation, evaluation=True)
            observation, reward, terminal, truncated = env.step(action)
            episode_return += reward
            done = terminal or truncated
            steps += 1
        returns.append(episode_return)
    return float(np.mean(returns))


def train(config, game: str, seed: int, out: Path) -> None:
    rng = np.random.default_rng(seed)
    env = atari.make_atari(game, config, training=True)
    eval_env = atari.make_atari(game, config, training=False)
    observation = env.reset(rng)
    agent = agent_lib.RainbowAgent(env.env.num_actions, config, jax.random.PRNGKey(seed), observation)
    buffer = replay_lib.PrioritizedReplay(
        capacity=config.replay_capacity, priority_exponent=config.priority_exponent,
        uniform_sample_probability=config.uniform_sample_probability,
        normalize_weights=config.normalize_weights, rng=rng)
    accumulator = replay_lib.NStepTransitionAccumulator(n=config.n_steps, discount=config.discount)
    for iteration in range(config.num_iterations):
        start, episode_returns, episode_return, losses = time.time(), [], 0.0, []
        for _ in range(config.steps_per_iteration):
            action = agent.select_action(observation)
            next_observation, reward, terminal, truncated = env.step(action)
            episode_return += reward
            for transition in accumulator.step(observation, action, atari.clip_reward(reward),
                                               next_observation, terminal, truncated):
                buffer.add(transition)
            agent.t += 1
            if buffer.size >= config.min_replay_size and agent.t % config.learn_period == 0:
                losses.append(agent.learn(buffer)["loss"])
            agent.maybe_update_target()
            if terminal or truncated:
                if env.env.game_over:
                    episode_returns.append(episode_return)
                    episode_return = 0.0
                observation = env.reset(rng)
            else:
                observation = next_observation
        eval_score = run_evaluation(eval_env, agent, config, rng)
        stats = {"train_return": float(np.mean(episode_returns or [0.0])), "eval_return": eval_score,
                 "loss": float(np.mean(losses or [0.0])), "epsilon": agent.exploration_epsilon(agent.t),
                 "steps_per_sec": config.steps_per_iteration / (time.time() - start)}
        log_iteration(out / "log.jsonl", iteration, stats)
        if (iteration + 1) % config.checkpoint_every == 0:
            save_checkpoint(out / "checkpoints", iteration, agent)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="config.yaml")
    parser.add_argument("--game", default="Pong")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="runs")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    config = load_config(args.config, args.overrides)
    train(config, args.game, args.seed, Path(args.out) / f"{args.game}_{args.seed}")


if __name__ == "__main__":
    main()
