"""Footage without a defect-free class (issue #33 item 2): ``ok_class: none`` from the
profile through the model's metadata, the figures and the station's Result."""

from __future__ import annotations

import numpy as np
import pytest

from inspector.errors import InspectorError
from inspector.policy.agent import Decision
from inspector.policy.base import ModelMeta
from inspector.profile import load_profile_text
from inspector.station.result import Result
from inspector.train.evaluate import metrics

PROFILE = """\
name: steel
classes: [crazing, patches]
ok_class: none
step_budget: 4
scan: {glimpse: 16, overview: 16, zoom_levels: 2}
terms:
  - term: correct_class
    reward: 1.0
"""


def _d(verdict: str) -> Decision:
    return Decision(verdict=verdict, probabilities=np.array([0.5, 0.5]), steps=1, path=[])


def test_profile_says_no_class_is_ok():
    p = load_profile_text(PROFILE)
    assert p.ok_class is None and p.classification_only
    assert p.defect_classes == ("crazing", "patches")
    warned = load_profile_text(PROFILE + "  - term: false_alarm\n    reward: -1.0\n", warn=False)
    assert any("false_alarm never pays with 'ok_class: none'" in w for w in warned.warnings)


def test_figures_without_an_ok_class_are_accuracy_and_per_class_recall():
    labels = ["crazing", "crazing", "patches", "patches"]
    m = metrics(("crazing", "patches"), None, labels, [_d(v) for v in
                ("crazing", "patches", "patches", "patches")])  # fmt: skip
    assert m["accuracy"] == 0.75 and m["per_class_recall"] == {"crazing": 0.5, "patches": 1.0}
    assert m["defect_recall"] is None and m["false_alarm_rate"] is None
    assert m["defect_auroc"] is None and m["ok_class"] is None
    with_ok = metrics(("crazing", "patches"), "crazing", labels, [_d("patches")] * 4)
    assert with_ok["false_alarm_rate"] == 1.0  # the same call with an ok class still counts


def test_model_metadata_carries_it_and_the_result_is_a_defect():
    meta = ModelMeta(classes=("crazing", "patches"), actions=("stop",), scan={}, state_size=1,
                     outcome_matrix=np.eye(2), classification_only=True)  # fmt: skip
    back = ModelMeta.from_props(meta.to_props())
    assert back.classification_only and back.ok_class is None
    plain = ModelMeta.from_props({**meta.to_props(), "inspector.classification_only": "false"})
    assert plain.ok_class == "crazing"
    with pytest.raises(InspectorError, match="classification_only must be true or false"):
        ModelMeta.from_props({**meta.to_props(), "inspector.classification_only": '"yes"'})
    r = Result.decided(station="s", part_id="p", classes=["crazing", "patches"],
                       probabilities=[0.9, 0.1], label="crazing", glimpse_path=[], steps=1,
                       captured_at=1.0, classification_only=True)  # fmt: skip
    assert r.verdict == "defect" and r.label == "crazing"


def test_calibrate_refuses_a_model_without_an_ok_class():
    from inspector.train.calibration import choose_operating_point

    class Fake:
        meta = ModelMeta(classes=("a", "b"), actions=("stop",), scan={}, state_size=1,
                         outcome_matrix=np.eye(2), classification_only=True)  # fmt: skip

    with pytest.raises(InspectorError, match="has no ok class .*per-class recall"):
        choose_operating_point(Fake(), "store", {}, 10)  # type: ignore[arg-type]


def test_feedback_reads_no_ok_class_from_a_classification_only_result():
    from inspector.footage.feedback import _ok_class

    probs = {"crazing": 0.9, "patches": 0.1}
    assert _ok_class({"verdict": "defect", "label": "crazing", "probabilities": probs}) is None
    assert _ok_class({"verdict": "defect", "label": "line", "probabilities": {"ok": 0.1,
                      "line": 0.9}}) == "ok"  # fmt: skip


def test_retrain_gate_without_an_ok_class_holds_balanced_accuracy():
    from inspector.workflows.retrain import Gate

    base = {"ok_class": None, "balanced_accuracy": 0.80, "defect_recall": None}
    better = {**base, "balanced_accuracy": 0.85}
    worse = {**base, "balanced_accuracy": 0.78}
    assert Gate().check(base, better) == (True, ["no ok class: balanced accuracy 0.850 vs "
                                                 "base 0.800: ok"])  # fmt: skip
    passed, why = Gate().check(base, worse)
    assert not passed and "lower than the base's 0.800" in why[0]
    assert Gate(min_recall_delta=-0.05).check(base, worse)[0]
