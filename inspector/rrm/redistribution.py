"""Redistribution of sparse outcome rewards over the steps that earned them.

All functions work on one complete episode (1-D arrays over its steps) and
preserve the episode's (undiscounted) return exactly, up to float rounding.

Exponential redistribution: an outcome reward r_k at step k is spread over steps
t in [k - T, k] with weights w_t proportional to exp(-lambda * (k - t)),
**normalised so that the weights sum to 1**. The design notes this product comes
from write the sum over the past window without normalising; that form does not
preserve returns (it multiplies them by about sum_{d<=T} exp(-lambda d), ~6.7 for
lambda = 0.15, T = 20) and only moves credit later, so it is not used.
Limits: lambda -> infinity gives ``none`` (all weight on step k); lambda = 0 gives
a uniform spread over the window.
"""

from __future__ import annotations

import numpy as np

METHODS = ("none", "exponential", "uniform", "learned", "shuffled")


def exponential_weights(k: int, lam: float, window: int) -> np.ndarray:
    """Normalised weights for steps max(0, k - window) .. k (oldest first).

    :param k: index of the step that received the outcome reward.
    :param lam: decay rate; ``inf`` puts all weight on step k.
    :param window: T, how many steps back the reward may go.
    """
    start = max(0, k - int(window))
    d = np.arange(k - start, -1, -1, dtype=np.float64)  # distance to k, oldest first
    if np.isinf(lam):
        w = (d == 0).astype(np.float64)
    else:
        # Subtracting the minimum exponent keeps exp() finite for huge lambda.
        w = np.exp(-lam * (d - d.min()))
    return w / w.sum()


def redistribute_exponential(
    outcome: np.ndarray, lam: float = 0.15, window: int = 20
) -> np.ndarray:
    """Spread each non-zero outcome reward backwards with normalised exponential weights."""
    r = np.asarray(outcome, dtype=np.float64)
    out = np.zeros_like(r)
    for k in np.flatnonzero(r):
        w = exponential_weights(int(k), lam, window)
        out[k - len(w) + 1 : k + 1] += r[k] * w
    return out


def redistribute_uniform(outcome: np.ndarray) -> np.ndarray:
    """G / T on every step of the episode."""
    r = np.asarray(outcome, dtype=np.float64)
    if r.size == 0:
        return r.copy()
    return np.full_like(r, r.sum() / r.size)


def redistribute_shuffled(
    outcome: np.ndarray, lam: float, window: int, rng: np.random.Generator
) -> np.ndarray:
    """Control arm: the exponential redistribution, its per-step values randomly permuted.

    Same return and same reward magnitudes, but the credit no longer points at the
    steps that earned it.
    """
    out = redistribute_exponential(outcome, lam, window)
    return out[rng.permutation(out.size)]


def correct_to_return(pred: np.ndarray, target_return: float) -> np.ndarray:
    """Add the residual (G - sum) to the last step so the sum is exactly G."""
    out = np.asarray(pred, dtype=np.float64).copy()
    if out.size:
        out[-1] += float(target_return) - out.sum()
    return out


def redistribute(
    outcome: np.ndarray,
    method: str,
    *,
    lam: float = 0.15,
    window: int = 20,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Redistribute one episode's outcome rewards with a fixed (non-learned) method."""
    if method == "none":
        return np.asarray(outcome, dtype=np.float64).copy()
    if method == "exponential":
        return redistribute_exponential(outcome, lam, window)
    if method == "uniform":
        return redistribute_uniform(outcome)
    if method == "shuffled":
        return redistribute_shuffled(outcome, lam, window, rng or np.random.default_rng())
    raise ValueError(f"unknown redistribution method {method!r}; expected one of {METHODS}")
