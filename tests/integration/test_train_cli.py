"""train / eval through the CLI at a small size, and resume after kill -9."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def cli(*args: str, check: bool = True, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [PY, str(ROOT / "main.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "smoke"
    cli(
        "train",
        "--profile",
        "reward_profiles/lcd_panel.yaml",
        "--camera",
        "synthetic",
        "--timesteps",
        "2048",
        "--out",
        str(out),
        "--preset",
        "none",
        "--no-progress",
    )
    return out


def test_train_writes_model_config_profile_copy_and_report(smoke_run):
    for name in ("model.zip", "config.yaml", "profile.yaml", "profile.sha256", "report.json"):
        assert (smoke_run / name).is_file(), name
    report = json.loads((smoke_run / "report.json").read_text())
    assert report["episodes"] == 100
    assert set(report["classes"]) == {"ok", "line", "point"}
    import hashlib

    sha = hashlib.sha256((smoke_run / "profile.yaml").read_bytes()).hexdigest()
    assert (smoke_run / "profile.sha256").read_text().strip() == sha
    assert list((smoke_run / "tb").rglob("events.out.tfevents.*"))


def test_eval_writes_the_documented_json(smoke_run, tmp_path):
    out = tmp_path / "eval.json"
    png = tmp_path / "eval.png"
    cli(
        "eval",
        str(smoke_run / "model.zip"),
        "--camera",
        "synthetic",
        "--episodes",
        "30",
        "--json",
        str(out),
        "--plot",
        str(png),
    )
    r = json.loads(out.read_text())
    for key in (
        "classes",
        "episodes",
        "accuracy",
        "balanced_accuracy",
        "defect_recall",
        "false_alarm_rate",
        "defect_auroc",
        "confusion",
        "mean_steps",
        "pixel_fraction",
        "per_class_recall",
    ):
        assert key in r, key
    assert r["defect_auroc"] is None or 0.0 <= r["defect_auroc"] <= 1.0
    assert r["episodes"] == 30
    assert sum(map(sum, r["confusion"])) == 30
    assert 0.0 <= r["pixel_fraction"] <= r["mean_steps"]
    assert png.stat().st_size > 1000


def test_user_errors_are_one_line_and_exit_2(tmp_path):
    proc = cli(
        "train",
        "--profile",
        "missing.yaml",
        "--camera",
        "synthetic",
        "--timesteps",
        "10",
        "--out",
        str(tmp_path),
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    bad_cfg = tmp_path / "cfg.yaml"
    bad_cfg.write_text("n_envs: 2\nbatchsize: 3\n")
    proc = cli(
        "train",
        "--profile",
        "reward_profiles/lcd_panel.yaml",
        "--camera",
        "synthetic",
        "--timesteps",
        "10",
        "--out",
        str(tmp_path / "x"),
        "--config",
        str(bad_cfg),
        check=False,
    )
    assert proc.returncode == 2
    assert "cfg.yaml:2:1" in proc.stderr and "did you mean 'batch_size'" in proc.stderr
    proc = cli("eval", str(tmp_path / "nope.zip"), "--camera", "synthetic", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def _steps(run: Path) -> int:
    with zipfile.ZipFile(run / "model.zip") as z:
        data = json.loads(z.read("data"))
    return int(data["num_timesteps"])


def test_resume_after_kill_9_reaches_the_same_step_count(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        "n_envs: 2\nn_steps: 64\nbatch_size: 64\nn_epochs: 1\ncheckpoint_interval: 128\n"
        "final_eval_episodes: 0\n"
    )
    out = tmp_path / "run"
    args = [
        PY,
        str(ROOT / "main.py"),
        "train",
        "--profile",
        "reward_profiles/lcd_panel.yaml",
        "--camera",
        "synthetic",
        "--param",
        "size=128",
        "--timesteps",
        "2048",
        "--out",
        str(out),
        "--config",
        str(cfg),
        "--no-progress",
    ]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    latest = out / "checkpoints" / "latest.json"
    # A liveness guard, not a timing: on a loaded machine the first checkpoints can take
    # minutes (the 240 s this was once failed under load).
    deadline = time.time() + 900
    reached = False
    while time.time() < deadline and proc.poll() is None:
        if latest.exists() and json.loads(latest.read_text())["num_timesteps"] >= 384:
            reached = True
            break
        time.sleep(0.2)
    finished = proc.poll() is not None
    if not finished:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not finished, "training finished before it could be killed"
    assert reached, "no checkpoint at 384 steps within 900 s"
    killed_at = json.loads(latest.read_text())["num_timesteps"]
    assert 0 < killed_at < 2048
    assert not (out / "model.zip").exists()
    done = subprocess.run(
        args + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "resuming from" in done.stderr
    assert _steps(out) == 2048


#: The data presets at a tiny scale: every key the presets set for learning is kept
#: (perception pretraining, cloning, evidence heads, balanced loss), only smaller.
TINY = (
    "n_envs: 1\nn_steps: 64\nbatch_size: 64\nn_epochs: 1\nperception_samples: 64\n"
    "perception_epochs: 1\nbc_samples: 128\nbc_epochs: 1\nselect_interval: 64\n"
    "select_episodes: 12\nfinal_eval_episodes: 8\n"
)


def test_default_synthetic_recipe_keeps_the_best_model_and_calibrates_on_val(tmp_path):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "run"
    proc = cli(
        "train", "--profile", "reward_profiles/lcd_quadrants.yaml", "--camera", "synthetic",
        "--param", "size=128", "--param", "grid=0.25", "--preset", "auto", "--config", str(cfg),
        "--timesteps", "192", "--out", str(out), "--max-false-alarms", "0.5", "--seed", "2",
        "--no-progress",
    )  # fmt: skip
    assert "recipe synthetic" in proc.stdout and "kept:" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["recipe"]["name"] == "synthetic"
    assert report["recipe"]["set"]["perception_samples"] == 8000  # the preset's, before tiny
    assert (out / "perception.json").is_file() and (out / "bc.json").is_file()
    kept = report["kept"]
    val = {"camera": "synthetic", "params": {"size": "128", "grid": "0.25", "seed": "1000"},
           "split": None, "count": 12,
           "source": "synthetic panels of another seed (1000)"}  # fmt: skip
    assert kept["frames"] == val
    assert [c["steps"] for c in kept["checks"]] == [0, 64, 128, 192]
    assert kept["checkpoint"] in ("last", "best.zip") and kept["why"]
    # Judged at the operating point: val recall at <= 50 % false alarms (ties: AUROC).
    assert kept["metric"] == "operating_point" and "false alarms <= 0.5" in kept["decided_by"]
    score = lambda c: (c["operating_point"] or -1, c["defect_auroc"] or -1)  # noqa: E731
    assert score(kept["val"]) == max(score(c) for c in kept["checks"])
    phases = report["cpu_s_by_phase"]  # where the time went
    assert set(phases) == {"perception", "cloning", "ppo", "val_checks", "calibration",
                           "evaluation"} and all(v >= 0 for v in phases.values())  # fmt: skip
    op = report["operating_point"]
    assert op["objective"] == "max_false_alarms" and op["target"] == 0.5
    assert op["frames"] == val
    assert op["at_bias"]["false_alarm_rate"] <= 0.5
    stored = json.loads((out / "operating_point.json").read_text())
    assert stored["ok_bias"] == op["ok_bias"] and stored["frames"] == 12
    assert report["ok_bias"] == op["ok_bias"]  # the report's figures are at that point
    # eval of the run directory runs at the stored operating point, as a station would.
    again = json.loads(cli("eval", str(out), "--camera", "synthetic", "--episodes", "4").stdout)
    assert again["ok_bias"] == op["ok_bias"]


def test_a_config_file_alone_is_the_whole_recipe_as_before_presets(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("n_envs: 1\nn_steps: 64\nbatch_size: 64\nn_epochs: 1\nbc_samples: 64\n"
                   "final_eval_episodes: 4\n")  # fmt: skip
    out = tmp_path / "run"
    proc = cli(
        "train", "--profile", "reward_profiles/lcd_panel.yaml", "--camera", "synthetic",
        "--param", "size=128", "--config", str(cfg), "--timesteps", "64", "--out", str(out),
        "--no-progress",
    )  # fmt: skip
    assert "recipe config" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert not (out / "perception.json").exists() and not (out / "select.json").exists()
    assert report["kept"]["checkpoint"] == "last"
    assert "not chosen" in report["operating_point"]["why"]
    assert not (out / "operating_point.json").exists()


def test_default_footage_recipe_chooses_on_the_manifests_val_split(tmp_path, magnetic_tile):
    tiles = magnetic_tile
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "run"
    proc = cli(
        "train", "--profile", "reward_profiles/magnetic_tile.yaml", "--camera", "folder",
        "--param", f"path={tiles}", "--param", "manifest=splits.csv", "--param", "split=train",
        "--preset", "auto", "--config", str(cfg), "--timesteps", "64", "--out", str(out),
        "--no-progress",
    )  # fmt: skip
    assert "recipe footage" in proc.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["recipe"]["set"]["overview_evidence"] is True
    for section in (report["kept"]["frames"], report["operating_point"]["frames"]):
        assert section["split"] == "val" and section["count"] == 12
        assert section["params"]["manifest"] == "splits.csv"
    assert report["operating_point"]["objective"] == "balanced"
    # The closing evaluation is on the manifest's test split, never train or val.
    frames = report["eval_frames"]
    assert (frames["split"], frames["role"], frames["held_out"]) == ("test", "held-out (test)",
                                                                      True)  # fmt: skip
    assert report["evaluation"] == {"ran": True, "why": "the test split of the training source"}
    assert "eval on 8 held-out (test) frames" in proc.stdout
