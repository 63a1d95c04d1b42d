"""The student of ``train --members``: checked against the ensemble on val, distilled
again while it falls short, the best on val kept, every attempt's CPU counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector.train.config import TrainConfig
from inspector.train.member_run import MemberSpec
from inspector.train.members import SUMMARY_FILE, student_spec, summarise, table_markdown
from inspector.train.students import (
    attempt_name,
    distil_students,
    falls_short,
    give_up,
    kept_student,
)

CFG = TrainConfig(select_metric="operating_point", operating_point="balanced")


class FakeDistillation:
    """``make_spec`` and ``train`` of :func:`distil_students`: attempt j's student gets
    the val figure ``figures[j]`` (its select.json) and a cost.json when trained."""

    def __init__(self, out: Path, figures: list[float | None]) -> None:
        self.out, self.figures, self.trained = out, figures, []

    def make(self, attempt: int) -> MemberSpec:
        name = attempt_name(attempt)
        return MemberSpec(name=name, profile="p.yaml", camera="synthetic", params={},
                          timesteps=8, out=str(self.out / name),
                          config={"seed": 100 + attempt})  # fmt: skip

    def train(self, spec_path: Path) -> None:
        folder = spec_path.parent
        self.trained.append(folder.name)
        j = 0 if folder.name == "student" else int(folder.name.split("_")[1]) - 1
        best = None if self.figures[j] is None else {"operating_point": self.figures[j]}
        (folder / "select.json").write_text(json.dumps({"checks": [], "best": best}))
        (folder / "cost.json").write_text(json.dumps({"cpu_s": 60.0 * (j + 1)}))


def test_a_student_within_the_shortfall_is_the_only_one(tmp_path):
    fake = FakeDistillation(tmp_path, [0.93, 0.99])
    got = distil_students(fake.make, fake.train, {"figure": 0.95}, CFG)
    assert fake.trained == ["student"]
    assert got["kept"] == "student" and len(got["attempts"]) == 1
    assert "within 0.03 of the ensemble" in got["why"]


def test_a_student_short_of_the_ensemble_is_distilled_again_and_the_better_kept(tmp_path):
    fake = FakeDistillation(tmp_path, [0.87, 0.95])
    got = distil_students(fake.make, fake.train, {"figure": 0.94}, CFG)
    assert fake.trained == ["student", "student_2"]
    assert got["kept"] == "student_2"
    assert [a["seed"] for a in got["attempts"]] == [100, 101]
    assert "kept student_2" in got["why"]


def test_when_every_student_falls_short_the_best_is_kept_and_the_report_says_so(tmp_path):
    cfg = CFG.replace(student_attempts=3)
    fake = FakeDistillation(tmp_path, [0.88, None, 0.86])
    got = distil_students(fake.make, fake.train, {"figure": 0.94}, cfg)
    assert fake.trained == ["student", "student_2", "student_3"]
    assert got["kept"] == "student"  # 0.88: the best; a student with no figure ranks last
    assert "every student falls short" in got["why"] and "ensemble may be the better" in got["why"]


def test_ties_keep_the_earlier_student_and_one_attempt_never_retries(tmp_path):
    fake = FakeDistillation(tmp_path, [0.80, 0.80])
    assert distil_students(fake.make, fake.train, {"figure": 0.94}, CFG)["kept"] == "student"
    fake = FakeDistillation(tmp_path / "one", [0.50])
    got = distil_students(fake.make, fake.train, {"figure": 0.94}, CFG.replace(student_attempts=1))
    assert fake.trained == ["student"] and "falls short" in got["why"]


def test_without_a_val_figure_of_the_ensemble_one_student_is_kept(tmp_path):
    fake = FakeDistillation(tmp_path, [0.10, 0.99])
    got = distil_students(fake.make, fake.train, {"figure": None, "why": "no val frames"}, CFG)
    assert fake.trained == ["student"] and got["kept"] == "student"
    assert "no val frames" in got["why"]


def test_a_student_never_checked_on_val_is_kept_without_comparing(tmp_path):
    fake = FakeDistillation(tmp_path, [0.10, 0.99])
    trained = fake.train

    def unchecked(spec_path: Path) -> None:
        trained(spec_path)
        (spec_path.parent / "select.json").unlink()  # select_interval 0: no checks

    got = distil_students(fake.make, unchecked, {"figure": 0.94}, CFG)
    assert fake.trained == ["student"] and got["kept"] == "student"
    assert "student was not checked on val" in got["why"]


def test_a_resumed_run_retrains_from_the_spec_already_written(tmp_path):
    fake = FakeDistillation(tmp_path, [0.80, 0.96])
    distil_students(fake.make, fake.train, {"figure": 0.94}, CFG)
    written = []
    again = FakeDistillation(tmp_path, [0.80, 0.96])
    again.train = lambda p: written.append(p)  # type: ignore[method-assign]
    distil_students(again.make, again.train, {"figure": 0.94}, CFG)
    assert written == [tmp_path / "student" / "member.json", tmp_path / "student_2" / "member.json"]


def test_falls_short_compares_with_the_shortfall():
    assert not falls_short(0.91, 0.94, CFG)  # 0.03 below: within
    assert falls_short(0.90, 0.94, CFG)
    assert falls_short(None, 0.94, CFG)
    assert not falls_short(None, None, CFG)
    assert not falls_short(0.90, 0.94, CFG.replace(student_shortfall=0.05))


def test_the_kept_student_has_the_student_row_and_every_attempt_counts_to_its_cost(tmp_path):
    for name, cpu in (("members/m0", 600.0), ("members/m1", 600.0), ("ensemble", 30.0)):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "cost.json").write_text(json.dumps({"cpu_s": cpu}))
    fake = FakeDistillation(tmp_path, [0.87, 0.95])
    check = {"figure": 0.94, "cpu_s": 6.0}
    chosen = distil_students(fake.make, fake.train, check, CFG)
    rows = {r["name"]: r for r in summarise(tmp_path, ["m0", "m1"], chosen, check)["rows"]}
    assert list(rows) == ["m0", "m1", "ensemble", "student (not kept)", "student"]
    assert rows["student"]["path"] == str(tmp_path / "student_2")
    # members 1,200 s + the ensemble's val check 6 s + both students (60 s + 120 s)
    assert rows["student"]["cpu_min_to_deployable"] == round(1386.0 / 60, 2)
    assert rows["student (not kept)"]["cpu_min_to_deployable"] == round(1266.0 / 60, 2)
    summary = {"asked": {}, "student": chosen, **summarise(tmp_path, ["m0", "m1"], chosen, check)}
    (tmp_path / SUMMARY_FILE).write_text(json.dumps(summary))
    assert "Student kept: student_2" in table_markdown(summary)
    assert kept_student(tmp_path) == tmp_path / "student_2"


def test_kept_student_defaults_to_student_and_ignores_a_path(tmp_path):
    assert kept_student(tmp_path) == tmp_path / "student"
    (tmp_path / SUMMARY_FILE).write_text(json.dumps({"student": {"kept": "../../etc"}}))
    assert kept_student(tmp_path) == tmp_path / "student"


def test_a_further_attempt_is_another_folder_and_seed(tmp_path):
    cfg = TrainConfig(seed=40)
    first = student_spec("p.yaml", "synthetic", {}, 8, tmp_path, cfg, 4)
    second = student_spec("p.yaml", "synthetic", {}, 8, tmp_path, cfg, 4, attempt=1)
    assert (Path(first.out).name, first.config["seed"]) == ("student", 44)
    assert (Path(second.out).name, second.config["seed"]) == ("student_2", 45)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_student_attempts_must_be_a_whole_number_of_at_least_one(bad):
    with pytest.raises(ValueError, match="student_attempts"):
        TrainConfig(student_attempts=bad).validate()


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.1", True])
def test_student_shortfall_must_be_a_fraction(bad):
    with pytest.raises(ValueError, match="student_shortfall"):
        TrainConfig(student_shortfall=bad).validate()


def test_every_attempt_but_the_last_gives_up_below_the_ensemble_by_the_margin():
    cfg = CFG.replace(student_attempts=3)
    assert give_up(0.963, 150_000, 0, cfg) == {
        "give_up_below": 0.903, "give_up_after": 75_000, "give_up_patience": 3
    }  # fmt: skip
    assert give_up(0.963, 150_001, 1, cfg)["give_up_after"] == 75_001  # from half, rounded up
    never = {"give_up_below": None, "give_up_after": 0, "give_up_patience": 0}
    assert give_up(0.963, 150_000, 2, cfg) == never  # the last attempt runs every step
    assert give_up(None, 150_000, 0, cfg) == never  # no ensemble figure: nothing to compare
    assert give_up(0.963, 150_000, 0, cfg.replace(student_give_up=0.0)) == never
    assert give_up(0.9, 100, 0, cfg.replace(student_give_up_margin=0.1))["give_up_below"] == 0.8


def test_an_attempt_that_gave_up_says_where_in_the_summary(tmp_path):
    fake = FakeDistillation(tmp_path, [0.85, 0.95])
    trained = fake.train

    def gives_up(spec_path: Path) -> None:
        trained(spec_path)
        if spec_path.parent.name == "student":
            doc = json.loads((spec_path.parent / "select.json").read_text())
            doc["gave_up"] = {"steps": 75_000, "best": 0.85, "below": 0.903, "after": 75_000}
            (spec_path.parent / "select.json").write_text(json.dumps(doc))

    got = distil_students(fake.make, gives_up, {"figure": 0.963}, CFG)
    assert got["attempts"][0]["gave_up"] == 75_000 and "gave_up" not in got["attempts"][1]
    assert "student 0.850 (gave up at 75,000 steps), student_2 0.950" in got["why"]
    assert got["kept"] == "student_2"


@pytest.mark.parametrize(
    "key, bad",
    [
        ("student_give_up", -0.1), ("student_give_up", 1.5), ("student_give_up", "half"),
        ("student_give_up_margin", True), ("student_give_up_margin", 2),
        ("student_give_up_patience", -1), ("student_give_up_patience", 2.5),
        ("give_up_patience", True), ("give_up_after", -5), ("give_up_after", 1e3),
        ("give_up_below", float("nan")), ("give_up_below", "0.9"), ("give_up_below", True),
    ],
)  # fmt: skip
def test_the_give_up_settings_refuse_what_cannot_work(key, bad):
    with pytest.raises(ValueError, match=key):
        TrainConfig(**{key: bad}).validate()


def test_a_config_file_with_a_bad_give_up_setting_is_refused_where_it_is(tmp_path):
    from inspector.errors import InspectorError

    f = tmp_path / "c.yaml"
    f.write_text("seed: 1\ngive_up_below: .nan\n")
    with pytest.raises(InspectorError, match=r"c\.yaml.*give_up_below"):
        TrainConfig.load(f)
    f.write_text("give_up_below: 0.9\ngive_up_after: 1000\ngive_up_patience: 2\n")
    cfg = TrainConfig.load(f)
    assert (cfg.give_up_below, cfg.give_up_after, cfg.give_up_patience) == (0.9, 1000, 2)
