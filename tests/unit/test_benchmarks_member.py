"""benchmarks.speed.member: its baseline computes what this code computes (so the
comparison is of speed alone), is put back afterwards, and the report's ratios."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from benchmarks.speed import member
from inspector.train import network


def _space():
    return gym.spaces.Dict(
        {
            "glimpse": gym.spaces.Box(0, 255, (4, 16, 16), np.uint8),
            "overview": gym.spaces.Box(0, 255, (1, 16, 16), np.uint8),
            "state": gym.spaces.Box(-1, 1, (8,), np.float32),
        }
    )


@pytest.mark.parametrize("separable", [False, True])
def test_the_baseline_network_gives_this_codes_features_and_gradients(separable):
    torch.manual_seed(0)
    ext = network.InspectorExtractor(
        _space(), channels=4, features_dim=16, evidence_classes=3, overview_evidence=True,
        separable=separable,
    )  # fmt: skip
    g = torch.randint(1, 255, (5, 4, 16, 16)).float()
    for i, n in enumerate([1, 2, 4, 0, 3]):
        g[i, n:] = 0
    obs = {"glimpse": g, "overview": torch.rand(5, 1, 16, 16) * 255, "state": torch.rand(5, 8)}

    def run():
        ext.zero_grad()
        out = ext(obs)
        (out * torch.arange(out.shape[1])).sum().backward()
        return out.detach(), [p.grad.clone() for p in ext.parameters()]

    now, now_grads = run()
    with member.baseline_network():
        assert network.standardise is member._old_standardise
        before, before_grads = run()
    assert network.standardise is not member._old_standardise  # put back
    assert torch.allclose(now, before, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(now_grads, before_grads))


def test_the_report_gives_each_phase_and_the_ratio():
    base = {"perception": 10.0, "cloning": 10.0, "ppo": 40.0, "val_checks": 1.0,
            "calibration": 2.0, "evaluation": 1.0}  # fmt: skip
    cur = dict(base, ppo=30.0, perception=8.0)
    body = member.report({"baseline": [base], "current": [cur]}, 16384, 3)
    assert "| ppo | 40.0 | 30.0 | 0.75x |" in body
    assert "| perception | 10.0 | 8.0 | 0.80x |" in body
    assert "| all | 64.0 | 52.0 | 0.81x |" in body
    assert "**0.75x** the CPU" in body
