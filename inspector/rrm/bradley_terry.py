"""Bradley-Terry over reward-term multipliers: the maths of ``profile fit``.

A preference compares two inspections a and b of one part. Each inspection has a
feature vector x (one entry per reward term: the term's raw return under the current
profile, times its channel weight), so the current profile's return is ``sum(x)``.
Multiplying term k's value by ``s_k > 0`` multiplies its raw return by ``s_k`` (terms are
linear in their value), so the return under the new values is ``s . x``. The model is

    P(a preferred to b) = sigmoid(beta * s . (x_a - x_b)),   s_k = exp(theta_k)

(or, with a ``lapse`` share of random choices, ``lapse / 2 + (1 - lapse) * sigmoid(...)``)
with a free temperature ``beta = exp(log_beta)`` (how sharply people judge, in reward
units) and the penalty ``penalty * sum(theta_k ** 2)`` that keeps the values near the
current ones: without it a handful of preferences could move a term anywhere, and the
common scale of the values (which ``beta`` absorbs) would be undetermined. Signs
stay because ``s_k`` is positive; pinned terms keep ``theta_k = 0``; bounds are boxes on
``theta_k``. A tie counts as half a preference each way.

The fit is a projected Gauss-Newton (Levenberg-Marquardt) descent on the penalised
negative log-likelihood over ``(log_beta, theta_free)``: a few dozen variables, so
plain numpy is enough and no optimiser library is needed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: beta's range: a person who tells apart 1/1000 of a reward unit sits at the top.
LOG_BETA_BOUNDS = (-7.0, 7.0)
#: Starting values of log_beta (the fit keeps the best of the three descents).
STARTS = (0.0, 2.5, 5.0)


@dataclass(frozen=True)
class BTFit:
    """The result of :func:`fit`.

    :param theta: log multipliers, one per term (0 for pinned terms).
    :param log_beta: log of the temperature.
    :param log_likelihood: log-likelihood of the preferences (without the penalty).
    :param null_log_likelihood: the same for a model that cannot tell a from b (chance).
    :param iterations: Gauss-Newton iterations used.
    :param converged: the projected gradient fell below the tolerance.
    """

    theta: np.ndarray
    log_beta: float
    log_likelihood: float
    null_log_likelihood: float
    iterations: int
    converged: bool

    @property
    def multipliers(self) -> np.ndarray:
        """``exp(theta)``: what each term's value is multiplied by."""
        return np.exp(self.theta)


def _log_sigmoid(d: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -d)


def _sigmoid(d: np.ndarray) -> np.ndarray:
    return np.exp(_log_sigmoid(d))


def differences(dx: np.ndarray, theta: np.ndarray, log_beta: float) -> np.ndarray:
    """``beta * s . (x_a - x_b)`` per preference: the logit of "a is better".

    :param dx: [N, K] feature differences ``x_a - x_b``.
    :param theta: [K] log multipliers.
    :param log_beta: log temperature.
    """
    return np.exp(log_beta) * (dx @ np.exp(theta))


def _log_probs(d: np.ndarray, lapse: float) -> tuple[np.ndarray, np.ndarray]:
    """log P(a), log P(b) for logits ``d`` with a share ``lapse`` of random choices."""
    if lapse <= 0.0:
        return _log_sigmoid(d), _log_sigmoid(-d)
    half = np.log(lapse / 2.0)
    rest = np.log1p(-lapse)
    return np.logaddexp(half, rest + _log_sigmoid(d)), np.logaddexp(half, rest + _log_sigmoid(-d))


def log_likelihood(
    dx: np.ndarray, y: np.ndarray, theta: np.ndarray, log_beta: float, lapse: float = 0.0
) -> float:
    """Log-likelihood of choices ``y`` (1: a, 0: b, 0.5: tie).

    :param dx: [N, K] feature differences.
    :param y: [N] choices.
    :param theta: [K] log multipliers.
    :param log_beta: log temperature.
    :param lapse: share of choices made at random (misclicks, inattention).
    """
    la, lb = _log_probs(differences(dx, theta, log_beta), lapse)
    return float(np.sum(y * la + (1.0 - y) * lb))


def agreement(dx: np.ndarray, y: np.ndarray, theta: np.ndarray) -> tuple[float, int]:
    """Fraction of the non-tie choices the values agree with, and how many there are.

    A pair the values cannot tell apart (equal returns) counts half.

    :param dx: [N, K] feature differences.
    :param y: [N] choices (ties are left out).
    :param theta: [K] log multipliers.
    """
    keep = y != 0.5
    n = int(np.count_nonzero(keep))
    if n == 0:
        return float("nan"), 0
    u = dx[keep] @ np.exp(theta)
    scale = np.abs(dx[keep]) @ np.exp(theta)
    tied = np.abs(u) <= 1e-12 * np.maximum(scale, 1e-300)
    right = np.where(y[keep] == 1.0, u > 0, u < 0)
    return float((np.count_nonzero(right & ~tied) + 0.5 * np.count_nonzero(tied)) / n), n


def dominated(dx: np.ndarray, y: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """Choices no positive multipliers can agree with: the chosen inspection is no
    better in any term and worse in at least one.

    :param dx: [N, K] feature differences.
    :param y: [N] choices; ties are never dominated.
    :param tol: differences within this are equal.
    """
    sign = np.where(y == 1.0, 1.0, -1.0)[:, None]
    c = dx * sign  # chosen minus the other
    worse = np.all(c <= tol, axis=1) & np.any(c < -tol, axis=1)
    return worse & (y != 0.5)


def chi2_95(df: int) -> float:
    """95 % quantile of the chi-square distribution (Wilson-Hilferty; within 3 % for df >= 1)."""
    k = max(1, int(df))
    return float(k * (1.0 - 2.0 / (9 * k) + 1.6449 * np.sqrt(2.0 / (9 * k))) ** 3)


def fit(
    dx: np.ndarray,
    y: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    free: np.ndarray,
    penalty: float = 1.0,
    lapse: float = 0.0,
    max_iter: int = 300,
    tol: float = 1e-8,
) -> BTFit:
    """Fit the log multipliers and the temperature.

    :param dx: [N, K] feature differences ``x_a - x_b``.
    :param y: [N] choices: 1 (a better), 0 (b better) or 0.5 (tie).
    :param lo: [K] lower bounds of theta (used for free terms).
    :param hi: [K] upper bounds of theta.
    :param free: [K] bool, the terms the fit may change (the others keep theta = 0).
    :param penalty: weight of ``sum(theta ** 2)``.
    :param lapse: share of choices assumed made at random: with it a few choices against
        everything else cannot drag the values far (the ``noise_prob`` of the imitation
        library's preference model).
    :param max_iter: Gauss-Newton iterations at most.
    :param tol: convergence tolerance on the projected gradient.
    """
    dx = np.asarray(dx, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    k = dx.shape[1]
    idx = np.flatnonzero(free)
    zlo = np.concatenate([[LOG_BETA_BOUNDS[0]], np.asarray(lo, dtype=np.float64)[idx]])
    zhi = np.concatenate([[LOG_BETA_BOUNDS[1]], np.asarray(hi, dtype=np.float64)[idx]])
    reg = np.concatenate([[1e-9], np.full(len(idx), 2.0 * penalty)])

    def unpack(z: np.ndarray) -> tuple[np.ndarray, float]:
        theta = np.zeros(k)
        theta[idx] = z[1:]
        return theta, float(z[0])

    def objective(z: np.ndarray) -> float:
        theta, lb = unpack(z)
        return -log_likelihood(dx, y, theta, lb, lapse) + penalty * float(np.sum(z[1:] ** 2))

    def grad_hess(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta, lb = unpack(z)
        u = np.exp(lb + theta)
        d = dx @ u
        p = _sigmoid(d)
        # q = lapse/2 + (1 - lapse) p; r = dNLL/dd; w its Fisher information (Gauss-Newton).
        q = lapse / 2.0 + (1.0 - lapse) * p
        dq = (1.0 - lapse) * p * (1.0 - p)
        qq = np.clip(q * (1.0 - q), 1e-300, None)
        r = (q - y) / qq * dq
        w = dq**2 / qq
        jac = np.concatenate([d[:, None], dx[:, idx] * u[idx]], axis=1)
        g = jac.T @ r + np.concatenate([[0.0], 2.0 * penalty * z[1:]])
        h = (jac * w[:, None]).T @ jac + np.diag(reg)
        return g, h

    # The likelihood is not convex in (log_beta, theta) (nor with a lapse share): start
    # from a soft, a middling and a sharp judge and keep the best.
    best = None
    for lb0 in STARTS:
        z0 = np.clip(np.concatenate([[lb0], np.zeros(len(idx))]), zlo, zhi)
        run = _descend(objective, grad_hess, z0, zlo, zhi, max_iter, tol)
        if best is None or run[1] < best[1]:
            best = run
    z, _, it, converged = best
    theta, lb = unpack(z)
    null = float(len(y) * np.log(0.5))
    return BTFit(
        theta=theta,
        log_beta=lb,
        log_likelihood=log_likelihood(dx, y, theta, lb, lapse),
        null_log_likelihood=null,
        iterations=it,
        converged=converged,
    )


def _descend(
    objective: Callable[[np.ndarray], float],
    grad_hess: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    z: np.ndarray,
    zlo: np.ndarray,
    zhi: np.ndarray,
    max_iter: int,
    tol: float,
) -> tuple[np.ndarray, float, int, bool]:
    """Projected Levenberg-Marquardt from ``z``: (z, objective, iterations, converged).

    The Gauss-Newton matrix is positive semi-definite and the damping makes each step
    a descent step; variables a bound holds (the gradient pushes them outward) sit out.
    """
    mu, f = 1e-3, objective(z)
    converged, it = False, 0
    while it < max_iter:
        it += 1
        g, h = grad_hess(z)
        held = ((z <= zlo) & (g > 0)) | ((z >= zhi) & (g < 0))
        if np.max(np.abs(np.where(held, 0.0, g))) <= tol * (1.0 + abs(f)):
            converged = True
            break
        act = ~held
        step = np.zeros_like(z)
        moved = 0.0
        for _ in range(30):
            hh = h[np.ix_(act, act)] + mu * np.diag(np.diag(h[np.ix_(act, act)]) + 1e-12)
            try:
                step[act] = -np.linalg.solve(hh, g[act])
            except np.linalg.LinAlgError:
                mu *= 10.0
                continue
            zn = np.clip(z + step, zlo, zhi)
            fn = objective(zn)
            if fn <= f:
                moved = float(np.max(np.abs(zn - z)))
                z, f, mu = zn, fn, max(mu / 3.0, 1e-9)
                break
            mu *= 10.0
        else:
            break  # no descent step left: at a (numerical) optimum
        if moved <= 1e-12:
            converged = True
            break
    return z, f, it, converged
