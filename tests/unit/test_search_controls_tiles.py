"""search_controls section 1b (the controls on footage-sized frames): the drivers on frames
larger than the viewport, the report from their rows, and a run over the real footage.

The drivers are checked with a small policy whose verdict reads the glimpses (a bright
spot is a defect), on frames of several sizes; the footage run drives a model trained for
16 steps (its figures mean nothing, the plumbing is what is checked) and skips when the
magnetic-tile footage is absent.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from inspector.policy.base import ModelMeta, Policy
from inspector.scan import ACTIONS, ScanSettings, state_size


@pytest.fixture(autouse=True)
def one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class SpotPolicy(Policy):
    """Defect probability = the brightest pixel of the current glimpse / 255; the moves:
    zoom in to native, then right until ``moves`` actions, then stop."""

    backend = "test"

    def __init__(self, moves: int = 5) -> None:
        s = ScanSettings(glimpse=8, overview=8, zoom_levels=3, memory=2, move_fraction=0.5)
        meta = ModelMeta(
            classes=("free", "spot"),
            actions=ACTIONS,
            scan={k: getattr(s, k) for k in ("glimpse", "overview", "zoom_levels", "memory")}
            | {"move_fraction": s.move_fraction},
            state_size=state_size(s),
            outcome_matrix=np.array([[0.3, -1.0], [-0.6, 1.0]]),
            step_budget=6,
        )
        super().__init__(meta)
        self.moves = moves

    def forward(self, obs):
        g, state = obs["glimpse"], obs["state"]
        p = g[:, 0].reshape(len(g), -1).max(axis=1) / 255.0
        probs = np.stack([1.0 - p, p], axis=1)
        logits = np.zeros((len(g), len(ACTIONS)))
        for i, s in enumerate(state):
            used = round(float(s[5]) * self.meta.step_budget)
            name = "zoom_in" if s[4] < 1 else ("stop" if used >= self.moves else "right")
            logits[i, ACTIONS.index(name)] = 1.0
        return logits, probs, np.zeros((len(g), 1))


def frames(n: int, seed: int):
    """Frames of several sizes (larger than the 8-pixel viewport); every other one has a
    bright spot somewhere."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        h, w = int(rng.integers(9, 40)), int(rng.integers(9, 40))
        img = np.full((h, w), 20, np.uint8)
        label = "spot" if i % 2 else "free"
        if label == "spot":
            img[rng.integers(h), rng.integers(w)] = 250
        out.append(SimpleNamespace(image=img, truth=SimpleNamespace(label=label)))
    return out


def test_the_raster_runs_to_each_frames_tiling_and_the_tiling_is_its_end():
    from benchmarks.studies.search_controls.drivers import max_pooled, tile_count
    from benchmarks.studies.search_controls.tiles import drive_frames

    fs = frames(6, 0)
    out = drive_frames(SpotPolicy(), fs, seed=3, random_max=5)
    want = [tile_count(f.image.shape[1], f.image.shape[0], 8, 8) for f in fs]
    assert out["tiles"].tolist() == want
    raster = out["raster"]
    assert raster["probs"].shape == (6, max(want) + 1, 2)
    for i, n in enumerate(want):
        # one glimpse per tile after the overview; a frame with fewer tiles keeps its last
        assert raster["glimpses"][i].tolist() == [*range(1, n + 2)] + [n + 1] * (max(want) - n)
        assert raster["pixel_fraction"][i, n] >= 1.0 - 1e-9  # the tiling covers the frame
        assert np.allclose(out["tiling"]["last"][i], raster["probs"][i, n])
        assert np.allclose(out["tiling"]["max"][i], max_pooled(raster["probs"][i, : n + 1])[-1])
    # The spot is found by the tiling: every spot frame's max flags it, no free one does.
    flagged = out["tiling"]["max"][:, 1] > 0.5
    assert flagged.tolist() == [f.truth.label == "spot" for f in fs]
    assert out["random"]["probs"].shape == (6, 6, 2)
    agent = out["agent"]
    assert agent["probs"].shape == (6, 7, 2) and (agent["stop"] == 5).all()
    assert "walk" not in out


def test_random_scans_repeat_with_their_seed():
    from benchmarks.studies.search_controls.tiles import drive_frames

    a = drive_frames(SpotPolicy(), frames(4, 1), seed=7, random_max=3)["random"]["probs"]
    b = drive_frames(SpotPolicy(), frames(4, 1), seed=7, random_max=3)["random"]["probs"]
    assert np.array_equal(a, b)


def test_the_section_scores_and_renders_the_drivers_without_a_walk(tmp_path):
    from benchmarks.studies.search_controls import analysis, tiles_report
    from benchmarks.studies.search_controls.tiles import class_counts, drive_frames, same_width

    policy = SpotPolicy()
    parts = {s: drive_frames(policy, frames(12, i), seed=i) for i, s in enumerate(("val", "test"))}
    assert parts["val"]["raster"]["probs"].shape != parts["test"]["raster"]["probs"].shape
    same_width(parts["val"], parts["test"])  # each split's raster ran to its own longest tiling
    rows = analysis.curves(parts["val"], parts["test"], policy.meta.outcome_matrix)
    drivers = {r["driver"] for r in rows}
    assert {"overview", "raster", "raster max", "random", "tiling", "tiling stop"} <= drivers
    assert {"agent", "agent cap"} <= drivers and "walk" not in drivers
    stop = next(r for r in rows if r["driver"] == "tiling stop")
    tmax = next(r for r in rows if r["driver"] == "tiling max")
    assert stop["recall"] == tmax["recall"] and stop["glimpses"] <= tmax["glimpses"]
    words, _ = tiles_report.verdict(rows, "raster")
    assert words.split()[0].strip("*") in ("beats", "ties", "loses", "cannot")
    ev = {
        "classes": list(policy.classes),
        "frames": {s: class_counts(parts[s]["labels"], policy.classes) for s in parts},
        "tiles": {"median": 9.0, "min": 2, "max": 25},
        "step_budget": 6,
        "rows": json.loads(json.dumps(rows)),  # as saved
        "measured": "2026-12-06 08:00 UTC",
        "benchmark": {"config": {"mode": "full", "random_max": 64, "limit": None}},
    }
    text = "\n".join(tiles_report.section({"student": ev, "m0": ev}, tmp_path))
    assert text.startswith("### 1b. Controls at equal glimpses (magnetic tiles)")
    assert "--tiles-models student,m0" in text and str(tmp_path) not in text
    assert (tmp_path / "search_controls_tiles.png").stat().st_size > 0


@pytest.fixture(scope="module")
def tiny_footage_run(magnetic_tile, tmp_path_factory):
    """A magnetic-tile model trained for 16 steps, laid out as a ``train --members`` run
    (its student)."""
    from inspector.train.config import TrainConfig
    from inspector.train.runner import train_run

    run = tmp_path_factory.mktemp("tiles_run")
    cfg = TrainConfig().replace(
        n_envs=1,
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        cnn_channels=4,
        features_dim=16,
        net_arch=[16],
        final_eval_episodes=0,
        bc_samples=0,
        perception_samples=0,
        select_interval=0,
        checkpoint_interval=0,
    )
    params = {"path": str(magnetic_tile), "manifest": "splits.csv", "split": "train"}
    profile = "reward_profiles/magnetic_tile.yaml"
    train_run(profile, "folder", params, 16, run / "student", cfg, progress=False)
    return run


def test_the_tiles_section_runs_on_the_footage_saves_per_model_and_resumes(
    tiny_footage_run, magnetic_tile, tmp_path, capsys
):
    from benchmarks.studies.search_controls.cli import main

    doc = tmp_path / "b.md"
    args = ["--sections", "tiles", "--results", str(tmp_path), "--doc", str(doc)]
    args += ["--tiles-run", str(tiny_footage_run), "--tiles-models", "student,m9"]
    args += ["--tiles-frames", "1", "--tiles-glimpses", "6", "--data", str(magnetic_tile)]
    assert main(args) == 0
    saved = json.loads((tmp_path / "full" / "tiles" / "student.json").read_text())
    assert saved["benchmark"]["config"]["kind"] == "tiles"
    assert sum(saved["frames"]["test"].values()) == 6  # one frame of each class
    drivers = {r["driver"] for r in saved["rows"]}
    assert {"overview", "raster max", "tiling stop", "agent"} <= drivers
    out = capsys.readouterr().out
    assert "no model m9" in out
    text = doc.read_text()
    assert "### 1b. Controls at equal glimpses (magnetic tiles)" in text
    assert str(magnetic_tile) not in text and str(tiny_footage_run) not in text
    assert main(args) == 0  # saved: nothing is driven again
    assert "driving" not in capsys.readouterr().out
