"""benchmarks.studies.members_cost: records a finished train --members run, renders it."""

from __future__ import annotations

import json

import pytest

import benchmarks.studies.members_cost.cli as mc


def _run(tmp_path, status: str):
    run = tmp_path / "run"
    rows = []
    for name, cpu in (("m0", 60.0), ("m1", 90.0), ("ensemble", 3.0), ("student", 30.0)):
        d = run / (f"members/{name}" if name[0] == "m" and name[1:].isdigit() else name)
        d.mkdir(parents=True, exist_ok=True)
        (d / "cost.json").write_text(json.dumps({"cpu_s": cpu}))
        rows.append(
            {
                "name": name,
                "path": str(d),
                "balanced_accuracy": 0.5,
                "defect_recall": None,
                "cpu_min": 1.0,
                "cpu_min_to_deployable": 2.5,
            }
        )
    spec = {
        "profile": "/somewhere/magnetic_tile.yaml",
        "camera": "folder",
        "params": {"path": "/somewhere/footage", "split": "train"},
        "config": {"seed": 0, "perception_samples": 8000, "n_envs": 4},
    }
    (run / "members" / "m0" / "member.json").write_text(json.dumps(spec))
    asked = {"members": 2, "timesteps": 100, "distill_timesteps": 50, "seed": 0}
    (run / "members.json").write_text(json.dumps({"asked": asked, "status": status, "rows": rows}))
    return run


def test_an_unfinished_run_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "FOLDER", tmp_path / "results")
    with pytest.raises(SystemExit, match="not finished"):
        mc.record(_run(tmp_path, "student"), "x")


def test_a_run_is_saved_with_its_configuration_and_rendered_without_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "FOLDER", tmp_path / "results")
    data = mc.record(_run(tmp_path, "done"), "x", note="what it shows")
    cfg = data["benchmark"]["config"]
    assert cfg["train_config"] == {"perception_samples": 8000} and cfg["members"] == 2
    assert "--members 2 --distill-timesteps 50" in data["command"]
    text = mc.report([data])
    assert "| student | - | 0.500 | - |" in text and "what it shows" in text
    assert "/somewhere" not in text and "--param path=FOOTAGE" in text
    assert all("path" not in r for r in data["rows"])


def _saved(seed: int, student_recall: float, timesteps: int = 150000) -> dict:
    config = {"label": f"r_s{seed}", "members": 2, "timesteps": timesteps, "seed": seed}
    rows = [
        {"name": n, "balanced_accuracy": b, "defect_recall": r, "false_alarm_rate": f}
        | {"defect_auroc": 0.9, "pixel_fraction": 0.05, "cpu_min_to_deployable": c}
        for n, b, r, f, c in (
            ("m0", 0.6, 0.9, 0.2, 9.0),
            ("m1", 0.7, 0.8, 0.1, 10.0),
            ("ensemble", 0.92, 0.97, 0.04, 19.0),
            ("student", 0.8, student_recall, 0.3, 28.0),
        )
    ]
    return {"benchmark": {"config": config}, "status": "done", "rows": rows}


def test_seeds_of_one_recipe_are_pooled_and_each_goal_counted():
    from benchmarks.studies.members_cost.seeds import seeds_table

    other_recipe = _saved(5, 0.9, timesteps=100)  # alone in its recipe: no table
    first = _saved(0, 0.96)
    goal = {"defect_recall": 0.97, "false_alarm_rate": 0.04, "balanced_accuracy": 0.92}
    first["rows"][3]["at_fa05"] = goal  # the student at <= 5 % FA on val meets the goal
    text = seeds_table([first, _saved(1, 0.90), other_recipe])
    assert "Over seeds 0, 1 (r_s0, r_s1)" in text
    assert "share the seeds 1 (a member's seed" in text  # 2 members each: 0-1 and 1-2
    assert "Over seeds 5" not in text
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if "|" in line}
    assert "| 4 |" in lines["one default agent (each member)"]  # 2 members x 2 seeds
    assert "0.930 (0.900-0.960)" in lines["student"]  # mean (min-max) of recall
    assert "28.0 (28.0-28.0)" in lines["student"]
    assert lines["student"].rstrip().endswith("| 0.970 | 0.040 | 1 of 2 |")
    assert lines["ensemble"].rstrip().endswith("| - | - | 2 of 2 |")


def test_a_single_seed_gives_no_table_over_seeds():
    from benchmarks.studies.members_cost.seeds import seeds_table

    assert seeds_table([_saved(0, 0.96)]) == ""


def test_the_students_distillation_is_part_of_the_recipe(tmp_path):
    from benchmarks.studies.members_cost.seeds import seeds_table

    run = tmp_path / "run"
    (run / "student").mkdir(parents=True)
    assert mc.student_distillation(run) == {"distill": "ppo"}  # no spec: an old PPO student
    cfg = {"distill": "supervised", "distill_init": "best", "distill_rounds": 12, "seed": 1}
    (run / "student" / "member.json").write_text(json.dumps({"config": cfg}))
    way = {"distill": "supervised", "distill_init": "best", "distill_rounds": 12}
    assert mc.student_distillation(run) == way
    old, new = _saved(0, 0.96), _saved(1, 0.90)
    new["benchmark"]["config"]["distill"] = way
    assert seeds_table([old, new]) == ""  # a PPO and a supervised student: two recipes
    newer = _saved(2, 0.92)
    newer["benchmark"]["config"]["distill"] = way
    assert "Over seeds 1, 2 (r_s1, r_s2)" in seeds_table([old, new, newer])
    # Recorded since cnn_separable was a field: a plain CNN is the same recipe as before.
    plain = _saved(3, 0.93)
    plain["benchmark"]["config"]["distill"] = {**way, "cnn_separable": False}
    assert "Over seeds 1, 2, 3 (r_s1, r_s2, r_s3)" in seeds_table([old, new, newer, plain])
    plain["benchmark"]["config"]["distill"]["cnn_separable"] = True
    assert "Over seeds 1, 2 (r_s1, r_s2)" in seeds_table([old, new, newer, plain])
    # A student from scratch at another width: its width is part of the recipe.
    wide = {**cfg, "distill_init": "scratch", "student_cnn_channels": 16}
    (run / "student" / "member.json").write_text(json.dumps({"config": wide}))
    assert mc.student_distillation(run)["student_cnn_channels"] == 16
    assert "from scratch, width 16" in mc._way({"distill": mc.student_distillation(run)})


def test_a_student_not_kept_is_neither_the_student_nor_a_member(tmp_path, monkeypatch):
    """A run whose first student fell short of the ensemble on val: its kept student is
    the ``student`` row (its fa05 file found by folder), the other one is pooled nowhere."""
    from benchmarks.studies.members_cost.seeds import seeds_table

    monkeypatch.setattr(mc, "FOLDER", tmp_path / "results")
    run = _run(tmp_path, "done")
    summary = json.loads((run / "members.json").read_text())
    (run / "student_2").mkdir()
    (run / "student_2" / "cost.json").write_text(json.dumps({"cpu_s": 40.0}))
    rows = summary["rows"]
    rows[3]["name"] = "student (not kept)"
    rows.append({**rows[3], "name": "student", "path": str(run / "student_2")})
    summary["student"] = {"kept": "student_2", "metric": "operating_point", "shortfall": 0.03,
                          "why": "val operating_point: ensemble 0.940, student 0.868"}  # fmt: skip
    (run / "members.json").write_text(json.dumps(summary))
    fa05 = tmp_path / "fa05"
    fa05.mkdir()
    goal = {"defect_recall": 0.97, "false_alarm_rate": 0.04, "balanced_accuracy": 0.92}
    (fa05 / "student_2.fa05.test.json").write_text(json.dumps(goal))
    data = mc.record(run, "x", fa05=fa05)
    got = {r["name"]: r for r in data["rows"]}
    assert got["student"]["at_fa05"] == goal and "at_fa05" not in got["student (not kept)"]
    assert data["benchmark"]["config"]["student_check"]["shortfall"] == 0.03
    assert "Student kept: student_2 (val operating_point" in mc.report([data])
    again = mc.record(run, "y", fa05=fa05)
    again["benchmark"]["config"]["seed"] = 1
    lines = [line for line in seeds_table([data, again]).splitlines() if "|" in line]
    members = next(line for line in lines if line.startswith("| one default agent"))
    assert "| 4 |" in members  # m0, m1 of each run: the students are not members
    assert next(line for line in lines if line.startswith("| student |")).endswith("| 2 of 2 |")


def test_the_table_over_seeds_says_the_machines_speed_in_each_run():
    from benchmarks.studies.members_cost.seeds import ppo_rate, seeds_table

    fast, slow = _saved(0, 0.96), _saved(4, 0.96)
    for data, ppo_s in ((fast, (300.0, 330.0)), (slow, (450.0, 450.0))):
        data["costs"] = {  # 150,000 steps each; students and the ensemble do not count
            "m0": {"phases": {"ppo": ppo_s[0], "perception": 99.0}},
            "m1": {"phases": {"ppo": ppo_s[1]}},
            "student": {"phases": {"ppo": 1.0}},
        }
    assert ppo_rate(fast) == pytest.approx((500 + 150000 / 330) / 2)
    assert ppo_rate(_saved(8, 0.96)) is None  # recorded without phases
    text = seeds_table([fast, slow, _saved(8, 0.96)])
    assert "PPO steps per CPU-second" in text
    assert text.rstrip().endswith("seed 0 477, seed 4 333.")
    assert "CPU-second" not in seeds_table([_saved(0, 0.96), _saved(4, 0.96)])


def test_the_students_give_up_rule_and_every_attempts_val_checks_are_recorded(
    tmp_path, monkeypatch
):
    """The give-up settings come from the students' own spec (a resumed run's members may
    be older than its students); each attempt's val checks are kept, the one that gave up
    too."""
    monkeypatch.setattr(mc, "FOLDER", tmp_path / "results")
    run = _run(tmp_path, "done")
    summary = json.loads((run / "members.json").read_text())
    summary["student"] = {
        "kept": "student_2", "metric": "operating_point", "shortfall": 0.03, "why": "w",
        "attempts": [{"name": "student", "figure": 0.6, "gave_up": 75},
                     {"name": "student_2", "figure": 0.95}],
    }  # fmt: skip
    (run / "members.json").write_text(json.dumps(summary))
    (run / "student_2").mkdir()
    (run / "student_2" / "cost.json").write_text(json.dumps({"cpu_s": 40.0}))
    rule = {"student_give_up": 0.5, "student_give_up_margin": 0.06, "student_give_up_patience": 3}
    (run / "student" / "member.json").write_text(json.dumps({"config": {"seed": 2, **rule}}))
    for name, figures in (("student", [0.2, 0.6]), ("student_2", [0.3, 0.95])):
        checks = [{"steps": 50 * i, "operating_point": f} for i, f in enumerate(figures)]
        (run / name / "select.json").write_text(json.dumps({"checks": checks}))
    data = mc.record(run, "x")
    assert data["benchmark"]["config"]["student_check"] == {
        "metric": "operating_point", "shortfall": 0.03, "attempts": 2, **rule
    }  # fmt: skip
    got = data["val_checks"]
    assert [c["operating_point"] for c in got["student"]] == [0.2, 0.6]
    assert [c["operating_point"] for c in got["student_2"]] == [0.3, 0.95]
    assert "Val checks of student_2" in mc.report([data])
