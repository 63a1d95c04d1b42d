"""The search_controls study (issue #27): its pieces, and a smoke run at a tiny size.

The smoke run trains and drives real (tiny) models into a temporary folder; it never
writes docs/benchmarks.md (``--results`` elsewhere keeps the report beside the runs).
"""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_raster_starts_with_the_tiling_and_keeps_every_viewport_inside():
    from benchmarks.studies.search_controls.drivers import raster_positions, tile_count

    pos = raster_positions(128, 128, 64, 64)
    assert tile_count(128, 128, 64, 64) == 4
    assert pos[:4] == [(0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75)]
    assert len(pos) == 9 and len(set(pos)) == 9  # the half-stride lattice, no repeats
    assert (0.5, 0.5) in pos
    odd = raster_positions(100, 70, 32, 32)  # edge tiles clamped inside the frame
    assert tile_count(100, 70, 32, 32) == 12
    for cx, cy in odd:
        assert 16 / 100 - 1e-9 <= cx <= 1 - 16 / 100 + 1e-9
        assert 16 / 70 - 1e-9 <= cy <= 1 - 16 / 70 + 1e-9


def test_threshold_keeps_val_false_alarms_at_or_under_the_ceiling():
    from benchmarks.studies.search_controls.analysis import threshold_at

    rng = np.random.default_rng(0)
    for n in (1, 7, 20, 100):
        s = rng.random(n)
        for fa in (0.0, 0.05, 0.3):
            thr = threshold_at(s, fa)
            assert (s > thr).mean() <= fa + 1e-12
    ties = np.array([0.9, 0.9, 0.9, 0.1])
    assert (ties > threshold_at(ties, 0.5)).sum() == 0  # cannot split the tie: none above


def test_max_pooling_keeps_the_most_defective_glimpse_so_far():
    from benchmarks.studies.search_controls.drivers import max_pooled

    p = np.array([[0.9, 0.1, 0.0], [0.2, 0.0, 0.8], [0.6, 0.4, 0.0]])
    out = max_pooled(p)
    assert np.allclose(out[0], p[0]) and np.allclose(out[1], p[1]) and np.allclose(out[2], p[1])


def test_tiling_stop_flags_what_the_max_flags_and_stops_at_the_first_pass():
    from benchmarks.studies.search_controls.analysis import tiling_stop
    from benchmarks.studies.search_controls.drivers import max_pooled

    # Per part: overview then 2 tiles then one half-stride glimpse (not a tile).
    ok = [1.0, 0.0, 0.0]
    probs = np.array(
        [
            [[0.3, 0.7, 0.0], ok, ok, ok],  # the overview passes: stop at once
            [ok, [0.8, 0.0, 0.2], [0.1, 0.0, 0.9], ok],  # the second tile passes
            [ok, [0.7, 0.0, 0.3], [0.9, 0.0, 0.1], [0.0, 0.0, 1.0]],  # never in the tiles
        ]
    )
    part = {"probs": probs, "glimpses": np.tile([1, 2, 3, 4], (3, 1))}
    part["pixel_fraction"] = part["glimpses"] * 0.25
    out = tiling_stop(part, np.array([2, 2, 2]), threshold=0.5)
    assert out["stopped_at"].tolist() == [0, 2, -1]
    assert out["glimpses"].tolist() == [1, 3, 3]
    flagged = 1.0 - out["probs"][:, 0] > 0.5
    maxed = np.stack([max_pooled(p[:3])[-1] for p in probs])
    assert flagged.tolist() == (1.0 - maxed[:, 0] > 0.5).tolist() == [True, True, False]
    assert np.allclose(out["probs"][2], [0.9, 0.0, 0.1])  # its last tile, not the glimpse after


def test_outcome_values_move_false_alarms_down_as_they_cost_more():
    from benchmarks.studies.search_controls import levers, training

    prof = training.profile_for("exp")
    rng = np.random.default_rng(1)
    probs = rng.dirichlet([1, 1, 1], size=400)
    labels = rng.integers(0, 3, size=400)
    rows = levers.outcome_value_rows(prof, probs, labels)
    assert [r["false_alarm_cost"] for r in rows] == list(levers.FALSE_ALARM_COSTS)
    assert levers.monotone([r["false_alarms"] for r in rows], increasing=False)
    assert levers.monotone([r["recall"] for r in rows], increasing=False)
    as_trained = next(r for r in rows if r["false_alarm_cost"] == levers.AS_TRAINED)
    assert as_trained["reward"] == pytest.approx(as_trained["reward_as_trained_verdicts"])
    m = levers.outcome_matrix(prof, -1.6)
    assert m[1, 0] == pytest.approx(-1.6)  # declaring line on an ok part


def test_arms_differ_only_in_the_reward():
    from benchmarks.studies.search_controls import training

    profs = {arm: training.profile_for(arm) for arm in training.ARMS}
    assert {p.scan for p in profs.values()} == {profs["exp"].scan}
    assert {p.rrm.normalisation for p in profs.values()} == {profs["exp"].rrm.normalisation}
    assert profs["outcome"].rrm.redistribution.method == "none"
    assert all(t.channel == "outcome" for t in profs["outcome"].terms)
    assert profs["shaping"].rrm.shaping.potential == "focus_quality"
    costs = {t.term: t.reward for t in training.profile_for("exp", 0.3).terms}
    assert costs["step_cost"] == -0.3
    with pytest.raises(ValueError, match="unknown arm"):
        training.profile_for("nope")


def test_study_runs_end_to_end_at_a_tiny_size_and_resumes(tmp_path, capsys):
    from benchmarks.studies.search_controls.cli import main

    doc = tmp_path / "b.md"
    args = ["--results", str(tmp_path), "--doc", str(doc), "--budget", "256", "--perception", "32"]
    args += ["--bc-samples", "32", "--eval-parts", "4", "--parts", "6", "--seeds", "1"]
    args += ["--step-costs", "0.01,0.3", "--arms", "outcome,exp"]
    assert main(args) == 0
    out = tmp_path / "full"
    runs = sorted(p.name for p in (out / "trained").glob("*.json"))
    assert runs == ["exp_s0_256.json", "exp_sc0.3_s0_256.json", "outcome_s0_256.json"]
    assert (tmp_path / "models" / "full" / "pretrained_s0_32_32.pt").is_file()
    ev = json.loads((out / "evals" / "exp_s0_256.json").read_text())
    drivers = {r["driver"] for r in ev["rows"]}
    assert {"overview", "raster", "random", "walk", "tiling", "agent", "agent cap"} <= drivers
    assert "tiling stop" in drivers
    assert len(ev["outcome_values"]) == 5
    assert (
        ev["benchmark"]["config"]["kind"] == "eval"
        and ev["benchmark"]["study"] == "search_controls"
    )
    lone = json.loads((out / "evals" / "outcome_s0_256.json").read_text())
    assert {r["driver"] for r in lone["rows"]} == {"agent", "agent cap"}
    text = doc.read_text()
    assert "<!-- begin:search_controls -->" in text and text == text.replace(str(tmp_path), "")
    for heading in ("### 1. Controls", "### 2. The reward machinery", "### 3. The engineer"):
        assert heading in text
    assert not (out / "report.md").exists()  # the report went to --doc
    assert (tmp_path / "search_controls_quadrants.png").stat().st_size > 0
    capsys.readouterr()
    assert main([*args, "--train-only"]) == 0  # everything saved: nothing trains again
    assert "training" not in capsys.readouterr().out
    # --no-write writes nothing at all: no report or plot lands in the results tree.
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    assert main([*args, "--report-only", "--no-write"]) == 0
    assert "### 1. Controls" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_walk_uses_the_agents_actions_and_never_bumps_an_edge():
    from benchmarks.studies.search_controls import drivers, training
    from inspector.scan import Scanner

    class Blind:  # the walk never reads the policy's move head
        def act(self, obs):
            return 0, np.array([1.0, 0.0, 0.0])

    prof = training.profile_for("exp")
    frame = next(drivers.synthetic_frames({**training.CAMERA, "seed": 3}, 1))
    scanner = Scanner(prof.scan, prof.step_budget)
    r = drivers.walk_scan(Blind(), scanner, frame.image, prof.step_budget - 1)
    assert list(r["glimpses"]) == list(range(1, len(r["glimpses"]) + 1))  # every action moved
    corners = {(p.x, p.y) for p in scanner.path if p.zoom == 1}
    assert {(0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75)} <= corners
