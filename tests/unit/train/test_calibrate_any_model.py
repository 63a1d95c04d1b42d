"""``calibrate`` takes what ``eval`` and ``export`` take: a run, its model.zip, and the
ensemble directory of ``train --members`` (its point stored for its members' files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inspector.cli import main
from inspector.errors import ModelError
from inspector.train.config import TrainConfig
from inspector.train.distill import write_ensemble
from inspector.train.torch_policy import load_any_policy

ROOT = Path(__file__).resolve().parents[3]
PROFILE = ROOT / "reward_profiles" / "lcd_panel.yaml"
SYN = ["--param", "size=128", "--param", "invisible_at=32", "--param", "point_size=1,1"]


def _run(folder: Path, seed: int) -> Path:
    """An untrained run directory: model.zip, profile.yaml and config.yaml."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.env import InspectionEnv
    from inspector.profile import load_profile
    from inspector.train.runner import build_model

    cfg = TrainConfig(n_envs=1, n_steps=16, batch_size=16, n_epochs=1, seed=seed)
    env = DummyVecEnv([lambda: InspectionEnv(str(PROFILE), "synthetic", {"size": 128})])
    model = build_model(env, load_profile(str(PROFILE)), cfg, None, None)
    folder.mkdir(parents=True)
    model.save(str(folder / "model.zip"))
    env.close()
    shutil.copy(PROFILE, folder / "profile.yaml")
    (folder / "config.yaml").write_text(cfg.to_yaml())
    return folder


@pytest.fixture(scope="module")
def members_run(tmp_path_factory) -> Path:
    """The shape of a train --members run: two members, their ensemble, members.json."""
    out = tmp_path_factory.mktemp("members")
    members = [_run(out / "members" / f"m{i}", i) for i in range(2)]
    write_ensemble(out / "ensemble", members)
    (out / "members.json").write_text("{}\n")
    return out


def _calibrate(model: Path, capsys) -> tuple[int, str]:
    rc = main(["calibrate", str(model), "--camera", "synthetic", *SYN, "--episodes", "6"])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_calibrate_takes_the_ensemble_directory_and_eval_reads_its_point(members_run, capsys):
    ens = members_run / "ensemble"
    rc, out = _calibrate(ens, capsys)
    assert rc == 0, out
    assert "6 parts from synthetic" in out
    point = json.loads((ens / "operating_point.json").read_text())
    # Stored for these member files: the ensemble loads at the chosen bias (a point for
    # other files would be ignored with a warning and read as 0).
    policy = load_any_policy(ens)
    assert policy.backend == "ensemble" and len(policy.members) == 2
    assert policy.meta.ok_bias == pytest.approx(point["ok_bias"])
    assert point["frames"] == 6


def test_calibrate_still_takes_a_member_run(members_run, capsys):
    m1 = members_run / "members" / "m1"
    rc, out = _calibrate(m1 / "model.zip", capsys)
    assert rc == 0, out
    assert (m1 / "operating_point.json").is_file()


def test_the_top_of_a_members_run_names_the_two_models_it_holds(members_run, capsys):
    with pytest.raises(ModelError, match="student.*ensemble"):
        load_any_policy(members_run)
    rc, out = _calibrate(members_run, capsys)
    assert rc == 2 and "train --members run" in out


def test_auto_depth_stays_at_the_depth_the_run_was_trained_at(tmp_path, capsys):
    """A run trained at zoom level 1 (the footage preset's rollout_max_zoom), calibrated
    by hand later with ``--search-depth auto``: native (level 2) is never tried."""
    run = _run(tmp_path / "d1", 0)
    cfg = TrainConfig(n_envs=1, n_steps=16, batch_size=16, n_epochs=1, rollout_max_zoom=1)
    (run / "config.yaml").write_text(cfg.to_yaml())
    rc = main(
        ["calibrate", str(run), "--camera", "synthetic", *SYN, "--episodes", "6"]
        + ["--search-depth", "auto", "--dry-run"]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "no level deeper than 1" in out
    tried = [line.split(":")[0].strip() for line in out.splitlines() if "actions/part" in line]
    assert tried == ["depth 1", "depth 0"]
    # An explicit depth is the user's: no note, native allowed.
    rc = main(
        ["calibrate", str(run / "model.zip"), "--camera", "synthetic", *SYN, "--episodes", "6"]
        + ["--search-depth", "full", "--dry-run"]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "no level deeper" not in out


def test_confidence_holds_the_target_with_a_margin_or_says_how_many_parts_it_needs(
    members_run, capsys
):
    """A ceiling holds at 0.8 confidence by default (its bound printed and stored), too
    few good parts is an error that names how many it would take, and ``--confidence
    none`` holds the rate the parts show."""
    m0 = members_run / "members" / "m0"
    base = ["calibrate", str(m0), "--camera", "synthetic", *SYN]
    # 0 false alarms in n good parts bound the rate at 1 - 0.2 ** (1 / n): 0.05 needs 32.
    rc = main([*base, "--max-false-alarms", "0.05", "--episodes", "8"])
    out = capsys.readouterr()
    assert rc == 2, out
    assert "cannot show false alarms <= 0.05 at 0.8 confidence" in out.err
    assert "needs at least 32 good parts" in out.err and "--confidence none" in out.err
    rc = main([*base, "--max-false-alarms", "0.05", "--episodes", "8", "--confidence", "none"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "confidence" not in out
    assert json.loads((m0 / "operating_point.json").read_text())["confidence"] is None
    base += ["--max-false-alarms", "0.5"]
    rc = main([*base, "--episodes", "24", "--confidence", "0.9"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "at 0.9 confidence" in out and "held to the target: (false alarms <= " in out
    point = json.loads((m0 / "operating_point.json").read_text())
    assert point["confidence"] == 0.9 and point["target"] == 0.5
    # A confidence without a ceiling or floor, or outside (0, 1), is refused.
    assert main([*base[:-2], "--confidence", "0.9", "--episodes", "2"]) == 2
    with pytest.raises(SystemExit):
        main([*base, "--confidence", "1", "--episodes", "2"])
    capsys.readouterr()
