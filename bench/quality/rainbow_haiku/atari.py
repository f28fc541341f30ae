"""Atari 2600 preprocessing as the DQN papers and Dopamine describe it (Machado et al. 2018 protocol).

The emulator is gym's ALE environment with its own frame skip switched off; everything the agent sees
goes through `AtariPreprocessing` then `FrameStack`: max-pool of the last two raw frames of a skip,
greyscale, area resize to 84x84, sticky actions, no-op starts, episodic life for training only, and
the reward clipped to its sign.
"""

from __future__ import annotations

import collections

import cv2
import gymnasium as gym
import numpy as np


class AtariPreprocessing:
    """One agent step = `frame_skip` emulator steps; observations are 84x84 uint8 grey frames."""

    def __init__(self, env, frame_skip: int = 4, resize_shape: tuple[int, int] = (84, 84),
                 noop_max: int = 30, terminal_on_life_loss: bool = False, max_episode_frames: int = 108_000,
                 grayscale: bool = True):
        self.env = env
        self.frame_skip = frame_skip
        self.resize_shape = resize_shape
        self.noop_max = noop_max
        self.terminal_on_life_loss = terminal_on_life_loss
        self.max_episode_frames = max_episode_frames
        self.grayscale = grayscale
        height, width = env.observation_space.shape[:2]
        self._buffer = np.zeros((2, height, width), dtype=np.uint8)
        self._lives = 0
        self._frames = 0
        self.game_over = True

    @property
    def num_actions(self) -> int:
        return self.env.action_space.n

    def _grab(self, index: int) -> None:
        ale = self.env.unwrapped.ale
        if self.grayscale:
            ale.getScreenGrayscale(self._buffer[index])
        else:
            self._buffer[index] = ale.getScreenRGB().mean(axis=-1).astype(np.uint8)

    def _pool_and_resize(self) -> np.ndarray:
        """The pixel-wise max of the last two frames (sprites flicker on alternate frames), resized."""
        pooled = np.maximum(self._buffer[0], self._buffer[1])
        frame = cv2.resize(pooled, self.resize_shape[::-1], interpolation=cv2.INTER_AREA)
        return frame.astype(np.uint8)

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        if self.game_over:
            self.env.reset(seed=int(rng.integers(2**31)))
            self._frames = 0
            noops = int(rng.integers(0, self.noop_max + 1))
            for _ in range(noops):
                _, _, terminated, truncated, _ = self.env.step(0)
                if terminated or truncated:
                    self.env.reset(seed=int(rng.integers(2**31)))
        else:
            self.env.step(0)  # after a lost life: the game goes on from where it stopped
        self._lives = self.env.unwrapped.ale.lives()
        self.game_over = False
        self._grab(0)
        self._buffer[1] = self._buffer[0]
        return self._pool_and_resize()

    def step(self, action: int):
        total_reward = 0.0
        terminal = truncated = False
        for t in range(self.frame_skip):
            _, reward, terminated, truncated, _ = self.env.step(action)
            total_reward += reward
            self._frames += 1
            self.game_over = terminated or truncated
            lives = self.env.unwrapped.ale.lives()
            life_lost = lives < self._lives
            self._lives = lives
            if self.terminal_on_life_loss and life_lost:
                terminal = True
            if self._frames >= self.max_episode_frames:
                truncated = self.game_over = True
            if t >= self.frame_skip - 2:
                self._grab(t - (self.frame_skip - 2))
            if self.game_over or terminal:
                break
        terminal = terminal or (self.game_over and not truncated)
        return self._pool_and_resize(), total_reward, terminal, truncated


class FrameStack:
    """The last `num_stacked` processed frames along a trailing channel axis."""

    def __init__(self, env: AtariPreprocessing, num_stacked: int = 4):
        self.env = env
        self.num_stacked = num_stacked
        self._frames = collections.deque(maxlen=num_stacked)

    def reset(self, rng):
        frame = self.env.reset(rng)
        for _ in range(self.num_stacked):
            self._frames.append(frame)
        return np.stack(self._frames, axis=-1)

    def step(self, action):
        frame, reward, terminal, truncated = self.env.step(action)
        self._frames.append(frame)
        return np.stack(self._frames, axis=-1), reward, terminal, truncated


def clip_reward(reward: float, bound: float = 1.0) -> float:
    """Rewards squashed to their sign (within ±bound) for learning; the score is logged unclipped."""
    return float(np.clip(reward, -bound, bound))


def make_atari(game: str, config, training: bool) -> FrameStack:
    env = gym.make(f"ALE/{game}-v5", frameskip=1, full_action_space=False,
                   repeat_action_probability=config.sticky_action_prob, obs_type="grayscale")
    env = AtariPreprocessing(env, frame_skip=config.frame_skip, resize_shape=(84, 84),
                             noop_max=config.noop_max,
                             terminal_on_life_loss=training and config.episodic_life,
                             max_episode_frames=config.max_episode_frames)
    return FrameStack(env, num_stacked=config.frame_stack)
