"""Training presets: chosen from the camera, adapted to the profile, under config files."""

from __future__ import annotations

from pathlib import Path

import pytest

from inspector.errors import InspectorError
from inspector.profile import load_profile
from inspector.train.config import TrainConfig
from inspector.train.presets import PRESETS, describe, preset_for, resolve, with_config_file

ROOT = Path(__file__).resolve().parents[3]


def test_auto_picks_synthetic_for_the_synthetic_camera_and_footage_for_every_other():
    assert preset_for("synthetic") == "synthetic"
    for cam in ("folder", "video", "store", "live"):
        assert preset_for(cam) == "footage"
    preset, cfg, notes = resolve("auto", "synthetic")
    assert preset.name == "synthetic" and cfg.perception_samples == 8000 and not notes


def test_the_footage_preset_is_the_magnetic_tile_benchmarks_best_agent():
    prof = load_profile(str(ROOT / "reward_profiles" / "magnetic_tile.yaml"))
    _, cfg, notes = resolve(None, "folder", prof)
    assert (cfg.perception_levels, cfg.glimpse_evidence, cfg.overview_evidence) == (
        "all",
        True,
        True,
    )
    assert cfg.verdict_balance and cfg.verdict_stop_weight == 8.0
    assert cfg.lr_floor == cfg.learning_rate
    # Trained and run one level above native (levels 0..2): said on the console.
    assert cfg.rollout_max_zoom == 1 and cfg.search_depth == "auto"
    assert len(notes) == 1 and "zoom level 1 of 0..2" in notes[0]
    # Without the rollout depth (train --search-depth full or a level): every level.
    assert resolve(None, "folder", prof, rollout_depth=False)[1].rollout_max_zoom is None
    # With --members: a student four times the members' width, from scratch, its glimpse
    # CNN depthwise-separable (the members' plain), in rounds of 12,500 steps.
    assert (cfg.distill_init, cfg.student_cnn_channels, cfg.cnn_channels) == ("scratch", 32, 8)
    assert cfg.student_cnn_separable and not cfg.cnn_separable and cfg.distill_rounds == 12


def test_every_data_preset_keeps_the_best_model_and_chooses_an_operating_point():
    for name in ("synthetic", "footage"):
        cfg = resolve(name, "synthetic")[1]
        assert cfg.select_interval > 0 and cfg.operating_point == "balanced"
    bare = resolve("none", "synthetic")[1]
    assert bare == TrainConfig()


def test_overview_evidence_is_dropped_with_a_note_where_the_profile_cannot_have_it():
    prof = load_profile(str(ROOT / "reward_profiles" / "lcd_quadrants.yaml"))
    _, cfg, notes = resolve("footage", "synthetic", prof)
    assert cfg.glimpse_evidence and not cfg.overview_evidence
    assert "overview" in notes[0]
    # Two zoom levels: none between the overview and native, so every level is trained.
    assert cfg.rollout_max_zoom is None and "every zoom level" in notes[1]


def test_a_config_file_changes_only_the_keys_it_sets(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("bc_samples: 100\nseed: 3\n")
    cfg = with_config_file(resolve("synthetic", "synthetic")[1], f)
    assert (cfg.bc_samples, cfg.seed, cfg.perception_samples) == (100, 3, 8000)
    doc = describe(PRESETS["synthetic"], cfg)
    assert doc["set"]["perception_samples"] == 8000
    assert doc["differs_from_defaults"]["seed"] == 3


def test_a_config_file_is_validated_on_top_of_the_preset_not_alone(tmp_path):
    """A key that is only valid with the preset's others (a student wider than its
    members needs the footage preset's distill_init: scratch) is taken; a combination
    that is invalid on top of the preset is refused with the file's location."""
    f = tmp_path / "c.yaml"
    f.write_text("student_cnn_separable: false\nstudent_cnn_channels: 16\n")
    cfg = with_config_file(resolve("footage", "folder")[1], f)
    assert not cfg.student_cnn_separable and cfg.student_cnn_channels == 16  # the plain one
    assert cfg.distill_init == "scratch" and cfg.perception_samples == 8000  # the preset's
    f.write_text("# a student another width than its members needs fresh weights\n"
                 "distill_init: best\nstudent_cnn_channels: 16\n")  # fmt: skip
    with pytest.raises(InspectorError, match=r"c\.yaml:2:1: student_cnn_channels 16 differs"):
        with_config_file(resolve("footage", "folder")[1], f)
    f.write_text("")  # an empty file changes nothing
    assert with_config_file(resolve("footage", "folder")[1], f) == resolve("footage", "folder")[1]


def test_unknown_preset_is_an_inspector_error():
    with pytest.raises(InspectorError, match="auto, synthetic, footage, none"):
        resolve("fast", "synthetic")


def test_members_distil_for_the_presets_share_of_the_members_steps(monkeypatch, tmp_path):
    """train --members: the footage preset's student distils for half a member's PPO
    steps (150,000 of 300,000, in rounds of 12,500), the synthetic preset's for half too;
    --distill-timesteps and a config's distill_timesteps still decide where given."""
    import inspector.commands._members as members_cli
    from inspector.cli import build_parser

    seen = []
    monkeypatch.setattr(
        members_cli, "run_members", lambda args, cfg: seen.append(args.distill_timesteps) or 0
    )
    tiles = str(ROOT / "reward_profiles" / "magnetic_tile.yaml")
    panels = str(ROOT / "reward_profiles" / "lcd_quadrants.yaml")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("distill_timesteps: 123\n")

    def run(profile: str, camera: str, *extra: str) -> int:
        argv = ["train", "--profile", profile, "--camera", camera, "--param", f"path={tmp_path}",
                "--out", str(tmp_path / "r"), "--members", "2", *extra]  # fmt: skip
        if camera == "synthetic":
            argv = [a for a in argv if a not in ("--param", f"path={tmp_path}")]
        args = build_parser().parse_args(argv)
        assert args.func(args) == 0
        return seen[-1]

    assert PRESETS["footage"].timesteps == 300_000
    assert run(tiles, "folder") == 150_000
    assert run(tiles, "folder", "--timesteps", "1000") == 500
    assert run(panels, "synthetic") == PRESETS["synthetic"].timesteps // 2
    assert run(tiles, "folder", "--distill-timesteps", "77") == 77
    # the rounds the share was chosen on: 12,500 steps each (a check after each)
    from inspector.train.dagger import DistillSettings

    _, footage, _ = resolve("footage", "folder")
    rounds = DistillSettings(steps=150_000, rounds=footage.distill_rounds)
    assert rounds.round_steps(footage.n_envs) == 12_500
    assert run(tiles, "folder", "--preset", "footage", "--config", str(cfg)) is None  # 123
