"""The glimpse CNN variants: shapes, full-resolution first layers, and the config switch."""

from __future__ import annotations

import pytest
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


def _space(memory=3, g=16, state=8):
    import gymnasium as gym
    import numpy as np

    return gym.spaces.Dict(
        {
            "glimpse": gym.spaces.Box(0, 255, (memory, g, g), np.uint8),
            "overview": gym.spaces.Box(0, 255, (1, g, g), np.uint8),
            "state": gym.spaces.Box(-1, 1, (state,), np.float32),
        }
    )


def test_evidence_is_the_max_class_probability_over_the_filled_memory():
    from inspector.train.network import InspectorExtractor, standardise

    torch.manual_seed(0)
    ext = InspectorExtractor(_space(), channels=4, features_dim=16, evidence_classes=3)
    captured = {}
    ext.head.register_forward_hook(lambda m, inp, out: captured.setdefault("x", inp[0]))
    g = torch.randint(1, 255, (2, 3, 16, 16)).float()
    g[1, 2] = 0  # an empty memory slot (before enough glimpses)
    obs = {"glimpse": g, "overview": torch.rand(2, 1, 16, 16) * 255, "state": torch.zeros(2, 8)}
    ext(obs)
    ev = captured["x"][:, -3:]
    with torch.no_grad():
        feats = ext.glimpse_cnn(standardise(g.reshape(6, 1, 16, 16))).reshape(2, 3, -1)
        prob = torch.softmax(ext.evidence(feats), dim=-1)
    assert torch.allclose(ev[0], prob[0].amax(dim=0), atol=1e-6)
    assert torch.allclose(ev[1], prob[1, :2].amax(dim=0), atol=1e-6)  # the empty slot is out
    # current + memory glimpse features (16 each), overview (16), state (64), evidence (3)
    assert ext.head[0].in_features == 2 * 16 + 16 + 64 + 3


def test_evidence_switch_needs_the_class_count_and_reaches_the_extractor():
    import pytest

    cfg = TrainConfig(glimpse_evidence=True)
    with pytest.raises(ValueError, match="number of verdict classes"):
        policy_kwargs(cfg)
    assert policy_kwargs(cfg, 6)["features_extractor_kwargs"]["evidence_classes"] == 6
    assert "evidence_classes" not in policy_kwargs(TrainConfig(), 6)["features_extractor_kwargs"]


def test_overview_evidence_is_the_evidence_heads_verdict_on_the_overview():
    import pytest

    from inspector.train.network import InspectorExtractor, standardise

    torch.manual_seed(0)
    ext = InspectorExtractor(
        _space(), channels=4, features_dim=16, evidence_classes=3, overview_evidence=True
    )
    captured = {}
    ext.head.register_forward_hook(lambda m, inp, out: captured.setdefault("x", inp[0]))
    ov = torch.rand(2, 1, 16, 16) * 255
    obs = {"glimpse": torch.rand(2, 3, 16, 16) * 255, "overview": ov, "state": torch.zeros(2, 8)}
    ext(obs)
    with torch.no_grad():
        want = torch.softmax(ext.evidence(ext.glimpse_cnn(standardise(ov))), dim=-1)
    assert torch.allclose(captured["x"][:, -3:], want, atol=1e-6)
    assert ext.head[0].in_features == 2 * 16 + 16 + 64 + 3 + 3
    with pytest.raises(ValueError, match="needs evidence_classes"):
        InspectorExtractor(_space(), channels=4, overview_evidence=True)
    import gymnasium as gym
    import numpy as np

    space = _space()
    space["overview"] = gym.spaces.Box(0, 255, (1, 24, 24), np.uint8)
    with pytest.raises(ValueError, match="overview 24x24, glimpse 16x16"):
        InspectorExtractor(space, channels=4, evidence_classes=3, overview_evidence=True)


def test_perception_and_overview_switches_are_validated_and_reach_the_extractor():
    import pytest

    with pytest.raises(ValueError, match="overview_evidence needs glimpse_evidence"):
        TrainConfig(overview_evidence=True).validate()
    with pytest.raises(ValueError, match="perception_levels must be 'native' or 'all'"):
        TrainConfig(perception_levels="some").validate()
    cfg = TrainConfig(glimpse_evidence=True, overview_evidence=True, perception_levels="all")
    cfg.validate()
    assert policy_kwargs(cfg, 6)["features_extractor_kwargs"]["overview_evidence"] is True
    kw = policy_kwargs(TrainConfig(glimpse_evidence=True), 6)["features_extractor_kwargs"]
    assert "overview_evidence" not in kw


def test_skipping_empty_memory_slots_changes_neither_features_nor_gradients(monkeypatch):
    """Only the current glimpse and the filled slots go through the CNN, in one call with
    the overview (speed-ups): the features and every gradient equal those of running the
    CNN on every slot, and on the overview in a call of its own."""
    from inspector.train.network import InspectorExtractor, standardise

    def every_slot(self, g, filled, extra=None):
        b, m, h, w = g.shape
        feats = self.glimpse_cnn(standardise(g.reshape(b * m, 1, h, w))).reshape(b, m, -1)
        return feats, (None if extra is None else self.glimpse_cnn(extra))

    torch.manual_seed(0)
    ext = InspectorExtractor(_space(memory=4), channels=4, features_dim=16, evidence_classes=3,
                             overview_evidence=True)  # fmt: skip
    g = torch.randint(1, 255, (6, 4, 16, 16)).float()
    for i, n in enumerate([1, 2, 3, 4, 1, 0]):  # filled slots per sample (0: none yet)
        g[i, n:] = 0
    obs = {"glimpse": g, "overview": torch.rand(6, 1, 16, 16) * 255, "state": torch.rand(6, 8)}

    def run():
        ext.zero_grad()
        out = ext(obs)
        (out * torch.arange(out.shape[1])).sum().backward()
        return out.detach(), [p.grad.clone() for p in ext.parameters() if p.grad is not None]

    fast, fast_grads = run()
    monkeypatch.setattr(InspectorExtractor, "_memory_features", every_slot)
    full, full_grads = run()
    assert torch.allclose(fast, full, atol=1e-6)
    assert len(fast_grads) == len(full_grads)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(fast_grads, full_grads))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"cnn_channels": 0}, "cnn_channels must be a whole number from 1 to 256"),
        ({"cnn_channels": -3}, "cnn_channels must be"),
        ({"cnn_channels": 300}, "cnn_channels must be"),
        ({"cnn_channels": True}, "cnn_channels must be"),
        ({"features_dim": 0}, "features_dim must be at least 1"),
        ({"net_arch": [64, 0]}, "net_arch must be a list of layer sizes"),
    ],
)
def test_a_network_size_that_cannot_work_is_refused_before_torch_sees_it(change, message):
    TrainConfig(cnn_channels=1, features_dim=1, net_arch=[]).validate()  # the smallest
    with pytest.raises(ValueError, match=message):
        TrainConfig(**change).validate()


def test_separable_variant_factorises_the_inner_convolutions_and_sees_every_pixel():
    """Depthwise 3x3 then pointwise 1x1 in the second and third layers: the same output
    size and receptive field as the plain stack, at a fraction of its weights."""
    torch.manual_seed(0)
    plain, sep = GlimpseCNN(32), GlimpseCNN(32, separable=True)
    x = torch.randn(3, 1, 32, 32)
    assert sep(x).shape == plain(x).shape == (3, 128)
    depthwise = [m for m in sep.net if isinstance(m, torch.nn.Conv2d) and m.groups > 1]
    assert [m.groups for m in depthwise] == [32, 64]
    assert all(m.kernel_size == (3, 3) for m in depthwise)

    def weights(m):
        return sum(p.numel() for p in m.parameters())

    assert weights(sep) * 5 < weights(plain)
    for y, x_ in ((0, 0), (16, 7), (31, 31)):
        img = torch.randn(1, 1, 32, 32, requires_grad=True)
        sep(img).sum().backward()
        assert img.grad is not None and float(img.grad[0, 0, y, x_].abs()) > 0
    with pytest.raises(ValueError, match="either fine or separable"):
        GlimpseCNN(8, fine=True, separable=True)


def test_separable_switch_reaches_the_extractor_and_excludes_fine():
    assert "separable" not in policy_kwargs(TrainConfig())["features_extractor_kwargs"]
    kw = policy_kwargs(TrainConfig(cnn_separable=True))["features_extractor_kwargs"]
    assert kw["separable"] is True
    with pytest.raises(ValueError, match="cnn_fine and cnn_separable exclude each other"):
        TrainConfig(cnn_fine=True, cnn_separable=True).validate()
    with pytest.raises(ValueError, match="must be true or false"):
        TrainConfig(cnn_separable="yes").validate()


def test_a_separable_student_needs_fresh_weights_and_reaches_the_students_config(tmp_path):
    from inspector.train.members import student_spec

    with pytest.raises(ValueError, match="set distill_init: scratch"):
        TrainConfig(student_cnn_separable=True, distill_init="best").validate()
    cfg = TrainConfig(student_cnn_separable=True, distill_init="scratch", student_cnn_channels=32)
    cfg.validate()
    spec = student_spec("p.yaml", "synthetic", {}, 1000, tmp_path, cfg, 4)
    assert spec.config["cnn_separable"] is True and spec.config["cnn_channels"] == 32
    TrainConfig(**spec.config).validate()  # the student's own config is a valid one
    # A plain student of separable members stays separable: the members' CNN is the default.
    spec = student_spec("p.yaml", "synthetic", {}, 10, tmp_path, TrainConfig(cnn_separable=True), 4)
    assert spec.config["cnn_separable"] is True
