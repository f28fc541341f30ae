"""Experience replay: an n-step transition accumulator and a prioritised buffer on a sum tree.

Transitions are stored already folded over `n_steps` (the discounted sum of rewards, the discount
to the bootstrap state), so the learner sees one tuple per step. Sampling is proportional to
priority ** alpha, mixed with a little uniform sampling; the importance weights correct the bias
with an exponent annealed towards 1 over training.
"""

from __future__ import annotations

import collections
import typing

import numpy as np


class Transition(typing.NamedTuple):
    s_tm1: np.ndarray
    a_tm1: int
    r_t: float
    discount_t: float
    s_t: np.ndarray


class NStepTransitionAccumulator:
    """Turns a stream of single steps into n-step transitions, truncated at the end of an episode."""

    def __init__(self, n: int, discount: float):
        self.n = n
        self.discount = discount
        self._steps = collections.deque(maxlen=n)

    def reset(self) -> None:
        self._steps.clear()

    def _fold(self, steps, s_t, terminal: bool) -> Transition:
        reward, discount = 0.0, 1.0
        for _, _, r in steps:
            reward += discount * r
            discount *= self.discount
        s_tm1, a_tm1, _ = steps[0]
        return Transition(s_tm1, a_tm1, reward, 0.0 if terminal else discount, s_t)

    def step(self, s_tm1, a_tm1, r_t, s_t, terminal: bool, truncated: bool):
        """The transitions that became complete with this step (none until n steps are in)."""
        self._steps.append((s_tm1, a_tm1, r_t))
        out = []
        if len(self._steps) == self.n:
            out.append(self._fold(list(self._steps), s_t, terminal))
        if terminal or truncated:
            steps = list(self._steps)[1:] if len(self._steps) == self.n else list(self._steps)
            while steps:
                out.append(self._fold(steps, s_t, terminal))
                steps = steps[1:]
            self.reset()
        return out


class SumTree:
    """Priorities in the leaves of a binary tree whose inner nodes hold the sums of their children."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._nodes = np.zeros(2 * capacity - 1, dtype=np.float64)
        self.max_recorded_priority = 1.0

    def total(self) -> float:
        return float(self._nodes[0])

    def set(self, index: int, value: float) -> None:
        self.max_recorded_priority = max(self.max_recorded_priority, value)
        node = index + self.capacity - 1
        delta = value - self._nodes[node]
        while True:
            self._nodes[node] += delta
            if node == 0:
                break
            node = (node - 1) // 2

    def get(self, index: int) -> float:
        return float(self._nodes[index + self.capacity - 1])

    def find(self, mass: float) -> int:
        node = 0
        while node < self.capacity - 1:
            left = 2 * node + 1
            if mass < self._nodes[left]:
                node = left
            else:
                mass -= self._nodes[left]
                node = left + 1
        return node - (self.capacity - 1)


class PrioritizedReplay:
    """Proportional prioritised replay (Schaul et al.): P(i) ∝ p_i ** alpha, weights (N P(i)) ** -beta."""

    def __init__(self, capacity: int, priority_exponent: float, uniform_sample_probability: float,
                 normalize_weights: bool, rng: np.random.Generator):
        self.capacity = capacity
        self.priority_exponent = priority_exponent
        self.uniform_sample_probability = uniform_sample_probability
        self.normalize_weights = normalize_weights
        self._rng = rng
        self._tree = SumTree(capacity)
        self._storage: list[Transition | None] = [None] * capacity
        self._next = 0
        self.size = 0

    def add(self, transition: Transition, priority: float | None = None) -> None:
        """New transitions enter at the highest priority seen so far, so each is replayed at least once."""
        priority = self._tree.max_recorded_priority if priority is None else priority
        self._storage[self._next] = transition
        self._tree.set(self._next, priority ** self.priority_exponent)
        self._next = (self._next + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int, importance_sampling_exponent: float):
        total = self._tree.total()
        masses = (np.arange(batch_size) + self._rng.random(batch_size)) * total / batch_size
        indices = np.array([self._tree.find(m) for m in masses])
        uniform = self._rng.random(batch_size) < self.uniform_sample_probability
        indices[uniform] = self._rng.integers(0, self.size, size=int(uniform.sum()))
        probs = np.array([self._tree.get(i) for i in indices]) / total
        probs = (1 - self.uniform_sample_probability) * probs + self.uniform_sample_probability / self.size
        weights = (self.size * probs) ** -importance_sampling_exponent
        if self.normalize_weights:
            weights = weights / weights.max()
        batch = Transition(*(np.stack(x) for x in zip(*(self._storage[i] for i in indices))))
        return indices, batch, weights.astype(np.float32)

    def update_priorities(self, indices, priorities) -> None:
        for index, priority in zip(indices, priorities):
            self._tree.set(int(index), float(priority) ** self.priority_exponent)
