"""The search depth: calibrated with the operating point, carried by the model, obeyed by
the agent loop (the agent declares rather than look deeper than ``max_zoom``)."""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from inspector.commands._args import search_depth
from inspector.errors import InspectorError, ModelError
from inspector.policy.agent import Decision, capped_at, run_episode
from inspector.policy.base import ModelMeta, Policy
from inspector.policy.ensemble import EnsemblePolicy
from inspector.policy.operating_point import FILE, OperatingPoint, read_calibrated
from inspector.profile import ScanSettings
from inspector.scan import ACTIONS, Scanner, action_names, scan_metadata, state_size
from inspector.train.calibration import choose_depth, depth_candidates
from inspector.train.config import TrainConfig

R2 = np.array([[1.0, -1.0], [-1.0, 1.0]])


def meta_for(settings: ScanSettings, max_zoom: int | None = None) -> ModelMeta:
    return ModelMeta(
        classes=("ok", "defect"),
        actions=action_names(settings),
        scan=scan_metadata(settings),
        state_size=state_size(settings),
        outcome_matrix=R2,
        step_budget=10,
        max_zoom=max_zoom,
    )


class Hashy(Policy):
    """A deterministic policy whose action and verdict follow the pixels it sees."""

    def __init__(self, meta: ModelMeta, salt: int = 0) -> None:
        super().__init__(meta)
        self.salt = salt

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        g = np.asarray(obs["glimpse"], dtype=np.float64)
        s = np.asarray(obs["state"], dtype=np.float64)
        key = int(g.sum() * 7 + s.sum() * 1000) + self.salt
        logits = np.zeros((1, len(self.meta.actions)), dtype=np.float32)
        logits[0, key % len(self.meta.actions)] = 1.0
        p = (np.sin(key) + 1.0) / 2.0
        return logits, np.array([[p, 1.0 - p]], dtype=np.float32), np.zeros((1, 1))


class AlwaysZoom(Policy):
    """Zooms in at every step; sure of ``defect`` once it sees native pixels."""

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        logits = np.zeros((1, len(self.meta.actions)), dtype=np.float32)
        logits[0, ACTIONS.index("zoom_in")] = 1.0
        native = np.asarray(obs["state"])[0, 4] == 1.0  # zoom level / (levels - 1)
        p = 0.1 if native else 0.9
        return logits, np.array([[p, 1 - p]], dtype=np.float32), np.zeros((1, 1))


def frame(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (128, 160), dtype=np.uint8)


def test_level_after_predicts_the_level_each_action_takes_the_viewport_to():
    sc = Scanner(ScanSettings(glimpse=32, zoom_levels=3), budget=10)
    sc.reset(frame(0))
    zin, zout = ACTIONS.index("zoom_in"), ACTIONS.index("zoom_out")
    assert [sc.level_after(a) for a in (0, 3, zin, zout, sc.stop)] == [0, 0, 1, 0, 0]
    for _ in range(3):
        want = sc.level_after(zin)
        sc.step(zin)
        assert sc.level == want
    assert sc.level_after(zin) == 2 and sc.level_after(zout) == 1
    tiles = Scanner(ScanSettings(glimpse=32, zoom_levels=3, actions="moves+tiles", tiles=3), 10)
    tiles.reset(frame(1))
    assert tiles.level_after(tiles.tile0 + 4) == 2 and tiles.level_after(zin) == 1


def test_the_agent_declares_rather_than_look_deeper_than_its_depth():
    s = ScanSettings(glimpse=32, zoom_levels=3)
    sc = Scanner(s, budget=10)
    full = run_episode(AlwaysZoom(meta_for(s)), sc, frame(0), 10)
    assert not full.capped and full.native_glimpses >= 1 and full.verdict == "defect"
    cut = run_episode(AlwaysZoom(meta_for(s, max_zoom=1)), sc, frame(0), 10)
    assert cut.capped and cut.stopped and cut.native_glimpses == 0
    assert cut.pixel_fraction == 0.0 and max(p.zoom for p in cut.path) == 1
    assert cut.verdict == "ok" and cut.steps == 2  # zoom to 1, then the cut zoom is a stop
    # An explicit depth overrides the model's; the full depth searches every level.
    again = run_episode(AlwaysZoom(meta_for(s, max_zoom=1)), sc, frame(0), 10, max_zoom=2)
    assert not again.capped and again.native_glimpses == full.native_glimpses
    overview = run_episode(AlwaysZoom(meta_for(s)), sc, frame(0), 10, max_zoom=0)
    assert overview.steps == 1 and [p.zoom for p in overview.path] == [0]


@pytest.mark.parametrize("kind", ["moves", "moves+tiles"])
def test_one_full_pass_gives_every_depth_exactly(kind: str):
    s = ScanSettings(glimpse=16, zoom_levels=3, actions=kind, tiles=3)
    sc = Scanner(s, budget=12)
    for seed in range(12):
        pol = Hashy(meta_for(s), salt=seed)
        full = run_episode(pol, sc, frame(seed), 12, max_zoom=2)
        for d in range(3):
            run = run_episode(pol, sc, frame(seed), 12, max_zoom=d)
            probs, steps = capped_at(full, d)
            assert np.array_equal(probs, run.probabilities) and steps == run.steps


def dec(probs_full: float, early: float | None) -> Decision:
    """A full-depth decision of p(ok) ``probs_full``; with ``early`` it first asked for
    native pixels (level 2) at step 1 while p(ok) was ``early``."""
    deeper = [(0, 1, np.array([0.5, 0.5]))]
    if early is not None:
        deeper.append((1, 2, np.array([early, 1 - early])))
    return Decision("ok", np.array([probs_full, 1 - probs_full]), 5, [], deeper=deeper)


def test_a_shallower_depth_is_chosen_only_when_strictly_better():
    y = np.array([0, 0, 1, 1])
    # Native glimpses spoil a defect the level-1 view had right (no ok bias mends it at
    # full depth: it scores above a good part): depth 1 is better.
    spoiled = [dec(0.9, 0.9), dec(0.6, 0.6), dec(0.2, 0.2), dec(0.7, 0.3)]
    best, table = choose_depth(spoiled, y, R2, [2, 1, 0], "balanced", None)
    assert best["max_zoom"] == 1 and best["at_bias"]["balanced_accuracy"] == 1.0
    assert [e["max_zoom"] for e in table] == [2, 1, 0]
    assert table[1]["mean_actions"] == 2.0 and table[0]["mean_actions"] == 5.0
    # The same verdicts at every depth: the search stays as trained.
    same = [dec(0.9, 0.9), dec(0.8, 0.8), dec(0.2, 0.2), dec(0.3, 0.3)]
    assert choose_depth(same, y, R2, [2, 1, 0], "balanced", None)[0]["max_zoom"] == 2
    # An objective no depth meets is the deepest's error.
    with pytest.raises(InspectorError, match="no good parts"):
        choose_depth(same[2:], y[2:], R2, [2, 1], "max_false_alarms", 0.05)


def test_depth_requests_are_checked():
    assert depth_candidates("auto", 3) == [2, 1, 0]
    assert depth_candidates("full", 3) == [2] and depth_candidates(1, 3) == [1]
    # auto tries no level deeper than the model was trained at (rollout_max_zoom).
    assert depth_candidates("auto", 3, deepest=1) == [1, 0]
    assert depth_candidates("full", 3, deepest=1) == [2]
    for bad in (3, -1, "deep", True):
        with pytest.raises(InspectorError, match="search depth"):
            depth_candidates(bad, 3)
    assert search_depth("auto") == "auto" and search_depth("2") == 2
    for bad in ("-1", "native", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="zoom level"):
            search_depth(bad)
    assert TrainConfig().search_depth == "full"
    TrainConfig(search_depth=1).validate()
    with pytest.raises(ValueError, match="search_depth"):
        TrainConfig(search_depth="deep").validate()


def test_the_depth_travels_in_metadata_and_operating_point(tmp_path: Path):
    s = ScanSettings(glimpse=32, zoom_levels=3)
    meta = meta_for(s, max_zoom=1)
    props = meta.to_props()
    assert ModelMeta.from_props(props).max_zoom == 1
    assert "inspector.max_zoom" not in meta_for(s).to_props()  # as before: no new key
    assert ModelMeta.from_props(meta_for(s).to_props()).max_zoom is None
    for bad in (3, -1, True, "1"):
        broken = {**props, "inspector.max_zoom": json.dumps(bad)}
        with pytest.raises(ModelError, match="max_zoom"):
            ModelMeta.from_props(broken)
    assert read_calibrated(tmp_path, "abc") == {"ok_bias": 0.0, "max_zoom": None}
    OperatingPoint(0.5, "balanced", None, "abc", 10, "x", max_zoom=1).write(tmp_path)
    assert read_calibrated(tmp_path, "abc") == {"ok_bias": 0.5, "max_zoom": 1}
    assert read_calibrated(tmp_path, "def")["max_zoom"] is None  # another model's
    doc = json.loads((tmp_path / FILE).read_text())
    (tmp_path / FILE).write_text(json.dumps({**doc, "max_zoom": "deep"}))
    with pytest.raises(ModelError, match="max_zoom"):
        read_calibrated(tmp_path, "abc")
    ens = EnsemblePolicy([Hashy(meta_for(s)), Hashy(meta_for(s))], ok_bias=0.2, max_zoom=0)
    assert ens.meta.max_zoom == 0 and ens.meta.ok_bias == 0.2


def _entry(d: int, balanced: float, error: bool = False) -> dict:
    if error:
        return {"max_zoom": d, "mean_actions": 1.0, "error": "not met"}
    at = {"balanced_accuracy": balanced, "defect_recall": balanced, "false_alarm_rate": 0.1}
    return {"max_zoom": d, "mean_actions": 1.0, "ok_bias": 0.0, "at_bias": at}


def test_pooled_depth_averages_the_members_and_prefers_the_deeper():
    from inspector.train.calibration import pooled_depth

    a = [_entry(2, 0.70), _entry(1, 0.80), _entry(0, 0.90)]
    b = [_entry(2, 0.80), _entry(1, 0.78), _entry(0, 0.50)]
    depth, scores = pooled_depth([a, b], "balanced")
    assert depth == 1 and scores["1"][0] == pytest.approx(0.79)  # 0: 0.70, 2: 0.75
    same = [_entry(2, 0.8), _entry(1, 0.8)]
    assert pooled_depth([same, same], "balanced")[0] == 2
    # A depth one member could not calibrate at is out.
    c = [_entry(2, 0.7), _entry(1, 0.9, error=True)]
    assert pooled_depth([a, c], "balanced")[0] == 2
    # Members trained at level 1 tried 1 and 0: their deepest is level 1, not the full
    # search (which would send the ensemble and the student to native pixels).
    d1 = [[_entry(1, 0.84), _entry(0, 0.81)], [_entry(1, 0.85), _entry(0, 0.80)]]
    assert pooled_depth(d1, "balanced")[0] == 1


def test_training_rollouts_stop_rather_than_look_deeper():
    from inspector.env import InspectionEnv

    prof = str(Path(__file__).resolve().parents[2] / "reward_profiles" / "lcd_panel.yaml")
    env = InspectionEnv(prof, "synthetic", {"size": 128}, max_zoom=1)
    env.reset(seed=0)
    zin = ACTIONS.index("zoom_in")
    _, _, done, _, _ = env.step([zin, 0])
    assert not done and env.scanner.level == 1
    _, _, done, truncated, info = env.step([zin, 1])  # native: taken as stop, verdict 1
    assert done and not truncated and env.scanner.level == 1 and info["verdict"] == 1
    assert TrainConfig(rollout_max_zoom=1).rollout_max_zoom == 1
    with pytest.raises(ValueError, match="rollout_max_zoom"):
        TrainConfig(rollout_max_zoom=-1).validate()


@pytest.mark.parametrize("value", [1, 0, "auto", "full"])
def test_a_run_config_keeps_its_search_depth(tmp_path: Path, value):
    path = tmp_path / "config.yaml"
    path.write_text(f"search_depth: {value}\nrollout_max_zoom: 1\n")
    cfg = TrainConfig.load(path)
    assert cfg.search_depth == value and cfg.rollout_max_zoom == 1


def test_val_checks_judge_at_the_depth_the_model_will_run_at():
    from inspector.train.select import check_depth

    assert check_depth(TrainConfig()) is None  # full
    assert check_depth(TrainConfig(search_depth="auto")) is None  # chosen after training
    assert check_depth(TrainConfig(search_depth=1)) == 1  # train --members' student
    assert check_depth(TrainConfig(search_depth="auto", rollout_max_zoom=0)) == 0


def test_train_runs_where_it_will_run_and_checks_the_level_first(monkeypatch, tmp_path: Path):
    """train --search-depth: full trains every level, a level trains there, auto keeps
    the recipe's (footage: one above native); a level the profile lacks fails at once."""
    import inspector.train.runner as runner
    from inspector.cli import build_parser

    seen = {}

    def fake_train_run(profile, camera, params, timesteps, out, cfg, **kw):
        seen["cfg"] = cfg
        raise SystemExit(0)

    monkeypatch.setattr(runner, "train_run", fake_train_run)
    root = Path(__file__).resolve().parents[2]
    profile = str(root / "reward_profiles" / "magnetic_tile.yaml")
    base = ["train", "--profile", profile, "--camera", "folder",
            "--param", f"path={tmp_path}", "--out", str(tmp_path / "r")]  # fmt: skip
    for extra, rollout, depth in (
        ([], 1, "auto"),
        (["--search-depth", "auto"], 1, "auto"),
        (["--search-depth", "full"], None, "full"),
        (["--search-depth", "0"], 0, 0),
    ):
        args = build_parser().parse_args(base + extra)
        with pytest.raises(SystemExit):
            args.func(args)
        assert (seen["cfg"].rollout_max_zoom, seen["cfg"].search_depth) == (rollout, depth)
    args = build_parser().parse_args(base + ["--search-depth", "3"])
    with pytest.raises(InspectorError, match="zoom levels 0..2"):
        args.func(args)


def test_the_trained_depth_is_read_from_the_run(tmp_path):
    """calibrate --search-depth auto run by hand reads the depth training ran at from the
    run's config.yaml; anything it cannot read means every level (as before)."""
    from inspector.train.calibration import trained_depth
    from inspector.train.distill import write_ensemble

    def run(name: str, text: str | None) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "model.zip").write_bytes(b"zip")
        if text is not None:
            (d / "config.yaml").write_text(text)
        return d

    a = run("a", TrainConfig(rollout_max_zoom=1).to_yaml())
    b = run("b", TrainConfig(rollout_max_zoom=0).to_yaml())
    full = run("full", TrainConfig().to_yaml())
    assert trained_depth(a) == 1 and trained_depth(a / "model.zip") == 1
    assert trained_depth(full) is None and trained_depth(run("none", None)) is None
    for i, hostile in enumerate(
        [
            "rollout_max_zoom: -1\n",
            "rollout_max_zoom: true\n",
            "rollout_max_zoom: '1'\n",
            "[1, 2\n",
            "- just a list\n",
            "rollout_max_zoom: [1]\n",
        ]
    ):
        assert trained_depth(run(f"h{i}", hostile)) is None, hostile
    (run("binary", None) / "config.yaml").write_bytes(b"\xff\xfe\x00rollout")
    assert trained_depth(tmp_path / "binary") is None
    onnx = tmp_path / "a.onnx"
    onnx.write_bytes(b"onnx")
    assert trained_depth(onnx) is None
    # An ensemble: the deepest of its members'; a member trained over every level: None.
    assert trained_depth(write_ensemble(tmp_path / "ens", [a, b])) == 1
    assert trained_depth(write_ensemble(tmp_path / "ens2", [a, full])) is None
    shutil.rmtree(b)
    assert trained_depth(tmp_path / "ens") is None  # a member gone: not known


def test_members_trained_at_level_1_give_their_students_level_1_not_the_full_search(tmp_path):
    """The seed-12 run of the footage preset: its members, trained one level above native,
    tried levels 1 and 0 and did best at 1. That is their deepest, but not the profile's
    native level: the ensemble and the student must stop at 1 (they ran at native, AUROC
    0.73, when it was called "full")."""
    from inspector.train.members import members_depth

    prof = Path(__file__).resolve().parents[2] / "reward_profiles" / "magnetic_tile.yaml"

    def member(name: str, entries: list[dict]) -> Path:
        d = tmp_path / name
        d.mkdir()
        shutil.copy(prof, d / "profile.yaml")
        (d / "report.json").write_text(json.dumps({"operating_point": {"depths": entries}}))
        return d

    cfg = TrainConfig(search_depth="auto", rollout_max_zoom=1)
    d1 = [member(f"a{i}", [_entry(1, 0.85), _entry(0, 0.80)]) for i in range(2)]
    assert members_depth(d1, cfg)["search_depth"] == 1
    full = [member(f"b{i}", [_entry(2, 0.9), _entry(1, 0.8), _entry(0, 0.7)]) for i in range(2)]
    assert members_depth(full, TrainConfig(search_depth="auto"))["search_depth"] == "full"
    assert members_depth(full[:1] + d1[:1], cfg)["search_depth"] == 1  # 2 absent in one
