"""InspectionEnv: checkers, registration, rewards in info, same pixels as the station path."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3 import PPO
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import inspector  # noqa: F401  (registers inspector/Inspect-v0)
from inspector.env import InspectionEnv
from inspector.errors import InspectorError
from inspector.scan import STOP, Scanner
from inspector.train.network import InspectorExtractor

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "reward_profiles").glob("*.yaml"))
SYN = {"size": 128, "seed": 3}


def mt_params(root):
    return {"path": str(root), "manifest": "splits.csv", "split": "val"}


@pytest.mark.parametrize("profile", [p for p in PROFILES if "magnetic" not in p.name], ids=str)
def test_env_checkers_pass_on_synthetic_panels(profile):
    gym_check_env(InspectionEnv(profile, "synthetic", SYN), skip_render_check=True)
    sb3_check_env(InspectionEnv(profile, "synthetic", SYN), warn=False)


def test_env_checkers_pass_on_magnetic_tile_footage(magnetic_tile):
    prof = ROOT / "reward_profiles" / "magnetic_tile.yaml"
    gym_check_env(InspectionEnv(prof, "folder", mt_params(magnetic_tile)), skip_render_check=True)
    sb3_check_env(InspectionEnv(prof, "folder", mt_params(magnetic_tile)), warn=False)


def test_sparse_profile_over_magnetic_tile_needs_matching_classes(magnetic_tile):
    # sparse.yaml names ok/line/point: tile labels are not its classes -> clear error.
    env = InspectionEnv(
        ROOT / "reward_profiles" / "sparse.yaml", "folder", mt_params(magnetic_tile)
    )
    with pytest.raises(InspectorError, match="not a class of profile"):
        env.reset(seed=0)


def test_gymnasium_make_works_after_import():
    env = gym.make(
        "inspector/Inspect-v0",
        profile=str(ROOT / "reward_profiles" / "lcd_panel.yaml"),
        camera="synthetic",
        camera_params=SYN,
    )
    obs, info = env.reset(seed=0)
    assert set(obs) == {"glimpse", "overview", "state"}
    assert "label" in info


def test_info_carries_label_and_per_term_rewards_and_stop_pays_the_outcome():
    env = InspectionEnv(ROOT / "reward_profiles" / "lcd_panel.yaml", "synthetic", SYN)
    obs, info = env.reset(seed=1)
    label = info["label"]
    obs, r, term, trunc, info = env.step([STOP, label])
    assert term and not trunc
    assert info["correct"] and info["label"] == label
    assert set(info["terms"]) >= {"correct_class", "false_alarm", "step_cost"}
    assert r == pytest.approx(info["outcome"] + info["process"])
    assert info["terms"]["correct_class"] > 0


def test_step_budget_truncates_without_a_verdict():
    env = InspectionEnv(ROOT / "reward_profiles" / "lcd_panel.yaml", "synthetic", SYN)
    env.reset(seed=0)
    for _ in range(env.profile.step_budget):
        _, _, term, trunc, info = env.step([0, 0])
        assert not term
    assert trunc and info["verdict"] == -1
    assert info["terms"]["no_verdict"] < 0
    with pytest.raises(InspectorError):
        env.step([0, 0])


def test_env_and_station_scan_path_see_the_same_pixels():
    env = InspectionEnv(ROOT / "reward_profiles" / "lcd_panel.yaml", "synthetic", SYN)
    obs, _ = env.reset(seed=2)
    sc = Scanner(env.profile.scan, env.profile.step_budget)
    obs2 = sc.reset(env.frame.image)
    rng = np.random.default_rng(0)
    for _ in range(8):
        for k in obs:
            assert np.array_equal(obs[k], obs2[k]), k
        a = int(rng.integers(0, 6))
        obs, *_ = env.step([a, 0])
        obs2, _, _ = sc.step(a)


def test_sb3_ppo_smoke_run():
    env = InspectionEnv(ROOT / "reward_profiles" / "lcd_panel.yaml", "synthetic", SYN)
    model = PPO(
        "MultiInputPolicy",
        env,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        device="cpu",
        policy_kwargs={
            "features_extractor_class": InspectorExtractor,
            "features_extractor_kwargs": {"channels": 4, "features_dim": 16},
            "normalize_images": False,
        },
    )
    model.learn(256)
    assert model.num_timesteps >= 256
