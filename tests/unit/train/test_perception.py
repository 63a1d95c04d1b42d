"""Perception pretraining: native crops labelled from the masks teach the glimpse CNN."""

from __future__ import annotations

import numpy as np
import pytest

from inspector.env import InspectionEnv
from inspector.train.perception import (
    glimpse_encoder,
    glimpse_samples,
    perception_pretrain,
    pretrain_glimpse_cnn,
)
from tests.unit.rrm.test_buffer import tiny_model, tiny_profile

CAM = {"size": 128}


def _make(prof):
    return lambda: InspectionEnv(prof, "synthetic", CAM)


def test_crops_are_native_glimpses_and_defect_crops_hold_their_defect():
    prof = tiny_profile()
    data = glimpse_samples(_make(prof), 120, seed=3)
    g = prof.scan.glimpse
    assert data["glimpse"].shape == (120, g, g) and data["glimpse"].dtype == np.uint8
    env = InspectionEnv(prof, "synthetic", CAM)
    ok = env.class_index[prof.ok_class]
    labels = set(data["label"].tolist())
    assert ok in labels and len(labels) > 1  # clean crops and at least one defect class
    assert set(labels) <= set(range(len(prof.classes)))
    # Same seed, same crops.
    again = glimpse_samples(_make(prof), 120, seed=3)
    assert np.array_equal(again["glimpse"], data["glimpse"])


def test_crops_from_every_level_are_the_scanners_glimpses_and_show_their_defect():
    from inspector.scan import Scanner
    from inspector.teacher import defect_visible

    prof = tiny_profile()
    data = glimpse_samples(_make(prof), 150, seed=5, levels="all")
    levels = prof.scan.zoom_levels
    assert set(data["level"].tolist()) == set(range(levels))
    assert data["glimpse"].shape == (150, prof.scan.glimpse, prof.scan.glimpse)
    # Native crops stay exactly what the native mode draws: same seed, same crops.
    native = glimpse_samples(_make(prof), 40, seed=5)
    assert set(native["level"].tolist()) == {levels - 1}
    assert np.array_equal(native["glimpse"], glimpse_samples(_make(prof), 40, seed=5)["glimpse"])
    # Every whole-frame crop of a defect part is labelled so only where the defect shows:
    # replay the parts and check each level-0 defect crop against the teacher's rule.
    env = InspectionEnv(prof, "synthetic", CAM)
    ok = env.class_index[prof.ok_class]
    sc = Scanner(prof.scan, prof.step_budget)
    zero = [i for i in range(150) if data["level"][i] == 0 and data["label"][i] != ok]
    assert zero, "expected defect crops at level 0 (lines show at the overview)"
    found = 0
    for part in range(400):
        _, info = env.reset(seed=5 * 1_000_003 + part)
        sc.reset(env.frame.image)
        g0 = sc.glimpse.copy()
        for i in zero:
            if np.array_equal(data["glimpse"][i], g0):
                mask = env.frame.truth.defect_mask(env.frame.shape)
                assert data["label"][i] == info["label"]
                assert defect_visible(g0, mask, native=False)
                found += 1
    assert found >= len(zero)


def test_unknown_levels_are_refused():
    with pytest.raises(ValueError, match="levels must be one of native, all"):
        glimpse_samples(_make(tiny_profile()), 4, levels="deep")


def test_a_bad_sample_count_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        glimpse_samples(_make(tiny_profile()), 0)


def test_pretraining_learns_a_separable_toy_task_and_changes_only_the_glimpse_cnn():
    prof = tiny_profile()
    model = tiny_model(prof, seed=0)
    cnn = glimpse_encoder(model)
    g = prof.scan.glimpse
    rng = np.random.default_rng(0)
    # Class 1: one bright pixel on noise, class 0: noise alone (what a point looks like).
    x = rng.integers(90, 110, size=(400, g, g)).astype(np.uint8)
    y = np.arange(400) % 2
    for i in np.nonzero(y)[0]:
        x[i, rng.integers(g), rng.integers(g)] = 255
    head_before = {k: v.clone() for k, v in model.policy.action_net.state_dict().items()}
    cnn_before = [p.detach().clone() for p in cnn.parameters()]
    stats = pretrain_glimpse_cnn(cnn, {"glimpse": x, "label": y}, 3, epochs=15, held_out=0.25)
    assert stats["perception/accuracy"] > 0.9
    assert any(not p.equal(q) for p, q in zip(cnn.parameters(), cnn_before))
    for k, v in model.policy.action_net.state_dict().items():
        assert v.equal(head_before[k])


def test_perception_pretrain_runs_on_the_env_crops():
    prof = tiny_profile()
    model = tiny_model(prof, seed=0)
    stats = perception_pretrain(model, _make(prof), 64, epochs=1)
    assert stats["perception/samples"] == 64 and 0.0 <= stats["perception/accuracy"] <= 1.0
    # Every level: flipped batches, and the held-out accuracy per level.
    stats = perception_pretrain(model, _make(prof), 200, epochs=1, levels="all")
    assert any(k.startswith("perception/accuracy_level") for k in stats)


def test_held_out_share_must_be_a_fraction():
    prof = tiny_profile()
    cnn = glimpse_encoder(tiny_model(prof, seed=0))
    g = prof.scan.glimpse
    data = {"glimpse": np.zeros((4, g, g), np.uint8), "label": np.zeros(4, np.int64)}
    with pytest.raises(ValueError, match="held_out"):
        pretrain_glimpse_cnn(cnn, data, 3, held_out=1.0)


def test_a_frozen_glimpse_cnn_is_left_alone_by_cloning_and_ppo_and_the_rest_still_learns():
    from inspector.train.perception import freeze_glimpse_cnn
    from inspector.train.pretrain import behaviour_clone, collect_teacher_samples

    prof = tiny_profile()
    model = tiny_model(prof, seed=0)
    cnn = glimpse_encoder(model)
    n = sum(p.numel() for p in cnn.parameters())
    assert freeze_glimpse_cnn(model) == n
    cnn_before = [p.detach().clone() for p in cnn.parameters()]
    head_before = [p.detach().clone() for p in model.policy.action_net.parameters()]
    data = collect_teacher_samples(
        lambda: InspectionEnv(prof, "synthetic", CAM, teacher=True), 64, seed=0
    )
    behaviour_clone(model, data, epochs=1)
    model.learn(64)
    assert all(p.equal(q) for p, q in zip(cnn.parameters(), cnn_before))
    assert any(not p.equal(q) for p, q in zip(model.policy.action_net.parameters(), head_before))
    # Unfrozen, the next update moves it again.
    assert freeze_glimpse_cnn(model, frozen=False) == n
    model.learn(64, reset_num_timesteps=False)
    assert any(not p.equal(q) for p, q in zip(cnn.parameters(), cnn_before))


def test_the_evidence_head_is_the_one_pretrained_and_is_frozen_with_the_cnn():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.rrm.buffer import RRMRolloutBuffer
    from inspector.train.hybrid import HybridPPO
    from inspector.train.network import InspectorExtractor
    from inspector.train.perception import evidence_head, freeze_glimpse_cnn

    prof = tiny_profile()
    kw = {"channels": 4, "features_dim": 16, "evidence_classes": len(prof.classes)}
    model = HybridPPO(
        "MultiInputPolicy",
        DummyVecEnv([_make(prof)]),
        policy_kwargs={"features_extractor_class": InspectorExtractor,
                       "features_extractor_kwargs": kw, "net_arch": [16],
                       "normalize_images": False},
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm},
        n_steps=16, device="cpu", seed=0,
    )  # fmt: skip
    head = evidence_head(model)
    assert head is not None and head.out_features == len(prof.classes)
    before = [p.detach().clone() for p in head.parameters()]
    perception_pretrain(model, _make(prof), 64, epochs=1)
    assert any(not p.equal(q) for p, q in zip(head.parameters(), before))
    n_cnn = sum(p.numel() for p in glimpse_encoder(model).parameters())
    n_head = sum(p.numel() for p in head.parameters())
    assert freeze_glimpse_cnn(model) == n_cnn + n_head
    assert not any(p.requires_grad for p in head.parameters())
    # A head of the wrong shape is refused, not silently replaced.
    g = prof.scan.glimpse
    data = {"glimpse": np.zeros((4, g, g), np.uint8), "label": np.zeros(4, np.int64)}
    with pytest.raises(ValueError, match="head maps"):
        pretrain_glimpse_cnn(glimpse_encoder(model), data, 5, head=head)
    # Without the switch there is no evidence head.
    assert evidence_head(tiny_model(prof, seed=0)) is None
