"""Reward normalisation: running std of discounted returns (as VecNormalize) or min-max.

Applied after redistribution and shaping, on rewards that were never normalised
before (the environment returns raw rewards; nothing else normalises them).
"""

from __future__ import annotations

import numpy as np


class RunningMeanStd:
    """Parallel (Chan et al.) running mean and variance."""

    def __init__(self, epsilon: float = 1e-4) -> None:
        self.mean = 0.0
        self.var = 1.0
        self.count = epsilon

    def update(self, x: np.ndarray) -> None:
        """Add a batch of samples."""
        x = np.asarray(x, dtype=np.float64).ravel()
        if x.size == 0:
            return
        bm, bv, bc = x.mean(), x.var(), x.size
        delta = bm - self.mean
        tot = self.count + bc
        self.mean += delta * bc / tot
        m2 = self.var * self.count + bv * bc + delta**2 * self.count * bc / tot
        self.var = m2 / tot
        self.count = tot


class RewardNormaliser:
    """Normalise a rollout's rewards in place of VecNormalize(norm_reward=True).

    :param method: ``none``, ``running`` or ``minmax``.
    :param gamma: discount of the returns whose std scales the rewards (``running``).
    :param clip: clip to [-clip, clip] after scaling (None: no clipping).
    :param epsilon: numerical floor.
    :param n_envs: number of parallel environments (one running return each).
    """

    def __init__(
        self,
        method: str = "none",
        gamma: float = 0.99,
        clip: float | None = None,
        epsilon: float = 1e-8,
        n_envs: int = 1,
    ) -> None:
        self.method = method
        self.gamma = gamma
        self.clip = clip
        self.epsilon = epsilon
        self.ret_rms = RunningMeanStd()
        self.returns = np.zeros(n_envs, dtype=np.float64)
        self.lo = np.inf
        self.hi = -np.inf

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """Normalise ``rewards`` [T, n_envs]; ``dones[t]`` marks episode ends at step t."""
        r = np.asarray(rewards, dtype=np.float64)
        if self.method == "none":
            out = r.copy()
        elif self.method == "running":
            for t in range(r.shape[0]):
                self.returns = self.returns * self.gamma + r[t]
                self.ret_rms.update(self.returns)
                self.returns[np.asarray(dones[t], dtype=bool)] = 0.0
            out = r / np.sqrt(self.ret_rms.var + self.epsilon)
        elif self.method == "minmax":
            self.lo = min(self.lo, float(r.min()))
            self.hi = max(self.hi, float(r.max()))
            span = max(self.hi - self.lo, self.epsilon)
            # Scale to [-1, 1] without shifting zero, so a zero reward stays neutral.
            out = r / (span / 2.0)
        else:
            raise ValueError(f"unknown normalisation {self.method!r}")
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
        return out
