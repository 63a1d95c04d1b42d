"""The jump arm of the search_controls study (issue #27, section 4) at a tiny size."""

from __future__ import annotations

import json

import numpy as np


def test_defect_stop_cuts_the_agent_at_its_first_confident_observation():
    from benchmarks.studies.search_controls.jump_report import defect_stop

    def part(p_ok_rows, stops):
        probs = np.array([[[p, 1 - p, 0.0] for p in row] for row in p_ok_rows])
        n, k = probs.shape[:2]
        return {
            "probs": probs,
            "glimpses": np.tile(np.arange(1, k + 1), (n, 1)),
            "pixel_fraction": np.zeros((n, k)),
            "stop": np.asarray(stops),
        }

    # val: two ok parts (defect scores 0.1 and 0.2 at most), one defective
    val = {"labels": np.array([0, 0, 1]), "agent": part([[0.9] * 4, [0.8] * 4, [0.1] * 4], [3] * 3)}
    test = {
        "labels": np.array([1, 0]),
        # the defect passes the threshold at its second observation; the agent stopped at 3
        "agent": part([[0.9, 0.3, 0.3, 0.3], [0.95, 0.9, 0.85, 0.9]], [3, 2]),
    }
    stop, pooled = defect_stop(val, test, fa=0.0)
    assert pooled.shape == (3, 3)
    assert list(stop["glimpses"]) == [2, 3]  # the ok part ends where the agent stopped
    assert list(stop["stopped_at"]) == [1, -1]


def test_jump_arm_trains_drives_and_reports_at_a_tiny_size(tmp_path, capsys):
    from benchmarks.studies.search_controls.jump import main, profile_for

    assert profile_for("jump").scan.actions == "tiles"
    doc = tmp_path / "b.md"
    args = ["--results", str(tmp_path), "--doc", str(doc), "--budget", "256", "--seeds", "1"]
    args += ["--perception", "32", "--bc-samples", "32", "--eval-parts", "4", "--parts", "6"]
    assert main(args) == 0
    out = tmp_path / "full" / "jump"
    rec = json.loads((out / "trained" / "jump_s0_256.json").read_text())
    assert rec["actions"] == "tiles" and rec["stack"] == "fresh"
    ev = json.loads((out / "evals" / "jump_s0_256.json").read_text())
    drivers = {r["driver"] for r in ev["rows"]}
    assert {"raster", "tiling stop", "agent", "agent stop"} <= drivers
    assert "walk" not in drivers  # no moves, no walk
    text = doc.read_text()
    assert "<!-- begin:search_controls_jump -->" in text and str(tmp_path) not in text
    assert (tmp_path / "search_controls_jump.png").stat().st_size > 0
    capsys.readouterr()
    assert main([*args, "--train-only"]) == 0  # saved: nothing trains again
    assert "training" not in capsys.readouterr().out


def test_the_exp_and_jump_arms_train_through_one_runner(tmp_path):
    """Both arms' train_one share training.train_run: the exp arm pretrains and keeps its
    stack, the jump arm starts from it and clones the tile teacher on top; each saves its
    model and an evaluation curve that starts after the supervised part."""
    from benchmarks.studies.search_controls import jump, training

    tiny = {"perception": 128, "bc_samples": 256, "eval_every": 512, "eval_parts": 4}
    exp = training.train_one("exp", 0, 1024, tmp_path, **tiny)
    jmp = jump.train_one("jump", 0, 1024, tmp_path, **tiny)
    assert exp["pretrained_reused"] is False and jmp["stack"] == "exp stack + tile cloning"
    for rec in (exp, jmp):
        assert rec["curve"][0]["steps"] == 128 + 256
        assert rec["perception_samples"] == 128 and rec["bc_samples"] == 256
    names = {p.name for p in tmp_path.iterdir()}
    assert {"exp_s0_1024.zip", "jump_s0_1024.zip", "pretrained_s0_128_256.pt"} <= names
    assert jmp["actions"] == "tiles"
