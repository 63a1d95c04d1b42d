"""Potential-based shaping F = gamma * Phi(s') - Phi(s), with Phi(terminal) = 0.

Ng, Harada & Russell (1999): adding F leaves the optimal policy unchanged. Over an
episode that ends in a terminal state the discounted sum of F telescopes to
-Phi(s_0).
"""

from __future__ import annotations

import numpy as np


def shaping_rewards(phi_prev: np.ndarray, phi_next: np.ndarray, gamma: float) -> np.ndarray:
    """F_t = gamma * phi_next_t - phi_prev_t (phi_next already 0 at terminal steps)."""
    return gamma * np.asarray(phi_next, dtype=np.float64) - np.asarray(phi_prev, dtype=np.float64)


def discounted_sum(x: np.ndarray, gamma: float) -> float:
    """sum_t gamma^t x_t."""
    x = np.asarray(x, dtype=np.float64)
    return float(np.sum(x * gamma ** np.arange(x.size)))
