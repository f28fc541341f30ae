"""Train SAC on a Gymnasium MuJoCo task: `python train.py --env-id HalfCheetah-v4`."""
import os
import random
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import flax
import gymnasium as gym
import jax
import numpy as np
import tyro
import yaml

import sac
from replay_buffer import ReplayBuffer, RunningMeanStd


@dataclass(frozen=True)
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    seed: int = 1
    env_id: str = "HalfCheetah-v4"
    total_timesteps: int = 1_000_000
    buffer_size: int = 1_000_000
    learning_starts: int = 5_000
    batch_size: int = 256
    gamma: float = 0.99
    tau: float = 0.005
    actor_lr: float = 3e-4
    critic_lr: float = 1e-3
    temp_lr: float = 3e-4
    hidden_dims: Tuple[int, ...] = (256, 256)
    policy_frequency: int = 2
    delayed_actor_catchup: bool = True
    utd_ratio: int = 1
    num_qs: int = 2
    num_min_qs: Optional[int] = None
    critic_layer_norm: bool = False
    critic_dropout: Optional[float] = None
    actor_mean_q: bool = False
    autotune: bool = True
    init_temperature: float = 1.0
    target_entropy: Optional[float] = None
    backup_entropy: bool = True
    reward_scale: float = 1.0
    n_step: int = 1
    normalize_obs: bool = False
    eval_interval: int = 10_000
    eval_episodes: int = 10
    config: Optional[str] = None


def load_config(args: Args) -> Args:
    if args.config is None:
        return args
    with open(args.config) as f:
        overrides = yaml.safe_load(f)
    return Args(**{**args.__dict__, **overrides})


def make_run_dir(args: Args) -> str:
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    os.makedirs(os.path.join("runs", run_name), exist_ok=True)
    return os.path.join("runs", run_name)


def save_checkpoint(run_dir: str, state, step: int) -> None:
    with open(os.path.join(run_dir, f"checkpoint_{step}.msgpack"), "wb") as f:
        f.write(flax.serialization.to_bytes(state))


def evaluate(env, state, obs_rms, episodes: int) -> float:
    returns = []
    for _ in range(episodes):
        obs, _ = env.reset()
        done, total = False, 0.0
        while not done:
            if obs_rms is not None:
                obs = obs_rms.normalize(obs)
            action = np.asarray(sac.eval_actions(state, obs[None]))[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main(args: Args):
    random.seed(args.seed)
    np.random.seed(args.seed)
    key = jax.random.PRNGKey(args.seed)
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(args.env_id))
    eval_env = gym.make(args.env_id)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    assert np.all(env.action_space.high == 1.0), "the actor squashes into [-1, 1]"

    key, init_key = jax.random.split(key)
    state = sac.create_sac_state(init_key, np.zeros((1, obs_dim), np.float32),
                                 np.zeros((1, act_dim), np.float32), args)
    rb = ReplayBuffer(obs_dim, act_dim, args.buffer_size, n_step=args.n_step, gamma=args.gamma)
    obs_rms = RunningMeanStd((obs_dim,)) if args.normalize_obs else None

    run_dir = make_run_dir(args)
    obs, _ = env.reset(seed=args.seed)
    start = time.time()
    for global_step in range(args.total_timesteps):
        if obs_rms is not None:
            obs_rms.update(obs[None])
            obs_in = obs_rms.normalize(obs)
        else:
            obs_in = obs
        if global_step < args.learning_starts:
            action = env.action_space.sample()
        else:
            key, act_key = jax.random.split(key)
            action = np.asarray(sac.sample_actions(state, obs_in[None], act_key))[0]
        next_obs, reward, terminated, truncated, info = env.step(action)
        next_in = obs_rms.normalize(next_obs) if obs_rms is not None else next_obs
        rb.insert(obs_in, action, reward, next_in, terminated, truncated)
        obs = next_obs
        if terminated or truncated:
            print(f"step={global_step} episodic_return={info['episode']['r']}")
            obs, _ = env.reset()

        if global_step >= args.learning_starts:
            key, sample_key = jax.random.split(key)
            batch = rb.sample(sample_key, args.batch_size * args.utd_ratio)
            update_actor_now = global_step % args.policy_frequency == 0
            state, update_info = sac.update(state, batch, args, args.utd_ratio, update_actor_now)
            if global_step % 1000 == 0:
                sps = int(global_step / (time.time() - start))
                print(f"step={global_step} sps={sps}", {k: float(v) for k, v in update_info.items()})
        if global_step % args.eval_interval == 0:
            print(f"step={global_step} eval_return={evaluate(eval_env, state, obs_rms, args.eval_episodes)}")
            save_checkpoint(run_dir, state, global_step)


if __name__ == "__main__":
    main(load_config(tyro.cli(Args)))
