"""A model of a ``scan.actions: tiles`` profile through the product: train, export (ONNX
parity with torch), the ONNX runtime's episodes, and the station's profile check."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from inspector.errors import ModelError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "n_envs: 1\nn_steps: 64\nbatch_size: 64\nn_epochs: 1\nfinal_eval_episodes: 0\n"
CONFIG += "bc_samples: 128\nbc_epochs: 1\nperception_samples: 0\n"


def profile(tmp: Path, actions: str | None) -> Path:
    """lcd_panel.yaml on the quadrants geometry (64-px glimpses, 2 levels), with
    ``actions`` (None: the default moves, no key)."""
    text = (ROOT / "reward_profiles" / "lcd_panel.yaml").read_text()
    text = text.replace("glimpse: 32", "glimpse: 64").replace("zoom_levels: 3", "zoom_levels: 2")
    if actions:
        text = text.replace("move_fraction: 0.5", f"move_fraction: 0.5\n  actions: {actions}")
    path = tmp / f"{actions or 'moves'}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def tiles_model(tmp_path_factory) -> tuple[Path, Path]:
    from inspector.cli import main

    tmp = tmp_path_factory.mktemp("tiles")
    (tmp / "cfg.yaml").write_text(CONFIG)
    prof = profile(tmp, "tiles")
    run, onnx_path = tmp / "run", tmp / "m.onnx"
    rc = main(
        ["train", "--profile", str(prof), "--camera", "synthetic", "--param", "size=128",
         "--timesteps", "64", "--out", str(run), "--config", str(tmp / "cfg.yaml"),
         "--no-progress"]
    )  # fmt: skip
    assert rc == 0
    # --observations: the exporter's own parity check of ONNX against torch on episodes.
    assert main(["export", str(run), "--out", str(onnx_path), "--observations", "40"]) == 0
    return onnx_path, prof


def test_the_exported_model_carries_the_tile_table(tiles_model):
    path, _ = tiles_model
    props = {p.key: json.loads(p.value) for p in onnx.load(str(path)).metadata_props}
    assert props["inspector.actions"] == ["tile_0", "tile_1", "tile_2", "tile_3", "stop"]
    assert props["inspector.scan"]["actions"] == "tiles"
    assert props["inspector.scan"]["tiles"] == 2


def test_the_onnx_runtime_runs_tile_episodes(tiles_model):
    from inspector.camera import open_camera
    from inspector.policy.agent import run_episode
    from inspector.policy.onnx_backend import OrtPolicy
    from inspector.scan import Scanner

    policy = OrtPolicy(tiles_model[0], providers=["CPUExecutionProvider"])
    scanner = Scanner.from_metadata(policy.meta)
    assert scanner.actions == policy.meta.actions and scanner.stop == 4
    cam = open_camera("synthetic", {"size": 128, "seed": 1})
    for i in range(4):
        d = run_episode(policy, scanner, cam.load(i).image, 8)
        assert all(0 <= a <= 4 for a in d.actions)
        assert d.stopped == (d.actions[-1] == 4)
        assert all(p.zoom in (0, 1) for p in d.path)
    cam.close()


def test_the_station_refuses_a_profile_of_another_table(tiles_model, tmp_path):
    from inspector.policy.onnx_backend import OrtPolicy
    from inspector.station.config import check_profile

    policy = OrtPolicy(tiles_model[0], providers=["CPUExecutionProvider"])
    prof, _ = check_profile(policy, str(tiles_model[1]))
    assert prof.scan.actions == "tiles"
    with pytest.raises(ModelError, match="disagree on the action table"):
        check_profile(policy, str(profile(tmp_path, None)))
    with pytest.raises(ModelError, match="disagree on the action table"):
        check_profile(policy, str(profile(tmp_path, "moves+tiles")))


def test_a_model_whose_actions_were_edited_is_refused_at_load(tiles_model, tmp_path):
    from inspector.policy.onnx_backend import OrtPolicy

    m = onnx.load(str(tiles_model[0]))
    for p in m.metadata_props:
        if p.key == "inspector.actions":
            p.value = json.dumps(["up", "down", "left", "right", "stop"])
    onnx.save(m, str(tmp_path / "edited.onnx"))
    with pytest.raises(ModelError, match="not the table its scan settings give"):
        OrtPolicy(tmp_path / "edited.onnx", providers=["CPUExecutionProvider"])
