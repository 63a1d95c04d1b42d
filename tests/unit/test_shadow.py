"""Shadow runner (never holds the live verdict beyond its budget) and the live/shadow comparison."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from inspector.errors import ModelError
from inspector.footage.shadow_compare import compare_shadow
from inspector.footage.store import FrameRecord
from inspector.scan import STOP, PathPoint
from inspector.station.shadow import ShadowRunner, ShadowSection

CLASSES = ("ok", "line", "point")


class FakeScanner:
    levels = 2
    stop = STOP  # a real Scanner's stop index comes from its action table

    def __init__(self) -> None:
        self.path: list[PathPoint] = []

    def reset(self, image):
        self.path = [PathPoint(x=0.5, y=0.5, zoom=0)]
        return {"image": image}

    def step(self, a):  # pragma: no cover - the fake policy stops at once
        raise AssertionError

    def pixel_fraction(self) -> float:
        return 0.0


class FakePolicy:
    """Stops at once; the class is the frame's first pixel; can be slowed or broken."""

    def __init__(self, delay: float = 0.0, gate: threading.Event | None = None) -> None:
        self.meta = SimpleNamespace(classes=CLASSES, max_zoom=None)  # searches every level
        self.delay, self.gate = delay, gate

    def act(self, obs):
        if self.gate is not None:
            self.gate.wait(5)
        time.sleep(self.delay)
        k = int(obs["image"][0, 0])
        if k >= len(CLASSES):
            raise ValueError("broken model")
        p = np.full(3, 0.1)
        p[k] = 0.8
        return STOP, p

    def verdict(self, probs) -> str:
        return CLASSES[int(np.argmax(probs))]


def runner(policy, budget_ms: float = 1000.0) -> ShadowRunner:
    return ShadowRunner(policy, FakeScanner(), 4, "s" * 64, budget_ms, ok_class="ok")


def frame(k: int) -> np.ndarray:
    return np.full((8, 8), k, dtype=np.uint8)


def test_shadow_decides_and_reports_its_path_and_latency():
    r = runner(FakePolicy())
    try:
        out = r.collect(r.submit(frame(1)))
    finally:
        r.close()
    assert out["label"] == "line" and out["verdict"] == "defect"
    assert out["confidence"] == pytest.approx(0.8)
    assert out["glimpse_path"] == [{"x": 0.5, "y": 0.5, "zoom": 0}]
    assert out["steps"] == 1 and out["latency_ms"] >= 0 and out["model_sha256"] == "s" * 64


def test_a_slow_shadow_is_late_not_waited_for_and_a_busy_one_is_skipped():
    gate = threading.Event()
    r = runner(FakePolicy(gate=gate), budget_ms=30)
    try:
        t0 = time.monotonic()
        first = r.submit(frame(0))
        late = r.collect(first)
        waited = time.monotonic() - t0
        # The worker still holds frame 0, and one more job fits the queue; the next is busy.
        r.submit(frame(0))
        busy = r.collect(r.submit(frame(0)))
        gate.set()
    finally:
        r.close()
    assert late["skipped"] == "late" and waited < 5  # the budget, not the shadow, decided
    assert busy["skipped"] == "busy"
    assert r.counts["late"] == 1 and r.counts["busy"] == 1


def test_a_failing_shadow_is_recorded_and_the_next_part_still_runs():
    r = runner(FakePolicy())
    try:
        bad = r.collect(r.submit(frame(7)))
        good = r.collect(r.submit(frame(2)))
    finally:
        r.close()
    assert bad["skipped"].startswith("failed: broken model")
    assert good["label"] == "point" and r.counts == {
        "decided": 1,
        "late": 0,
        "busy": 0,
        "failed": 1,
    }


def test_shadow_must_match_the_live_model():
    live = SimpleNamespace(classes=CLASSES, actions=("a",), scan={"glimpse": 32}, state_size=4)
    other = SimpleNamespace(classes=("ok", "line"), actions=("a",), scan={"glimpse": 32},
                            state_size=4)  # fmt: skip
    ShadowRunner.check_compatible(live, live, "same.onnx")
    with pytest.raises(ModelError, match="classes"):
        ShadowRunner.check_compatible(live, other, "cand.onnx")


def test_shadow_section_checks(tmp_path):
    ShadowSection().validate()  # off
    with pytest.raises(ValueError, match="not found"):
        ShadowSection(model=str(tmp_path / "none.onnx")).validate()
    (tmp_path / "m.onnx").write_bytes(b"x")
    with pytest.raises(ValueError, match="budget_ms"):
        ShadowSection(model=str(tmp_path / "m.onnx"), budget_ms=-1).validate()


def rec(i: int, live: str, shadow: str | dict | None, label: str | None, source: str | None):
    result = {"id": str(i), "label": live, "error": None}
    if isinstance(shadow, str):
        result["shadow"] = {"label": shadow, "model_sha256": "c" * 64}
    elif isinstance(shadow, dict):
        result["shadow"] = shadow
    return FrameRecord(frame_id=f"{i:04d}", width=8, height=8, image_path="x.png",
                       label=label, label_source=source, result=result)  # fmt: skip


def test_compare_counts_agreement_and_each_models_errors_on_truth_only():
    records = [
        rec(0, "ok", "ok", "ok", "operator:ann"),  # both right
        rec(1, "line", "ok", "line", "import"),  # shadow misses
        rec(2, "ok", "point", "ok", "operator:bob"),  # shadow false alarm
        rec(3, "point", "line", "point", "import"),  # both defect; shadow wrong class
        rec(4, "line", "line", "line", "station-verdict"),  # not truth: agreement only
        rec(5, "ok", {"skipped": "late", "model_sha256": "c" * 64}, None, None),
        rec(6, "ok", None, "ok", "import"),  # no shadow ran
    ]
    c = compare_shadow(records, "ok").to_dict()
    assert c["results"] == 7 and c["with_shadow"] == 5 and c["skipped"] == {"late": 1}
    assert c["label_agreement"] == pytest.approx(2 / 5)
    assert c["verdict_agreement"] == pytest.approx(3 / 5)
    assert c["live"] == {"parts": 4, "accuracy": 1.0, "defect_recall": 1.0,
                         "false_alarm_rate": 0.0, "defects": 2, "oks": 2}  # fmt: skip
    assert c["shadow"]["accuracy"] == pytest.approx(1 / 4)
    assert c["shadow"]["defect_recall"] == pytest.approx(1 / 2)
    assert c["shadow"]["false_alarm_rate"] == pytest.approx(1 / 2)


def gate_args(**kw):
    from argparse import Namespace

    base = {"min_parts": 4, "min_recall_delta": 0.0, "max_false_alarm_delta": 0.0}
    return Namespace(**{**base, **kw})


def test_the_promotion_gate_on_line_evidence():
    from inspector.commands.models import shadow_gate

    better = [rec(i, "ok", "line" if i % 2 else "ok", "line" if i % 2 else "ok", "import")
              for i in range(8)]  # fmt: skip
    # The live model missed every defect the shadow caught: the shadow may replace it.
    c = compare_shadow(better, "ok").to_dict()
    assert shadow_gate(c, gate_args())["passed"] is True
    worse = [rec(i, "ok", "point", "ok", "operator:ann") for i in range(6)]  # false alarms
    g = shadow_gate(compare_shadow(worse, "ok").to_dict(), gate_args())
    assert g["passed"] is False
    assert any("false-alarm rate" in r for r in g["reasons"])
    few = shadow_gate(compare_shadow(better[:3], "ok").to_dict(), gate_args())
    assert few["passed"] is False and "needs 4" in few["reasons"][0]
