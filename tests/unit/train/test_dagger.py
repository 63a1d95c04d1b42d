"""Supervised (DAgger-style) distillation of an ensemble into a student: the loss, the
rounds, and that the student moves towards its teacher on the states it visits."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.train.config import TrainConfig
from inspector.train.dagger import (
    DistillSettings,
    collect,
    distil,
    flipped,
    kl_loss,
    mixed,
    teacher_targets,
    train_round,
)
from inspector.train.distill import EnsembleTeacher
from tests.unit.rrm.test_buffer import tiny_model, tiny_profile, venv


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), t=st.floats(0.5, 4.0))
def test_the_kl_is_zero_on_the_teacher_and_positive_elsewhere(seed, t):
    g = th.Generator().manual_seed(seed)
    logits = th.randn(5, 3, generator=g)
    same = kl_loss(th.log_softmax(logits, -1), logits + 7.0, t)  # a shift changes nothing
    assert abs(float(same)) < 1e-5
    other = kl_loss(th.log_softmax(logits, -1), th.randn(5, 3, generator=g) * 3, t)
    assert float(other) > 0


def test_rounds_split_the_steps_into_whole_vector_steps():
    s = DistillSettings(steps=1000, rounds=3)
    assert s.round_steps(4) == 332 and s.round_steps(4) % 4 == 0
    assert DistillSettings(steps=2, rounds=5).round_steps(4) == 4


def test_flips_give_each_observation_four_times_with_the_state_unchanged():
    rng = np.random.default_rng(0)
    obs = {
        "glimpse": rng.integers(0, 256, (2, 3, 4, 5), dtype=np.uint8),
        "overview": rng.integers(0, 256, (2, 1, 4, 5), dtype=np.uint8),
        "state": rng.random((2, 6)).astype(np.float32),
    }
    out = flipped(obs)
    assert {k: v.shape[0] for k, v in out.items()} == {"glimpse": 8, "overview": 8, "state": 8}
    np.testing.assert_array_equal(out["glimpse"][:2], obs["glimpse"])
    np.testing.assert_array_equal(out["glimpse"][2:4], obs["glimpse"][..., ::-1])
    np.testing.assert_array_equal(out["overview"][6:], obs["overview"][..., ::-1, ::-1])
    np.testing.assert_array_equal(out["state"][4:6], obs["state"])


@pytest.fixture(scope="module")
def members():
    prof = tiny_profile()
    return [tiny_model(prof, seed=s) for s in range(2)]


def test_the_student_learns_the_teachers_distributions_on_its_own_states(members):
    teacher = EnsembleTeacher([m.policy for m in members])
    student = tiny_model(tiny_profile(), seed=5)
    env = venv(tiny_profile())
    seen, _ = collect(student, env, 64, env.reset())
    probe = {**seen, **teacher_targets(teacher, seen)}

    def gap() -> float:
        obs = {k: th.as_tensor(probe[k]).float() for k in ("glimpse", "overview", "state")}
        with th.no_grad():
            cats = student.policy.get_distribution(obs).distribution
        return float(kl_loss(th.as_tensor(probe["t_verdict"]), cats[-1].logits))

    before = gap()
    rounds = []
    s = DistillSettings(steps=96, rounds=3, passes=8, batch=32, lr=3e-3)
    history = distil(student, teacher, env, s, after_round=lambda m, k, _: rounds.append(k))
    assert rounds == [1, 2, 3] and student.num_timesteps == 96
    assert [h["steps"] for h in history] == [32, 64, 96]
    parts = ("cpu_s_rollout", "cpu_s_teacher", "cpu_s_update")
    assert all(h[p] >= 0 for h in history for p in parts)  # where each round's CPU went
    assert sum(h["cpu_s_update"] for h in history) > 0  # 8 passes of minibatch updates
    assert gap() < before  # closer to its teacher on the states it visited
    # A run that stopped after its steps has nothing left to do.
    assert distil(student, teacher, env, s) == []
    # after_round's False stops the distillation after that round (the run gave up).
    more = DistillSettings(steps=384, rounds=3, passes=1, batch=32)  # rounds of 128
    history = distil(student, teacher, env, more, after_round=lambda m, k, _: k < 2)
    assert len(history) == 2 and student.num_timesteps == 96 + 2 * 128  # not 384
    env.close()


def test_the_default_distillation_of_members_is_supervised():
    from pathlib import Path

    from inspector.train.members import student_spec

    cfg = TrainConfig()
    spec = student_spec("p.yaml", "synthetic", {}, 500, Path("run"), cfg, 2)
    assert spec.config["supervised_distill_steps"] == 500
    old = student_spec("p.yaml", "synthetic", {}, 500, Path("run"), cfg.replace(distill="ppo"), 2)
    assert old.config["supervised_distill_steps"] == 0 and old.config["w_kd"] == 1.0
    with pytest.raises(ValueError, match="distill must be"):
        TrainConfig(distill="magic").validate()
    assert np.isclose(TrainConfig().distill_temperature, 1.0)


def test_the_best_member_on_val_starts_the_student_and_leads_its_teacher(tmp_path):
    import json

    from inspector.train.distill import ensemble_members
    from inspector.train.members import lead_member, student_spec, student_teacher

    members = []
    for name, score in (("m0", 0.7), ("m1", 0.8), ("m2", 0.8), ("m3", None)):
        (tmp_path / "members" / name).mkdir(parents=True)
        (tmp_path / "members" / name / "model.zip").write_bytes(b"")
        best = {"operating_point": score} if score is not None else {}
        (tmp_path / "members" / name / "select.json").write_text(json.dumps({"best": best}))
        members.append(tmp_path / "members" / name)
    cfg = TrainConfig(select_metric="operating_point")
    assert lead_member(members, cfg) == "m1"  # the default: the best; ties: the first
    assert lead_member(members, cfg.replace(distill_init="lead")) == "m0"
    assert student_teacher(tmp_path, members, cfg.replace(distill_init="lead")) == (
        "m0",
        "ensemble",
    )
    first, teacher = student_teacher(tmp_path, members, cfg)
    assert (first, teacher) == ("m1", "ensemble_m1")
    led = [m.name for m in ensemble_members(tmp_path / teacher)]
    assert led == ["m1", "m0", "m2", "m3"]  # its moves are m1's; the exported one stays m0's
    spec = student_spec("p.yaml", "synthetic", {}, 8, tmp_path, cfg, 4, first, teacher)
    assert spec.init_from == str((tmp_path / "members" / "m1").resolve())
    assert spec.teacher == str((tmp_path / "ensemble_m1").resolve())
    # From scratch: no weights carried over, its own perception pretraining, the same
    # teacher (led by the best member), so its width may differ from the members'.
    scratch = cfg.replace(distill_init="scratch", perception_samples=300, cnn_channels=16)
    assert student_teacher(tmp_path, members, scratch) == ("m1", "ensemble_m1")
    spec = student_spec("p.yaml", "synthetic", {}, 8, tmp_path, scratch, 4, first, teacher)
    assert spec.init_from is None
    assert spec.config["perception_samples"] == 300 and spec.config["cnn_channels"] == 16
    wide = cfg.replace(distill_init="scratch", student_cnn_channels=16)
    spec = student_spec("p.yaml", "synthetic", {}, 8, tmp_path, wide, 4, first, teacher)
    assert spec.config["cnn_channels"] == 16 and spec.init_from is None
    same = student_spec("p.yaml", "synthetic", {}, 8, tmp_path, cfg, 4, first, teacher)
    assert same.config["cnn_channels"] == cfg.cnn_channels
    with pytest.raises(ValueError, match="set distill_init: scratch"):
        cfg.replace(student_cnn_channels=16).validate()
    for bad in (-1, 2.5, True, 1000):
        with pytest.raises(ValueError, match="student_cnn_channels must be"):
            cfg.replace(distill_init="scratch", student_cnn_channels=bad).validate()
    assert spec.teacher == str((tmp_path / "ensemble_m1").resolve())


def test_the_aggregate_draws_from_every_round_it_keeps():
    from inspector.train.dagger import Aggregate

    agg = Aggregate()
    for r in range(3):
        agg.add({"t_verdict": np.full((4, 2), r, np.float32), "state": np.full((4, 1), r)})
    drawn = agg.sample(np.random.default_rng(0), 300)
    assert len(agg) == 12 and drawn["t_verdict"].shape == (300, 2)
    assert set(np.unique(drawn["state"])) == {0, 1, 2}
    np.testing.assert_array_equal(drawn["t_verdict"][:, 0], drawn["state"][:, 0])


def test_mixup_mixes_the_images_of_two_rows_and_keeps_the_state():
    rng = np.random.default_rng(0)
    obs = {
        "glimpse": th.rand(6, 3, 4, 5) * 255,
        "overview": th.rand(6, 1, 4, 5) * 255,
        "state": th.rand(6, 7),
    }
    out = mixed(obs, 0.4, rng)
    assert {k: v.shape for k, v in out.items()} == {k: v.shape for k, v in obs.items()}
    assert th.equal(out["state"], obs["state"])
    for key in ("glimpse", "overview"):  # inside the range the two rows span, elementwise
        lo = obs[key].amin(0, keepdim=True)
        hi = obs[key].amax(0, keepdim=True)
        assert bool(((out[key] >= lo - 1e-4) & (out[key] <= hi + 1e-4)).all())
    assert not th.allclose(out["glimpse"], obs["glimpse"])


def test_mixup_distillation_learns_the_teacher_on_mixed_inputs(members):
    """With mixup the teacher judges each mixed minibatch: the student's KL to it on
    mixed inputs of its own states falls; without a teacher it is refused."""
    from inspector.train.dagger import Aggregate

    teacher = EnsembleTeacher([m.policy for m in members])
    student = tiny_model(tiny_profile(), seed=6)
    env = venv(tiny_profile())
    seen, _ = collect(student, env, 64, env.reset())
    env.close()
    data = Aggregate()
    data.add({**seen, **teacher_targets(teacher, seen)})
    probe = mixed(
        {k: th.as_tensor(seen[k]).float() for k in ("glimpse", "overview", "state")},
        0.4, np.random.default_rng(1),
    )  # fmt: skip

    def gap() -> float:
        with th.no_grad():
            t = teacher.get_distribution(probe).distribution[-1].logits
            s_ = student.policy.get_distribution(probe).distribution[-1].logits
        return float(kl_loss(th.log_softmax(t, -1), s_))

    s = DistillSettings(steps=64, passes=8, batch=32, lr=3e-3, mixup=0.4)
    before = gap()
    rng = np.random.default_rng(0)
    for _ in range(4):
        train_round(student, data, 256, s, rng, teacher)
    assert gap() < before
    with pytest.raises(ValueError, match="mixup needs the teacher"):
        train_round(student, data, 32, s, rng)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="distill_mixup"):
            TrainConfig(distill_mixup=bad).validate()
