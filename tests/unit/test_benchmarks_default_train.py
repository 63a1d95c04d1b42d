"""The default_train study: record a finished run's report and write its section."""

from __future__ import annotations

import json

from benchmarks.studies.default_train import cli


def _run(tmp_path, accuracy, point):
    run = tmp_path / f"run_{accuracy}_{point}"
    run.mkdir()
    report = {
        "episodes": 200, "accuracy": accuracy, "balanced_accuracy": accuracy,
        "per_class_recall": {"ok": 1.0, "line": 1.0, "point": point},
        "defect_recall": 0.9, "false_alarm_rate": 0.01, "mean_steps": 6.0, "ok_bias": 0.5,
        "recipe": {"name": "synthetic"},
        "kept": {"checkpoint": "best.zip", "steps": 0, "when": "before PPO", "why": "because",
                 "frames": {"count": 100, "source": "synthetic panels of another seed (1000)"}},
    }  # fmt: skip
    (run / "report.json").write_text(json.dumps(report))
    return run


def test_a_recorded_run_is_judged_against_the_goals_and_missed_ones_say_so(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "FOLDER", tmp_path / "results")
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"accuracy vs synthetic truth": "0.950"}))
    data = cli.record(_run(tmp_path, 0.95, 0.85), "demo_s0", "python main.py demo", 600.0,
                      summary)  # fmt: skip
    assert data["benchmark"]["config"]["label"] == "demo_s0"
    body = cli.report([data])
    assert "| met |" in body and "10.0" in body and "Station" in body and "0.950" in body
    miss = cli.record(_run(tmp_path, 0.93, 0.7), "x", "c")
    assert "MISSED: point recall < 0.8" in cli.report([miss])


def test_one_command_at_several_seeds_gets_a_mean_and_range_line(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "FOLDER", tmp_path / "results")
    cmd = "python main.py train --camera synthetic --seed {}"
    runs = [cli.record(_run(tmp_path, a, p), f"q_s{i}", cmd.format(i), 60.0 * (i + 1))
            for i, (a, p) in enumerate([(0.97, 0.9), (0.93, 0.7)])]  # fmt: skip
    body = cli.report([*runs, cli.record(_run(tmp_path, 0.9, 0.9), "demo_s0", "demo")])
    (line,) = [x for x in body.splitlines() if "over 2 seeds" in x]
    assert line.startswith("- `python main.py train --camera synthetic` over 2 seeds (q_s0, q_s1)")
    assert "accuracy mean 0.950 (range 0.930-0.970)" in line
    assert "CPU min mean 1.5 (range 1.0-2.0)" in line and "goal met in 1 of 2" in line
