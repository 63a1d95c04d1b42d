"""Best-on-val model selection: which val frames, which model is kept, and why."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from inspector.errors import InspectorError
from inspector.profile import load_profile
from inspector.train.config import TrainConfig
from inspector.train.ending import end_of_training
from inspector.train.select import (
    BEST,
    SYNTHETIC_VAL_SEED_OFFSET,
    BestOnVal,
    better_or_equal,
    metric_words,
    operating_score,
    val_params,
)

ROOT = Path(__file__).resolve().parents[3]
PROFILE = ROOT / "reward_profiles" / "lcd_panel.yaml"


def _manifest(tmp_path: Path, splits: tuple[str, ...]) -> Path:
    import cv2
    import numpy as np

    rows = ["image,mask,label,split"]
    for i, split in enumerate(splits):
        cv2.imwrite(str(tmp_path / f"f{i}.png"), np.full((64, 64), 100 + i, np.uint8))
        rows.append(f"f{i}.png,,ok,{split}")
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def test_val_frames_of_a_manifest_are_its_val_split(tmp_path):
    root = _manifest(tmp_path, ("train", "train", "val", "test"))
    params = {"path": str(root), "manifest": "m.csv", "split": "train"}
    val, why = val_params("folder", params, TrainConfig())
    assert val == {**params, "split": "val"} and "val split" in why


def test_no_val_frames_where_the_manifest_has_no_val_split_or_training_is_not_on_train(
    tmp_path,
):
    root = _manifest(tmp_path, ("train", "test"))
    params = {"path": str(root), "manifest": "m.csv", "split": "train"}
    assert val_params("folder", params, TrainConfig())[0] is None
    assert val_params("folder", {"path": str(root)}, TrainConfig())[0] is None


def test_synthetic_val_frames_are_another_panel_seed():
    val, _ = val_params("synthetic", {"size": 128, "seed": 3}, TrainConfig())
    assert val == {"size": 128, "seed": 3 + SYNTHETIC_VAL_SEED_OFFSET}


def test_explicit_val_params_win_and_may_never_name_test_or_heldout():
    cfg = TrainConfig(val_camera_params={"split": "val2"})
    assert val_params("folder", {"split": "train"}, cfg)[0] == {"split": "val2"}
    for bad in ("test", "heldout"):
        with pytest.raises(InspectorError, match="never on test"):
            val_params("folder", {}, TrainConfig(val_camera_params={"split": bad}))


def test_equal_scores_keep_the_later_model_and_the_metric_decides_first():
    a = {"balanced_accuracy": 0.8, "defect_auroc": 0.9}
    assert better_or_equal(dict(a), a, "balanced_accuracy")
    assert not better_or_equal({"balanced_accuracy": 0.7, "defect_auroc": 1.0}, a,
                               "balanced_accuracy")  # fmt: skip
    assert better_or_equal({"balanced_accuracy": 0.7, "defect_auroc": 1.0}, a, "defect_auroc")
    assert better_or_equal({"balanced_accuracy": 0.8, "defect_auroc": None}, a,
                           "defect_auroc") is False  # fmt: skip


class Scripted(BestOnVal):
    """BestOnVal whose val figures come from a list (the models are real and saved)."""

    def __init__(self, *args, scores, **kwargs):
        super().__init__(*args, **kwargs)
        self.scores = list(scores)

    def evaluate(self, model):
        s = self.scores.pop(0)
        return {"balanced_accuracy": s, "defect_auroc": s, "parts": 7}, None


@pytest.fixture
def model():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.env import InspectionEnv
    from inspector.train.runner import build_model

    cfg = TrainConfig(n_envs=1, n_steps=16, batch_size=16, n_epochs=1)
    env = DummyVecEnv([lambda: InspectionEnv(str(PROFILE), "synthetic", {"size": 128})])
    m = build_model(env, load_profile(str(PROFILE)), cfg, None, None)
    yield m
    env.close()


def _weights_of(path: Path) -> bytes:
    with zipfile.ZipFile(path) as z:
        return z.read("policy.pth")


def test_the_run_ends_with_the_best_checked_model_and_says_why(tmp_path, model):
    cfg = TrainConfig(select_interval=16)
    sel = Scripted(tmp_path, load_profile(str(PROFILE)), "synthetic", {"seed": 1000}, cfg,
                   "synthetic panels of another seed", scores=[0.5, 0.9, 0.6])  # fmt: skip
    sel.check(model, "before PPO (after pretraining)")
    model.num_timesteps = 16
    sel.check(model, "during PPO")
    best_bytes = _weights_of(tmp_path / BEST)
    for p in model.policy.parameters():  # the last model differs from the best one
        p.data.add_(1.0)
    model.num_timesteps = 32
    model.save(str(tmp_path / "model.zip"))
    kept = sel.finish(model)
    assert kept["checkpoint"] == BEST and kept["steps"] == 16 and kept["when"] == "during PPO"
    assert "0.900" in kept["why"] and "0.600" in kept["why"]
    assert kept["frames"] == {"camera": "synthetic", "params": {"seed": "1000"}, "split": None,
                              "count": 7, "source": "synthetic panels of another seed"}  # fmt: skip
    assert [c["steps"] for c in kept["checks"]] == [0, 16, 32]
    assert _weights_of(tmp_path / "model.zip") == best_bytes
    assert json.loads((tmp_path / "select.json").read_text())["kept"] == kept


def test_the_last_model_stays_when_it_is_as_good_as_the_best(tmp_path, model):
    sel = Scripted(tmp_path, load_profile(str(PROFILE)), "synthetic", {}, TrainConfig(),
                   scores=[0.7, 0.7])  # fmt: skip
    sel.check(model, "before PPO (after pretraining)")
    model.save(str(tmp_path / "model.zip"))
    before = _weights_of(tmp_path / "model.zip")
    kept = sel.finish(model)
    assert kept["checkpoint"] == "last" and "last model" in kept["why"]
    assert _weights_of(tmp_path / "model.zip") == before


def test_a_new_run_forgets_an_earlier_runs_checks_and_a_resumed_one_keeps_them(tmp_path, model):
    prof = load_profile(str(PROFILE))
    sel = Scripted(tmp_path, prof, "synthetic", {}, TrainConfig(), scores=[0.9])
    sel.check(model, "before PPO (after pretraining)")
    again = BestOnVal(tmp_path, prof, "synthetic", {}, TrainConfig(), fresh=False)
    assert len(again.state["checks"]) == 1
    BestOnVal(tmp_path, prof, "synthetic", {}, TrainConfig(), fresh=True)
    assert not (tmp_path / "select.json").exists() and not (tmp_path / BEST).exists()


def test_without_val_frames_the_report_says_the_last_model_was_kept_and_no_point_chosen(
    tmp_path, model
):
    doc = end_of_training(tmp_path, model, None, "folder", None, "the val split is empty",
                          TrainConfig(operating_point="balanced"))  # fmt: skip
    assert doc["kept"]["checkpoint"] == "last" and "val split is empty" in doc["kept"]["why"]
    assert doc["operating_point"]["ok_bias"] == 0.0
    assert "not chosen" in doc["operating_point"]["why"]


def test_magnetic_tile_val_frames_are_the_manifests_130_val_frames(magnetic_tile):
    from inspector.camera import open_camera

    params = {"path": str(magnetic_tile), "manifest": "splits.csv", "split": "train"}
    val, _ = val_params("folder", params, TrainConfig())
    cam = open_camera("folder", val)
    try:
        assert len(cam) == 130 and {r.split for r in cam.records} == {"val"}
    finally:
        cam.close()


def _two_models(n_classes: int):
    """Val probabilities of a lead (centred, ranks 3/4 of the defects right) and a student
    (ranks every part right, all shifted towards defect): 4 ok parts, 4 defective."""
    import numpy as np

    def rows(p_defect):
        out = np.zeros((len(p_defect), n_classes))
        out[:, 0] = 1.0 - np.asarray(p_defect)
        out[:, 1] = p_defect
        return out

    y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    lead = rows([0.3, 0.3, 0.3, 0.3, 0.7, 0.7, 0.7, 0.2])
    student = rows([0.6, 0.6, 0.6, 0.6, 0.9, 0.9, 0.9, 0.9])
    return y, lead, student


def test_the_operating_point_figure_keeps_a_student_that_bias_0_would_discard():
    """The distilled student's verdicts all lean to defect at ok bias 0, so balanced
    accuracy there discards it for the lead; at the bias the run will choose it wins."""
    from inspector.policy.operating_point import rates_at

    prof = load_profile(str(PROFILE))
    om = prof.outcome_matrix()
    y, lead, student = _two_models(len(prof.classes))
    at0 = {name: rates_at(p, y, om, 0.0)["balanced_accuracy"]
           for name, p in (("lead", lead), ("student", student))}  # fmt: skip
    assert at0["lead"] > at0["student"]
    cfg = TrainConfig(select_metric="operating_point", operating_point="balanced")
    s_lead, _ = operating_score(lead, y, om, cfg)
    s_student, bias = operating_score(student, y, om, cfg)
    assert s_student == 1.0 > s_lead and bias > 0
    entry = {"operating_point": s_student, "balanced_accuracy": at0["student"]}
    best = {"operating_point": s_lead, "balanced_accuracy": at0["lead"]}
    assert better_or_equal(entry, best, "operating_point")
    assert not better_or_equal(entry, best, "balanced_accuracy")
    # --max-false-alarms: recall at the bias chosen for at most that many false alarms.
    fa = cfg.replace(operating_point="max_false_alarms", operating_target=0.0,
                     operating_confidence=None)  # fmt: skip
    assert operating_score(student, y, om, fa)[0] == 1.0
    assert operating_score(lead, y, om, fa)[0] == 0.75
    assert "false alarms <= 0" in metric_words(fa)
    # With a confidence, 0 false alarms in these 4 good parts cannot bound the rate at 0:
    # no bias meets it, so the model has no figure (it is never kept for one).
    held = fa.replace(operating_target=0.5, operating_confidence=0.9)
    assert "false alarms <= 0.5 at 0.9 confidence" in metric_words(held)
    assert operating_score(student, y, om, fa.replace(operating_confidence=0.9)) == (None, None)
    assert "confidence" not in metric_words(cfg)  # balanced: nothing held
    assert "AUROC" in metric_words(cfg.replace(select_metric="defect_auroc"))
    for objective in ("balanced", "none"):  # no target to print
        assert "ties: defect AUROC" in metric_words(cfg.replace(operating_point=objective))


def test_the_report_says_which_figure_and_which_frames_decided(tmp_path, model):
    class ByOperatingPoint(BestOnVal):
        def __init__(self, *args, scores, **kwargs):
            super().__init__(*args, **kwargs)
            self.scores = list(scores)

        def evaluate(self, model):
            op, bal = self.scores.pop(0)
            return {"operating_point": op, "ok_bias": 1.5, "balanced_accuracy": bal,
                    "defect_auroc": op, "parts": 5}, None  # fmt: skip

    cfg = TrainConfig(select_interval=16, select_metric="operating_point",
                      operating_point="max_false_alarms", operating_target=0.05)  # fmt: skip
    sel = ByOperatingPoint(tmp_path, load_profile(str(PROFILE)), "folder", {"split": "val"},
                           cfg, "the val split", scores=[(0.6, 0.8), (0.9, 0.5)])  # fmt: skip
    sel.check(model, "before PPO (after pretraining)")
    model.num_timesteps = 16
    model.save(str(tmp_path / "model.zip"))
    kept = sel.finish(model)
    assert kept["checkpoint"] == "last" and kept["metric"] == "operating_point"
    assert kept["decided_by"] == ("val defect recall at the ok bias chosen there for false"
                                  " alarms <= 0.05 at 0.8 confidence"
                                  " (ties: defect AUROC)")  # fmt: skip
    assert kept["val"]["operating_point"] == 0.9 and kept["val"]["ok_bias"] == 1.5
    assert kept["frames"]["split"] == "val" and kept["frames"]["count"] == 5
    assert [c["operating_point"] for c in kept["checks"]] == [0.6, 0.9]


def test_the_data_presets_select_at_the_operating_point():
    from inspector.train.presets import resolve

    for name in ("footage", "synthetic"):
        assert resolve(name, "folder")[1].select_metric == "operating_point"


def test_closing_evaluation_frames_are_the_manifests_test_split_never_train_or_val(tmp_path):
    from inspector.train.select import eval_params

    root = _manifest(tmp_path, ("train", "train", "val", "test"))
    params = {"path": str(root), "manifest": "m.csv", "split": "train"}
    ev, why = eval_params("folder", params, TrainConfig())
    assert ev == {**params, "split": "test"} and why == "the test split of the training source"
    # Explicit frames win (the report names their role); synthetic keeps its block.
    cfg = TrainConfig(eval_camera_params={"split": "val"})
    assert eval_params("folder", params, cfg)[0] == {**params, "split": "val"}
    assert eval_params("synthetic", {"seed": 3}, TrainConfig())[0] == {"seed": 3}


def test_a_footage_stores_closing_evaluation_is_on_its_heldout_split(tmp_path):
    import numpy as np

    from inspector.footage.store import FootageStore
    from inspector.train.select import eval_params
    from tests.unit.footage._helpers import ensure_store_driver

    ensure_store_driver()
    rng = np.random.default_rng(2)
    with FootageStore(tmp_path / "s", create=True) as s:
        for _ in range(60):
            s.add(rng.integers(0, 256, (6, 8), dtype=np.uint8), label="x")
        assert s.records(split="heldout")
    params = {"path": str(tmp_path / "s"), "split": "train"}
    assert eval_params("store", params, TrainConfig())[0] == {**params, "split": "heldout"}


def test_without_held_out_frames_train_evaluates_nothing_and_says_so(tmp_path, capsys):
    from inspector.commands.train import print_report
    from inspector.train.runner import closing_evaluation
    from inspector.train.select import eval_params

    root = _manifest(tmp_path, ("train", "train", "val"))  # no test split
    params = {"path": str(root), "manifest": "m.csv", "split": "train"}
    ev, why = eval_params("folder", params, TrainConfig())
    assert ev is None and "no held-out frames" in why and "no test split" in why
    ev, why = eval_params("folder", {"path": str(root)}, TrainConfig())  # unsplit
    assert ev is None and "not on split=train" in why
    extra = {"kept": {"why": "the last model"}}
    report = closing_evaluation(tmp_path, "folder", {"path": str(root)}, TrainConfig(), extra)
    assert report["kept"] == extra["kept"] and report["eval_frames"] is None
    assert report["evaluation"]["ran"] is False and "accuracy" not in report
    print_report(report)
    out = capsys.readouterr().out
    assert "eval: none (no held-out frames" in out and "inspector eval RUN" in out


def test_operating_confidence_defaults_to_0_8_and_holds_only_a_ceiling_or_floor():
    import pytest

    from inspector.train.calibration import goal_of, held_confidence

    assert TrainConfig().operating_confidence == 0.8
    fa = TrainConfig(operating_point="max_false_alarms", operating_target=0.05)
    assert held_confidence(fa) == 0.8 and goal_of(fa)[-1] == 0.8
    # balanced has no target to hold: no confidence reaches choose_bias.
    assert held_confidence(TrainConfig(operating_point="balanced")) is None
    assert held_confidence(fa.replace(operating_confidence=None)) is None  # the rate seen
    for bad in (0.0, 1.0, 1.5, True, "high"):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            TrainConfig(operating_point="min_recall", operating_target=0.9,
                        operating_confidence=bad).validate()  # fmt: skip


def test_a_run_gives_up_where_its_best_so_far_stays_below_the_line(tmp_path, model):
    """give_up_below: from give_up_after steps on, the first check whose best so far is
    below the line stops the run (PPO's callback says stop); the report says where."""
    cfg = TrainConfig(select_interval=16, give_up_below=0.8, give_up_after=32)
    prof = load_profile(str(PROFILE))
    sel = Scripted(tmp_path, prof, "synthetic", {}, cfg, scores=[0.7, 0.75, 0.6, 0.9])
    callback = sel.callback()
    for steps in (0, 16):  # below the line but before give_up_after: goes on
        model.num_timesteps = steps
        sel.check(model, "during PPO")
    assert sel.gave_up is None and callback._on_step() is True
    model.num_timesteps = 32
    sel.check(model, "during PPO")
    assert sel.gave_up == {"steps": 32, "best": 0.75, "below": 0.8, "after": 32, "patience": 0}
    assert callback._on_step() is False
    model.save(str(tmp_path / "model.zip"))
    kept = sel.finish(model)  # the last check (0.9) does not undo it: the run stopped
    assert kept["gave_up"]["steps"] == 32 and "gave up at 32 steps" in kept["why"]
    assert "0.750" in kept["why"] and "below 0.800" in kept["why"]
    again = BestOnVal(tmp_path, prof, "synthetic", {}, cfg, fresh=False)
    assert again.gave_up["steps"] == 32  # a resumed run does not train on


def test_a_run_at_or_above_the_line_or_still_rising_goes_on():
    from inspector.train.give_up import gives_up

    def checks(*figures):
        return [{"steps": 10 * i, "operating_point": f} for i, f in enumerate(figures)]

    cfg = TrainConfig(select_metric="operating_point", give_up_below=0.9, give_up_after=20)
    assert gives_up(cfg, checks(0.5, 0.95, 0.5)) is None  # its best is above the line
    assert gives_up(cfg, checks(0.5, 0.6)) is None  # too early (10 < 20 steps)
    assert gives_up(cfg, checks(0.5, 0.6, None))["best"] == 0.6
    assert gives_up(cfg, checks(None, None, None))["best"] is None  # no figure: short
    assert gives_up(cfg, []) is None
    assert gives_up(TrainConfig(), checks(0.0, 0.0, 0.0)) is None  # never (no line)
    # patience: only where the best also rose less than 0.01 over the last n checks
    slow = cfg.replace(give_up_patience=3)
    assert gives_up(slow, checks(0.2, 0.3, 0.4)) is None  # too few checks to tell
    assert gives_up(slow, checks(0.2, 0.3, 0.4, 0.5, 0.6)) is None  # rising: goes on
    flat = gives_up(slow, checks(0.5, 0.84, 0.843, 0.85, 0.845, 0.848))
    assert flat == {"steps": 50, "best": 0.85, "below": 0.9, "after": 20, "patience": 3}
    assert gives_up(slow, checks(0.5, 0.84, 0.843, 0.85, 0.845)) is None  # 0.84 -> 0.85: +0.01
    assert gives_up(slow, checks(None, None, None, None))["best"] is None


def test_the_seed_72_student_that_was_rising_goes_on_the_seed_68_one_gives_up():
    """The curves the rule was made on (magnetic tiles, separable student, 150,000 steps
    in rounds of 12,500, half: 75,000): seed 72's, 0.29 short at half its steps but
    still rising, runs on; a flat one like seed 68's first stops."""
    from inspector.train.give_up import gives_up
    from inspector.train.students import give_up

    cfg = TrainConfig(select_metric="operating_point")
    rising = [0.167, 0.26, 0.364, 0.418, 0.543, 0.584, 0.614]  # seed 72, checks 0-75,000
    run = cfg.replace(**give_up(0.9556, 150_000, 0, cfg))
    checks = [{"steps": 12_500 * i, "operating_point": f} for i, f in enumerate(rising)]
    assert gives_up(run, checks) is None
    flat = [0.3, 0.5, 0.7, 0.8, 0.83, 0.84, 0.842, 0.843, 0.85, 0.845, 0.848]  # like seed 68's
    checks = [{"steps": 12_500 * i, "operating_point": f} for i, f in enumerate(flat)]
    run = cfg.replace(**give_up(0.963, 150_000, 0, cfg))
    assert gives_up(run, checks[:9]) is None  # 100,000: +0.01 over three checks
    assert gives_up(run, checks[:10])["steps"] == 112_500  # +0.008: flat, 0.113 short
