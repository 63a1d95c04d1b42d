"""On small tabular MDPs, shaping and redistribution leave the optimal actions unchanged."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.rrm.redistribution import redistribute
from inspector.rrm.shaping import shaping_rewards

DEPTH, BRANCH = 3, 3


def tree(seed: int):
    """A deterministic tree MDP: nodes are action prefixes; outcome rewards at the leaves."""
    rng = np.random.default_rng(seed)
    process = {}
    outcome = {}
    phi = {(): float(rng.normal())}
    for d in range(DEPTH):
        for prefix in itertools.product(range(BRANCH), repeat=d):
            for a in range(BRANCH):
                child = (*prefix, a)
                process[child] = float(rng.normal(0, 0.1))
                phi[child] = 0.0 if d == DEPTH - 1 else float(rng.normal())
                if d == DEPTH - 1:
                    outcome[child] = float(rng.normal(0, 1.0))
    return process, outcome, phi


def value_iteration(reward, gamma: float) -> dict[tuple, int]:
    """Optimal action at every internal node by backward induction."""
    value, best = {}, {}
    for d in range(DEPTH, -1, -1):
        for node in itertools.product(range(BRANCH), repeat=d):
            if d == DEPTH:
                value[node] = 0.0
                continue
            q = [reward(node, a) + gamma * value[(*node, a)] for a in range(BRANCH)]
            best[node] = int(np.argmax(q))
            value[node] = max(q)
    return best


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), gamma=st.floats(0.5, 1.0))
def test_shaping_keeps_the_optimal_policy(seed, gamma):
    process, outcome, phi = tree(seed)

    def raw(node, a):
        c = (*node, a)
        return process[c] + outcome.get(c, 0.0)

    def shaped(node, a):
        c = (*node, a)
        return raw(node, a) + float(
            shaping_rewards(np.array([phi[node]]), np.array([phi[c]]), gamma)[0]
        )

    assert value_iteration(raw, gamma) == value_iteration(shaped, gamma)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    method=st.sampled_from(["none", "exponential", "uniform", "shuffled"]),
)
def test_every_redistribution_keeps_the_optimal_actions(seed, method):
    # Redistributed rewards depend on the whole trajectory, so compare trajectories:
    # for every node, the best complete trajectory through it starts with the same action.
    process, outcome, _ = tree(seed)
    rng = np.random.default_rng(seed)
    ret_raw, ret_red = {}, {}
    for leaf in itertools.product(range(BRANCH), repeat=DEPTH):
        steps = [leaf[: k + 1] for k in range(DEPTH)]
        o = np.array([outcome.get(s, 0.0) for s in steps])
        p = np.array([process[s] for s in steps])
        ret_raw[leaf] = float((o + p).sum())
        ret_red[leaf] = float((redistribute(o, method, lam=0.15, window=2, rng=rng) + p).sum())
    for d in range(DEPTH):
        for node in itertools.product(range(BRANCH), repeat=d):
            through = [leaf for leaf in ret_raw if leaf[:d] == node]
            best_raw = max(through, key=ret_raw.get)
            best_red = max(through, key=ret_red.get)
            assert best_raw[d] == best_red[d]
