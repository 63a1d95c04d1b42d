"""The glimpse CNN variants: shapes, full-resolution first layers, and the config switch."""

from __future__ import annotations

import torch

from inspector.train.config import TrainConfig
from inspector.train.network import GlimpseCNN
from inspector.train.runner import policy_kwargs


def test_both_variants_pool_to_the_same_features():
    x = torch.randn(3, 1, 32, 32)
    for fine in (False, True):
        cnn = GlimpseCNN(8, fine=fine)
        assert cnn(x).shape == (3, cnn.out_dim) == (3, 32)


def test_fine_variant_keeps_full_resolution_and_sees_every_pixel():
    torch.manual_seed(0)
    cnn = GlimpseCNN(4, fine=True)
    convs = [m for m in cnn.net if isinstance(m, torch.nn.Conv2d)]
    assert all(m.stride == (1, 1) for m in convs) and convs[0].kernel_size == (5, 5)
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in cnn.net)
    assert cnn.net(torch.zeros(1, 1, 32, 32)).shape[-2:] == (32, 32)
    # Every pixel is seen, corners included: the features depend on each of them.
    for y, x in ((0, 0), (16, 7), (31, 31)):
        img = torch.randn(1, 1, 32, 32, requires_grad=True)
        cnn(img).sum().backward()
        assert img.grad is not None and float(img.grad[0, 0, y, x].abs()) > 0


def test_config_switch_reaches_the_extractor():
    assert "fine" not in policy_kwargs(TrainConfig())["features_extractor_kwargs"]
    kw = policy_kwargs(TrainConfig(cnn_fine=True))["features_extractor_kwargs"]
    assert kw["fine"] is True
