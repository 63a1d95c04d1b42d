"""Properties of redistribution, shaping and normalisation (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from inspector.rrm.learned import LearnedRedistributor
from inspector.rrm.redistribution import (
    exponential_weights,
    redistribute,
    redistribute_exponential,
    redistribute_uniform,
)
from inspector.rrm.shaping import discounted_sum, shaping_rewards

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=32)
episodes = arrays(np.float64, st.integers(1, 60), elements=finite)


def sparse_episode(draw_len: int, k: int, r: float) -> np.ndarray:
    x = np.zeros(draw_len)
    x[k % draw_len] = r
    return x


@settings(max_examples=300, deadline=None)
@given(
    ep=episodes,
    method=st.sampled_from(["none", "exponential", "uniform", "shuffled"]),
    lam=st.floats(0, 5),
    window=st.integers(0, 40),
    seed=st.integers(0, 1000),
)
def test_every_fixed_redistribution_preserves_the_return(ep, method, lam, window, seed):
    out = redistribute(ep, method, lam=lam, window=window, rng=np.random.default_rng(seed))
    assert out.shape == ep.shape
    assert math.isclose(out.sum(), ep.sum(), rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 50), k=st.integers(0, 49), window=st.integers(0, 30))
def test_exponential_weights_are_normalised_and_decay_into_the_past(n, k, window):
    w = exponential_weights(k, 0.15, window)
    assert len(w) == min(k, window) + 1
    assert math.isclose(w.sum(), 1.0, rel_tol=1e-12)
    assert np.all(np.diff(w) >= 0)  # oldest first, the reward step weighs most


@settings(max_examples=100, deadline=None)
@given(ep=episodes, window=st.integers(0, 30))
def test_lambda_infinity_is_none_and_lambda_zero_is_uniform_over_the_window(ep, window):
    assert np.allclose(redistribute_exponential(ep, math.inf, window), ep)
    assert np.allclose(redistribute_exponential(ep, 1e6, window), ep)
    # lambda = 0: a single reward at step k spreads uniformly over [k - T, k].
    k = len(ep) - 1
    one = np.zeros_like(ep)
    one[k] = 3.0
    out = redistribute_exponential(one, 0.0, window)
    lo = max(0, k - window)
    assert np.allclose(out[lo:], 3.0 / (k - lo + 1))
    assert np.allclose(out[:lo], 0.0)


def test_the_unnormalised_form_of_the_design_notes_would_inflate_returns():
    # Why normalisation: sum_{d<=20} exp(-0.15 d) ~ 6.7, not 1.
    raw = sum(math.exp(-0.15 * d) for d in range(21))
    assert raw > 6.0
    ep = np.zeros(30)
    ep[-1] = 1.0
    assert math.isclose(redistribute_exponential(ep, 0.15, 20).sum(), 1.0)


@settings(max_examples=100, deadline=None)
@given(ep=episodes)
def test_uniform_is_g_over_t(ep):
    assert np.allclose(redistribute_uniform(ep), ep.sum() / len(ep))


@settings(max_examples=200, deadline=None)
@given(
    phis=arrays(np.float64, st.integers(2, 40), elements=st.floats(-5, 5)),
    gamma=st.floats(0.5, 1.0),
)
def test_shaping_telescopes_to_minus_phi_s0(phis, gamma):
    # phis[t] = Phi(s_t); the last state is terminal so Phi(s_T) = 0.
    phi_prev = phis[:-1]
    phi_next = phis[1:].copy()
    phi_next[-1] = 0.0
    f = shaping_rewards(phi_prev, phi_next, gamma)
    assert math.isclose(discounted_sum(f, gamma), -phis[0], rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=20, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 15), min_size=1, max_size=6),
    seed=st.integers(0, 100),
)
def test_learned_redistribution_preserves_every_return_after_training(lengths, seed):
    rng = np.random.default_rng(seed)
    feats = [rng.normal(size=(n, 5)).astype(np.float32) for n in lengths]
    outs = [np.where(np.arange(n) == n - 1, rng.normal(), 0.0) for n in lengths]
    model = LearnedRedistributor(5, hidden=8, seed=seed)
    for _ in range(3):
        model.fit(feats, outs)
    for r, o in zip(model.redistribute(feats, outs), outs):
        assert math.isclose(r.sum(), o.sum(), rel_tol=1e-6, abs_tol=1e-6)


def test_learned_model_learns_which_step_earns_the_reward():
    # The return is +1 exactly when feature 0 is high at some step: the model should
    # learn to credit that step more than the final step.
    rng = np.random.default_rng(0)
    feats, outs, keys = [], [], []
    for _ in range(64):
        n = 8
        f = np.zeros((n, 3), dtype=np.float32)
        k = int(rng.integers(0, n - 2))
        good = rng.random() < 0.5
        if good:
            f[k, 0] = 1.0
        f[:, 1] = np.arange(n) / n
        o = np.zeros(n)
        o[-1] = 1.0 if good else 0.0
        feats.append(f)
        outs.append(o)
        keys.append((good, k))
    model = LearnedRedistributor(3, hidden=16, lr=1e-2, epochs=1, seed=0)
    for _ in range(300):
        model.fit(feats, outs)
    red = model.redistribute(feats, outs)
    at_key = [r[k] for r, (g, k) in zip(red, keys) if g]
    assert np.mean(at_key) > 0.5
    assert model.last_loss < 0.05


@pytest.mark.parametrize("method", ["running", "minmax"])
def test_normalisers_scale_and_clip(method):
    from inspector.rrm.normalise import RewardNormaliser

    rng = np.random.default_rng(0)
    r = rng.normal(0, 50, size=(200, 2))
    dones = np.zeros_like(r, dtype=bool)
    dones[::10] = True
    out = RewardNormaliser(method, gamma=0.9, clip=5.0, n_envs=2)(r, dones)
    assert np.all(np.abs(out) <= 5.0)
    assert np.std(out) < np.std(r) / 5
