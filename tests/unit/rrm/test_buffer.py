"""The RRM rollout buffer inside SB3: identity, return preservation, cut episodes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from inspector.env import InspectionEnv
from inspector.profile import (
    NormalisationConfig,
    Profile,
    RedistributionConfig,
    RRMConfig,
    ScanSettings,
    ShapingConfig,
    TermConfig,
)
from inspector.rrm.buffer import RRMRolloutBuffer, episode_segments
from inspector.train.hybrid import HybridPPO
from inspector.train.network import InspectorExtractor


def tiny_profile(rrm: RRMConfig | None = None) -> Profile:
    return Profile(
        name="tiny",
        classes=("ok", "line", "point"),
        ok_class="ok",
        step_budget=6,
        scan=ScanSettings(glimpse=16, overview=16, zoom_levels=3, memory=2),
        terms=(
            TermConfig("correct_class", 1.0, channel="outcome"),
            TermConfig("false_alarm", -0.5, channel="outcome"),
            TermConfig("focus_defect", 0.3, channel="process"),
            TermConfig("step_cost", -0.01, channel="process"),
        ),
        rrm=rrm or RRMConfig(),
    )


def venv(profile: Profile, n: int = 2, teacher: bool = False) -> DummyVecEnv:
    def make(i):
        def thunk():
            e = InspectionEnv(profile, "synthetic", {"size": 128, "seed": i}, teacher=teacher)
            e.reset(seed=i)
            return e

        return thunk

    return DummyVecEnv([make(i) for i in range(n)])


POLICY_KW = {
    "features_extractor_class": InspectorExtractor,
    "features_extractor_kwargs": {"channels": 4, "features_dim": 16},
    "net_arch": [16],
    "normalize_images": False,
}


def tiny_model(profile: Profile, **kw):
    """A HybridPPO over ``venv(profile)`` with the tiny policy and the RRM buffer."""
    kw = {"n_steps": 16, "device": "cpu", **kw}
    return HybridPPO(
        "MultiInputPolicy",
        venv(profile),
        policy_kwargs=POLICY_KW,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": profile.rrm},
        **kw,
    )


def collect(model) -> None:
    from stable_baselines3.common.callbacks import BaseCallback

    class Nop(BaseCallback):
        def _on_step(self):
            return True

    cb = Nop()
    model._setup_learn(model.n_steps * model.n_envs, cb)
    cb.init_callback(model)
    model.collect_rollouts(model.env, cb, model.rollout_buffer, model.n_steps)


def test_episode_segments_marks_cut_episodes():
    starts = np.array([0, 0, 1, 0, 0, 1, 0])
    assert episode_segments(starts, last_done=False) == [(0, 2, False), (2, 5, True), (5, 7, False)]
    assert episode_segments(np.array([1, 0, 1]), last_done=True) == [(0, 2, True), (2, 3, True)]


def test_identity_settings_give_bit_identical_advantages_to_plain_ppo():
    prof = tiny_profile()
    kw = dict(n_steps=32, batch_size=32, n_epochs=1, seed=3, device="cpu", policy_kwargs=POLICY_KW)
    plain = PPO("MultiInputPolicy", venv(prof), **kw)
    ours = HybridPPO(
        "MultiInputPolicy",
        venv(prof),
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm},
        w_sl=0.0,
        w_kd=0.0,
        **kw,
    )
    ours.policy.load_state_dict(plain.policy.state_dict())
    th.manual_seed(0)
    collect(plain)
    th.manual_seed(0)
    collect(ours)
    assert np.array_equal(plain.rollout_buffer.rewards, ours.rollout_buffer.rewards)
    assert np.array_equal(plain.rollout_buffer.advantages, ours.rollout_buffer.advantages)
    assert np.array_equal(plain.rollout_buffer.returns, ours.rollout_buffer.returns)


@pytest.mark.parametrize("method", ["exponential", "uniform", "shuffled", "learned"])
def test_redistribution_in_the_buffer_preserves_complete_episode_returns(method):
    rrm = RRMConfig(redistribution=RedistributionConfig(method=method, window=4))
    prof = tiny_profile(rrm)
    model = HybridPPO(
        "MultiInputPolicy",
        venv(prof),
        n_steps=48,
        batch_size=48,
        seed=1,
        device="cpu",
        policy_kwargs=POLICY_KW,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": rrm},
    )
    collect(model)
    buf = model.rollout_buffer
    raw = buf.outcome + buf.process
    new = buf.rrm_rewards
    last_dones = buf.last_dones
    n_complete = 0
    for i in range(buf.n_envs):
        for b, e, complete in episode_segments(buf.episode_starts[:, i], bool(last_dones[i])):
            if complete:
                n_complete += 1
                assert np.isclose(new[b:e, i].sum(), raw[b:e, i].sum(), atol=1e-6)
            else:
                # Cut episodes are kept raw: nothing moved.
                assert np.allclose(new[b:e, i], raw[b:e, i])
    assert n_complete > 0
    if method != "uniform":
        assert not np.allclose(new, raw)


def test_shaping_and_normalisation_run_in_the_buffer():
    rrm = RRMConfig(
        shaping=ShapingConfig(potential="focus_quality", scale=1.0),
        normalisation=NormalisationConfig(method="running", clip=3.0),
    )
    prof = tiny_profile(rrm)
    model = HybridPPO(
        "MultiInputPolicy",
        venv(prof),
        n_steps=32,
        batch_size=32,
        seed=0,
        device="cpu",
        policy_kwargs=POLICY_KW,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": rrm},
    )
    collect(model)
    assert np.all(np.abs(model.rollout_buffer.rrm_rewards) <= 3.0)


def test_labels_and_teacher_actions_are_collected_alongside_the_rollout():
    prof = tiny_profile()
    env = venv(prof, teacher=True)
    model = HybridPPO(
        "MultiInputPolicy",
        env,
        n_steps=40,
        batch_size=40,
        seed=0,
        device="cpu",
        policy_kwargs=POLICY_KW,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": dataclasses.replace(prof.rrm)},
        teacher="scripted",
    )
    collect(model)
    buf = model.rollout_buffer
    assert (buf.labels >= 0).all()
    assert (buf.teacher_actions >= 0).all()
    # The verdict target is ok until the defect has been in sight, then the part's true
    # class for the rest of the episode: at most one change, from ok, per episode.
    ok = prof.classes.index(prof.ok_class)
    for i in range(buf.n_envs):
        for b, e, _ in episode_segments(buf.episode_starts[:, i], False):
            col = buf.labels[b:e, i].tolist()
            changes = sum(x != y for x, y in zip(col, col[1:]))
            assert changes <= 1, col
            if changes:
                assert col[0] == ok and col[-1] != ok, col
    model.train()  # the hybrid loss runs on it


def test_teacher_action_of_each_row_belongs_to_that_rows_observation():
    import gymnasium as gym

    prof = tiny_profile()
    emitted: dict[bytes, tuple[int, int]] = {}

    class Log(gym.Wrapper):
        def reset(self, **kw):
            obs, info = self.env.reset(**kw)
            key = obs["glimpse"].tobytes() + obs["state"].tobytes()
            emitted[key] = (info["teacher"], info["teacher_verdict"])
            return obs, info

        def step(self, action):
            obs, r, te, tr, info = self.env.step(action)
            if "teacher_next" in info:
                key = obs["glimpse"].tobytes() + obs["state"].tobytes()
                emitted[key] = (info["teacher_next"], info["teacher_verdict_next"])
            return obs, r, te, tr, info

    env = DummyVecEnv(
        [lambda: Log(InspectionEnv(prof, "synthetic", {"size": 128, "seed": 4}, teacher=True))]
    )
    model = HybridPPO(
        "MultiInputPolicy",
        env,
        n_steps=60,
        batch_size=60,
        seed=0,
        device="cpu",
        policy_kwargs=POLICY_KW,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm},
        teacher="scripted",
    )
    collect(model)
    buf = model.rollout_buffer
    for t in range(buf.buffer_size):
        key = (
            buf.observations["glimpse"][t, 0].tobytes() + buf.observations["state"][t, 0].tobytes()
        )
        assert buf.teacher_actions[t, 0] == emitted[key][0], t
        assert buf.labels[t, 0] == emitted[key][1], t  # the verdict target, aligned too
