"""A real exported model for the station tests, built once per test session.

``build_station_model(folder)`` trains a tiny HybridPPO policy on the synthetic
camera (256 steps, one rollout) with ``inspector train`` and exports it with
``inspector export``, in this process (one torch import for both). The policy is
barely trained; the tests check plumbing, not accuracy.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "reward_profiles" / "lcd_panel.yaml"

TRAIN_CONFIG = """\
n_envs: 1
n_steps: 128
batch_size: 64
n_epochs: 1
final_eval_episodes: 0
teacher: none
"""


def build_station_model(folder: Path) -> Path:
    """Train and export; returns the ``.onnx`` path (reused when ``folder`` has one).

    :raises RuntimeError: a command failed (its exit status in the message).
    """
    from inspector.cli import main

    onnx = folder / "run" / "model.onnx"
    if onnx.is_file():
        return onnx
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "train.yaml"
    cfg.write_text(TRAIN_CONFIG)
    run = folder / "run"
    rc = main(
        ["train", "--profile", str(PROFILE), "--camera", "synthetic", "--param", "size=128",
         "--timesteps", "256", "--out", str(run), "--config", str(cfg), "--no-progress"]
    )  # fmt: skip
    if rc != 0:
        raise RuntimeError(f"inspector train exited with {rc}")
    rc = main(["export", str(run), "--out", str(onnx), "--observations", "50"])
    if rc != 0:
        raise RuntimeError(f"inspector export exited with {rc}")
    return onnx
