"""``train --members 2`` on this machine: kill -9 mid-member, ``--resume``, ensemble and
student side by side, and ``export`` of either."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration._members import (
    DISTILL_STEPS,
    MEMBER_STEPS,
    PY,
    ROOT,
    attempts,
    env,
    latest_step,
    read_json,
    train_args,
    wait_for,
)


def _killed_when(out: Path, log: Path, ready, what: str, *extra: str) -> None:
    """Start ``train --members 2`` into ``out`` and kill -9 its whole process group
    (train and the member process) once ``ready()`` holds."""
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            train_args(out, "--parallel", "1", *extra),
            cwd=ROOT,
            env=env(),
            stdout=f,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(ready, 300, what, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def members_run(tmp_path_factory) -> tuple[Path, int, int]:
    """A --members 2 run killed (kill -9) after m0's first checkpoint, resumed and killed
    again after the student's first checkpoint, then finished with --resume.
    Returns (run, step m0 was killed at, step the student was killed at)."""
    out = tmp_path_factory.mktemp("members") / "run"
    m0, student = out / "members" / "m0", out / "student"
    _killed_when(out, out.parent / "1.log", lambda: latest_step(m0) > 0, "m0's checkpoint")
    m0_killed = latest_step(m0)
    assert not (m0 / "cost.json").exists(), "m0 finished before it was killed"
    _killed_when(
        out,
        out.parent / "2.log",
        lambda: latest_step(student) > 0,
        "the student's checkpoint",
        "--resume",
    )
    student_killed = latest_step(student)
    assert not (student / "cost.json").exists(), "the student finished before it was killed"
    done = subprocess.run(
        train_args(out, "--parallel", "1", "--resume"),
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out, m0_killed, student_killed


def test_a_killed_member_continues_from_its_checkpoint(members_run):
    out, killed_at, _ = members_run
    m0 = out / "members" / "m0"
    tries = attempts(m0)
    assert len(tries) == 2
    assert tries[0]["finished"] is False and tries[1]["finished"] is True
    assert tries[1]["resumed_from"] == killed_at > 0
    assert latest_step(m0) == MEMBER_STEPS
    # The killed attempt's CPU time counts (its heartbeat recorded it).
    assert read_json(m0 / "cost.json")["cpu_s"] >= tries[1]["cpu_s"]
    assert len(attempts(out / "members" / "m1")) == 1


def test_a_killed_distillation_continues_from_its_checkpoint(members_run):
    out, _, killed_at = members_run
    tries = attempts(out / "student")
    assert len(tries) == 2 and tries[1]["resumed_from"] == killed_at > 0
    assert latest_step(out / "student") == DISTILL_STEPS


def test_members_ensemble_and_student_side_by_side(members_run):
    out, _, _ = members_run
    for name in ("m0", "m1"):
        assert (out / "members" / name / "report.json").is_file()
    ens = read_json(out / "ensemble" / "ensemble.json")
    assert ens["members"] == ["../members/m0", "../members/m1"]
    ens_report = read_json(out / "ensemble" / "report.json")
    op = ens_report["operating_point"]  # chosen on val (synthetic panels of another seed)
    assert op["frames"]["count"] == 8 and ens_report["ok_bias"] == op["ok_bias"]
    assert "another seed" in op["frames"]["source"]
    student = out / "student"
    assert (student / "model.zip").is_file() and (student / "report.json").is_file()
    spec = read_json(student / "member.json")
    cfg = spec["config"]
    # The student (distill_init: scratch) starts from fresh weights at its own width;
    # its teacher is the ensemble led by the member with the best val figure (the
    # exported ensemble stays led by m0).
    from inspector.train.config import TrainConfig
    from inspector.train.members import lead_member

    assert spec["init_from"] is None and cfg["cnn_channels"] == 6
    members = sorted((out / "members").glob("m*"))
    first = lead_member(members, TrainConfig(select_metric=cfg["select_metric"]))
    teacher = out / ("ensemble" if first == "m0" else f"ensemble_{first}")
    assert cfg["teacher"] == str(teacher.resolve()) and cfg["w_kd"] == 1.0
    assert cfg["supervised_distill_steps"] == DISTILL_STEPS  # distill: supervised
    assert latest_step(student) == DISTILL_STEPS
    # its progress.json (what the parent's lines show) counts the distillation's steps
    prog = read_json(student / "progress.json")
    assert (prog["done"], prog["total"], prog["finished"]) == (DISTILL_STEPS, DISTILL_STEPS, True)
    # The ensemble's and the student's search depth: the members' pooled val evidence.
    depth = read_json(out / "members.json")["search_depth"]
    assert depth["why"] == "pooled over 2 members' val calibrations"
    assert cfg["search_depth"] == depth["search_depth"] in ("full", 0, 1)  # 2 is "full"
    assert set(depth["scores"]) <= {"0", "1", "2"} and "2" in depth["scores"]
    want = None if depth["search_depth"] == "full" else depth["search_depth"]
    assert op["max_zoom"] == want
    assert "Search depth of the ensemble" in (out / "report.md").read_text()
    rows = {r["name"]: r for r in read_json(out / "members.json")["rows"]}
    assert list(rows) == ["m0", "m1", "ensemble", "student"]
    members_min = rows["m0"]["cpu_min"] + rows["m1"]["cpu_min"]
    assert rows["student"]["cpu_min_to_deployable"] >= members_min
    table = (out / "report.md").read_text()
    for name in rows:
        assert f"| {name} |" in table


def test_export_takes_the_student_or_the_ensemble(members_run, tmp_path):
    import onnx

    out, _, _ = members_run
    for what, n_members in (("student", 0), ("ensemble", 2)):
        target = tmp_path / f"{what}.onnx"
        proc = subprocess.run(
            [
                PY,
                str(ROOT / "main.py"),
                "export",
                str(out / what),
                "--out",
                str(target),
                "--observations",
                "32",
            ],
            cwd=ROOT,
            env=env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        props = {p.key: p.value for p in onnx.load(str(target)).metadata_props}
        ensemble = props.get("inspector.ensemble")
        assert (len(json.loads(ensemble)) if ensemble else 0) == n_members


def test_eval_takes_the_ensemble(members_run):
    out, _, _ = members_run
    proc = subprocess.run(
        [
            PY,
            str(ROOT / "main.py"),
            "eval",
            str(out / "ensemble"),
            "--camera",
            "synthetic",
            "--episodes",
            "4",
        ],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["episodes"] == 4


def test_the_ensemble_is_checked_on_val_as_a_student_is(members_run, tmp_path):
    """The figure a student is compared with: the ensemble's own val check (the same
    frames, parts and figure as a student's select.json), computed once."""
    import shutil

    from inspector.train.config import TrainConfig
    from inspector.train.students import VAL_CHECK, ensemble_val_check

    out, _, _ = members_run
    run = tmp_path / "run"
    shutil.copytree(out / "members", run / "members")
    shutil.copytree(out / "ensemble", run / "ensemble")
    (run / "ensemble" / VAL_CHECK).unlink(missing_ok=True)
    cfg = TrainConfig(select_interval=64, select_episodes=4, select_metric="operating_point",
                      operating_point="balanced", search_depth="full")  # fmt: skip
    doc = ensemble_val_check(run / "ensemble", "synthetic", {}, cfg)
    assert 0.0 <= doc["figure"] <= 1.0 and doc["figures"]["parts"] == 4
    assert doc["figure"] == doc["figures"]["operating_point"]
    assert "another seed" in doc["frames"]["source"] and doc["cpu_s"] >= 0
    assert ensemble_val_check(run / "ensemble", "synthetic", {}, cfg) == doc  # kept
    other = ensemble_val_check(run / "ensemble", "synthetic", {}, cfg.replace(search_depth=1))
    assert other["search_depth"] == 1  # another depth: checked again
    assert json.loads((run / "ensemble" / VAL_CHECK).read_text()) == other
    fewer = ensemble_val_check(run / "ensemble", "synthetic", {}, cfg.replace(select_episodes=3))
    assert fewer["figures"]["parts"] == 3  # other parts per check: checked again


def test_the_same_directory_again_needs_resume(members_run):
    out, _, _ = members_run
    proc = subprocess.run(
        train_args(out, "--parallel", "1"),
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "--resume" in proc.stderr and "Traceback" not in proc.stderr


def test_the_ensemble_carries_its_operating_point_into_the_onnx(members_run, tmp_path):
    """train --members stores the ensemble's operating point for its member files; export
    of the ensemble directory writes it into the .onnx (a point for other files: none)."""
    import onnx

    from inspector.export.onnx import export_onnx
    from inspector.files import sha256_file
    from inspector.policy.ensemble import ensemble_sha256
    from inspector.policy.operating_point import FILE, OperatingPoint
    from inspector.train.distill import ensemble_members, ensemble_policy, write_ensemble

    out, _, _ = members_run
    members = ensemble_members(out / "ensemble")
    shas = [sha256_file(m / "model.zip") for m in members]
    stored = read_json(out / "ensemble" / FILE)
    assert stored["model_sha256"] == ensemble_sha256(shas)
    assert stored["ok_bias"] == read_json(out / "ensemble" / "report.json")["ok_bias"]
    assert ensemble_policy(out / "ensemble").meta.ok_bias == stored["ok_bias"]

    def bias_of(ens_dir, point_for):
        write_ensemble(ens_dir, members)
        OperatingPoint(1.25, "balanced", None, ensemble_sha256(point_for), 8, "test").write(ens_dir)
        target = tmp_path / f"{ens_dir.name}.onnx"
        export_onnx(members[0], target, members[1:], ensemble_dir=ens_dir)
        props = {p.key: p.value for p in onnx.load(str(target)).metadata_props}
        return float(json.loads(props.get("inspector.ok_bias", "0")))

    assert bias_of(out / "ens_calibrated", shas) == 1.25
    assert bias_of(out / "ens_other_files", shas[::-1]) == 0.0


def test_the_student_latency_benchmark_times_member_ensemble_and_student(members_run):
    """benchmarks.speed.student on a finished run: the three models exported and timed,
    the member the baseline; figures only, no timing asserted."""
    from benchmarks.speed import student

    out, _, _ = members_run
    m = student.measure(out, out.parent / "latency", n_obs=16, n_calls=20, max_s=5.0)
    models = m["models"]
    assert list(models) == ["member", "ensemble", "student"] and m["lead"] == "m0"
    assert all(x["p50_ms"] > 0 and x["calls"] == 20 for x in models.values())
    # the ensemble graph holds both members' weights; the tiny student is wider than them
    assert models["ensemble"]["parameters"] > models["member"]["parameters"]
    assert models["student"]["parameters"] > models["member"]["parameters"]
    body, _ok = student.report("tiny", m)
    assert "| member (m0, the lead) |" in body and "1.00x" in body
    assert "the `train --members` run `tiny`" in body
    # another student beside the run's own (a study's) is timed on the same observations
    import shutil

    shutil.copytree(out / "student", out / "student_b", ignore=shutil.ignore_patterns("ckpt*"))
    m2 = student.measure(out, out.parent / "latency2", n_obs=16, n_calls=20, max_s=5.0,
                         students=("student", "student_b"))  # fmt: skip
    assert list(m2["models"]) == ["member", "ensemble", "student", "student_b"]
    assert m2["models"]["student_b"]["parameters"] == models["student"]["parameters"]
    assert m2["models"]["student_b"]["steps_per_part"] is not None  # its own report.json
    assert "Student `student_b` per glimpse:" in student.report("tiny", m2)[0]
    with pytest.raises(SystemExit, match="not a finished student"):
        student.measure(out, out.parent / "latency3", 16, 20, 5.0, students=("nothing",))


def test_a_student_that_is_not_the_last_gives_up_and_the_last_never_does(members_run, tmp_path):
    """Student 1 of 2, far below the ensemble's val figure from half its steps on, stops
    at that check and ends with its best model; student 2, the last, runs every step."""
    import shutil

    from inspector.train.config import TrainConfig
    from inspector.train.member_run import run_member
    from inspector.train.members import student_spec
    from inspector.train.students import distil_students, give_up

    out, _, _ = members_run
    run = tmp_path / "run"
    shutil.copytree(out / "members", run / "members")
    shutil.copytree(out / "ensemble", run / "ensemble")
    cfg = TrainConfig.load(ROOT / "tests" / "data" / "members_tiny.yaml").replace(
        select_interval=32,
        select_episodes=4,
        select_metric="operating_point",
        student_shortfall=0.03,
        final_eval_episodes=0,
        student_give_up_patience=0,
    )  # fmt: skip (patience 0: below the line is enough, whatever the tiny curve does)
    target = 1.5  # no student reaches it: the first gives up, the second runs on
    profile = str(ROOT / "reward_profiles" / "lcd_panel.yaml")

    def make(j: int):
        spec = student_spec(profile, "synthetic", {}, DISTILL_STEPS, run, cfg, 2, attempt=j)
        spec.config.update(give_up(target, DISTILL_STEPS, j, cfg))
        return spec

    got = distil_students(make, run_member, {"figure": target}, cfg)
    half = DISTILL_STEPS // 2  # a check after every round of 32 steps: one lands on it
    first, second = got["attempts"]
    assert first["gave_up"] == half and "gave_up" not in second
    assert latest_step(run / "student") == half and latest_step(run / "student_2") == DISTILL_STEPS
    assert len(read_json(run / "student" / "distill.json")) == half // 32  # no round after it
    sel = read_json(run / "student" / "select.json")
    assert sel["gave_up"]["below"] == target - 0.06 and sel["gave_up"]["after"] == half
    assert "gave up at 192 steps" in sel["kept"]["why"]
    assert (run / "student" / "model.zip").is_file()
    assert (run / "student" / "cost.json").is_file()  # finished: a resume skips it
    assert "(gave up at 192 steps)" in got["why"]
