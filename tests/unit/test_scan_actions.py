"""The profile's action table (``scan.actions``): moves (default, unchanged), tile jumps,
both; the env, the tile teacher and the model metadata take it from the profile."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from inspector.env import InspectionEnv
from inspector.errors import ModelError, ProfileError
from inspector.policy.base import ModelMeta, check_actions, check_contract
from inspector.profile import ScanSettings, load_profile
from inspector.scan import ACTIONS, MOVES, STOP, Scanner, action_names, scan_metadata
from inspector.teacher import ScriptedTeacher, TileTeacher, teacher_for

ROOT = Path(__file__).resolve().parents[2]
LCD = ROOT / "reward_profiles" / "lcd_panel.yaml"
#: 128-px frames, 64-px native glimpses: a 2 x 2 grid of native tiles is the exhaustive
#: tiling (the quadrants task of the search_controls study)
CAM = {"size": 128, "seed": 3}


def tiles_profile(kind: str = "tiles", tiles: int = 2):
    prof = load_profile(str(LCD))
    scan = dataclasses.replace(prof.scan, glimpse=64, zoom_levels=2, actions=kind, tiles=tiles)
    return dataclasses.replace(prof, scan=scan)


def test_the_default_table_is_the_moves_and_its_metadata_is_unchanged():
    s = load_profile(str(LCD)).scan
    assert s.actions == "moves"
    assert action_names(s) is ACTIONS and ACTIONS[STOP] == "stop" and STOP == 6
    # A default model's metadata has exactly the keys it always had (exports byte for byte).
    assert scan_metadata(s) == {
        "glimpse": 32,
        "overview": 32,
        "zoom_levels": 3,
        "memory": 4,
        "move_fraction": 0.5,
    }
    assert list(scan_metadata(s)) == [
        "glimpse",
        "overview",
        "zoom_levels",
        "memory",
        "move_fraction",
    ]


def test_tile_tables_end_with_stop():
    s = ScanSettings(actions="tiles", tiles=2)
    assert action_names(s) == ("tile_0", "tile_1", "tile_2", "tile_3", "stop")
    both = action_names(dataclasses.replace(s, actions="moves+tiles", tiles=3))
    assert both[:6] == MOVES and both[6:15] == tuple(f"tile_{k}" for k in range(9))
    assert both[-1] == "stop" and len(both) == 16
    assert scan_metadata(s)["actions"] == "tiles" and scan_metadata(s)["tiles"] == 2
    with pytest.raises(ValueError, match="unknown scan actions"):
        action_names(ScanSettings(actions="jumps"))


def test_a_profile_chooses_its_table_and_a_typo_is_a_profile_error(tmp_path):
    text = LCD.read_text().replace("move_fraction: 0.5", "move_fraction: 0.5\n  actions: tiles")
    (tmp_path / "a.yaml").write_text(text)
    assert load_profile(str(tmp_path / "a.yaml")).scan.actions == "tiles"
    (tmp_path / "b.yaml").write_text(text.replace("actions: tiles", "actions: tile"))
    with pytest.raises(ProfileError, match="did you mean 'tiles'"):
        load_profile(str(tmp_path / "b.yaml"))


def test_a_tile_action_jumps_to_that_native_tile_in_raster_order():
    sc = Scanner(ScanSettings(glimpse=32, zoom_levels=2, actions="tiles", tiles=2), budget=8)
    img = np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8)
    sc.reset(img)
    assert (sc.n_tiles, sc.tile0, sc.stop) == (4, 0, 4)
    corners = []
    for k in range(4):
        obs, moved, revisit = sc.step(k)
        assert moved and not revisit and sc.native
        x0, y0, x1, y1 = sc.rect
        corners.append((x0, y0))
        assert np.array_equal(obs["glimpse"][0], img[y0:y1, x0:x1])
        assert sc.tile_seen(k)
    assert corners == [(0, 0), (32, 0), (0, 32), (32, 32)]
    assert sc.pixel_fraction() == 1.0
    _, moved, revisit = sc.step(3)  # the tile in view: nothing moves
    assert not moved and revisit
    before = sc.rect
    sc.step(sc.stop)
    assert sc.rect == before


def test_moves_keep_their_indices_beside_the_tiles():
    s = ScanSettings(glimpse=32, zoom_levels=2, actions="moves+tiles", tiles=2)
    img = np.zeros((64, 64), np.uint8)
    a, b = Scanner(s, 8), Scanner(dataclasses.replace(s, actions="moves"), 8)
    a.reset(img), b.reset(img)
    for act in (4, 3, 1, 2, 0):  # zoom in, right, down, left, up
        a.step(act), b.step(act)
        assert a.rect == b.rect and a.level == b.level
    a.step(a.tile0 + 3)
    assert a.rect == (32, 32, 64, 64) and a.stop == 10


@pytest.mark.parametrize("kind", ["tiles", "moves+tiles"])
def test_the_env_and_its_teacher_take_the_table_from_the_profile(kind):
    env = InspectionEnv(tiles_profile(kind), "synthetic", CAM, teacher=True)
    n = 5 if kind == "tiles" else 11
    assert list(env.action_space.nvec) == [n, 3]
    steps, correct = {}, []
    for ep in range(12):
        obs, info = env.reset(seed=ep)
        assert isinstance(env._teacher, TileTeacher)
        a, v = info["teacher"], info["teacher_verdict"]
        seen = []
        while True:
            obs, _, term, trunc, info = env.step([a, v])
            seen.append(a)
            if term or trunc:
                break
            a, v = info["teacher_next"], info["teacher_verdict_next"]
        assert term and seen[-1] == n - 1  # the teacher stops, never truncated
        tiles = [x - env.scanner.tile0 for x in seen[:-1]]
        assert tiles == list(range(len(tiles)))  # raster order, no revisit
        label = env.classes[info["label"]]
        steps.setdefault(label, []).append(len(seen))
        correct.append(info["correct"])
    assert all(correct)
    assert set(steps.get("ok", [5])) == {5}  # an ok part: every tile, then stop
    env.close()


def test_teacher_for_picks_the_teacher_of_the_table():
    moves = Scanner(ScanSettings(), 8)
    tiles = Scanner(ScanSettings(actions="tiles"), 8)
    assert isinstance(teacher_for(moves), ScriptedTeacher)
    assert isinstance(teacher_for(tiles), TileTeacher)
    tiles.reset(np.zeros((64, 64), np.uint8))
    with pytest.raises(ValueError, match="move actions"):
        ScriptedTeacher().reset(tiles, None)


def _meta(scan: dict, actions: tuple[str, ...]) -> ModelMeta:
    return ModelMeta(
        classes=("ok", "line", "point"),
        actions=actions,
        scan=scan,
        state_size=1,
        outcome_matrix=np.zeros((3, 3)),
    )


def test_the_metadata_check_accepts_its_own_table_and_refuses_another():
    tiles = ScanSettings(actions="tiles", tiles=2)
    check_actions(_meta(scan_metadata(tiles), action_names(tiles)))
    check_actions(_meta(scan_metadata(ScanSettings()), ACTIONS))  # an old model
    with pytest.raises(ModelError, match="not the table its scan settings give"):
        check_actions(_meta(scan_metadata(tiles), ACTIONS), "m.onnx")
    with pytest.raises(ModelError, match="scan.actions 'moves'"):
        check_contract(_meta(scan_metadata(ScanSettings()), action_names(tiles)), {}, "m.onnx")
    with pytest.raises(ModelError, match="broken model metadata"):
        check_actions(_meta({**scan_metadata(tiles), "tiles": 10**6}, ACTIONS))


def test_a_torch_policy_of_a_tiles_profile_carries_its_table(tmp_path):
    from inspector.train.config import TrainConfig
    from inspector.train.runner import build_model, make_vec_env
    from inspector.train.torch_policy import TorchPolicy, meta_for_model

    prof = tiles_profile()
    cfg = TrainConfig().replace(n_envs=1, vec_env="dummy", n_steps=32, batch_size=32)
    yaml = tmp_path / "p.yaml"
    yaml.write_text(
        LCD.read_text()
        .replace("zoom_levels: 3", "zoom_levels: 2")
        .replace("glimpse: 32", "glimpse: 64")
        .replace("move_fraction: 0.5", "move_fraction: 0.5\n  actions: tiles\n  tiles: 2")
    )
    env = make_vec_env(str(yaml), "synthetic", {"size": "128"}, cfg, False)
    model = build_model(env, load_profile(str(yaml)), cfg, None, None)
    meta = meta_for_model(model, load_profile(str(yaml)))
    assert meta.actions == action_names(prof.scan)
    assert meta.scan["actions"] == "tiles" and meta.scan["tiles"] == 2
    policy = TorchPolicy(model, meta)
    sc = Scanner.from_metadata(meta)
    obs = sc.reset(np.zeros((128, 128), np.uint8))
    logits, probs, _ = policy.forward({k: v[None].astype(np.float32) for k, v in obs.items()})
    assert logits.shape == (1, 5) and probs.shape == (1, 3)
    assert model._stop_action() == 4
    env.close()


class _Fixed:
    """A policy stub that never chooses stop and reads a fixed defect probability."""

    def __init__(self, p_ok: float, ok_bias: float = 0.0):
        from inspector.policy.base import Policy

        meta = dataclasses.replace(_meta(scan_metadata(ScanSettings()), ACTIONS), ok_bias=ok_bias)
        meta = dataclasses.replace(meta, outcome_matrix=np.eye(3) * 2 - 1)
        self.policy = Policy(meta)
        self.policy.forward = lambda obs: (
            np.array([[0, 0, 0, 0, 5.0, 0, -9]]),  # zoom in, never stop
            np.array([[p_ok, 1 - p_ok, 0.0]]),
            np.zeros((1, 1)),
        )


def test_stop_on_defect_ends_the_search_once_the_verdict_flags_a_defect():
    from inspector.policy.agent import run_episode

    img = np.zeros((128, 128), np.uint8)
    sc = Scanner(ScanSettings(), 6)
    sure = _Fixed(p_ok=0.2).policy
    d = run_episode(sure, sc, img, 6)
    assert not d.stopped and d.steps == 6  # the move head alone never stops
    d = run_episode(sure, sc, img, 6, stop_on_defect=True)
    assert d.stopped and d.actions == [STOP] and d.verdict == "line"
    unsure = _Fixed(p_ok=0.6).policy
    assert run_episode(unsure, sc, img, 6, stop_on_defect=True).steps == 6
    # The operating point decides: an ok bias that favours defects stops it too.
    biased = _Fixed(p_ok=0.6, ok_bias=-2.0).policy
    assert run_episode(biased, sc, img, 6, stop_on_defect=True).actions == [STOP]


def test_the_station_config_takes_stop_on_defect(tmp_path):
    from inspector.station.config import load_station_config

    text = "station_id: s1\nmodel:\n  path: m.onnx\n  stop_on_defect: true\n"
    (tmp_path / "s.yaml").write_text(text)
    assert load_station_config(tmp_path / "s.yaml").model.stop_on_defect is True
