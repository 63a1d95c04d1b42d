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
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None:
        if latest.exists() and json.loads(latest.read_text())["num_timesteps"] >= 384:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "training finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = json.loads(latest.read_text())["num_timesteps"]
    assert 0 < killed_at < 2048
    assert not (out / "model.zip").exists()
    done = subprocess.run(
        args + ["--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "resuming from" in done.stderr
    assert _steps(out) == 2048
