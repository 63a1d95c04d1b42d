"""Outcome terms on hand-built contexts: what each verdict is worth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector import EpisodeContext, Frame, StepContext, Truth
from inspector.profile import load_profile
from plugins.outcome import CorrectClass, FalseAlarm, MissedDefect, NoVerdict, WrongClass

CLASSES = ("ok", "line", "point")


def episode(label: str | None) -> EpisodeContext:
    img = np.zeros((64, 64), dtype=np.uint8)
    truth = Truth(label) if label is not None else None
    frame = Frame(image=img, part_id="p", timestamp=0.0, source="test", truth=truth)
    return EpisodeContext(frame, label, None, CLASSES, "ok", 12)


def step(ep: EpisodeContext, *, verdict=None, terminated=False, truncated=False, i=3):
    return StepContext(
        episode=ep,
        step=i,
        action="stop" if verdict else "left",
        rect=(0, 0, 64, 64),
        level=0,
        native=False,
        glimpse=np.zeros((32, 32), np.uint8),
        moved=True,
        revisit=False,
        verdict=verdict,
        terminated=terminated,
        truncated=truncated,
    )


def pay(term, label, verdict):
    ep = episode(label)
    term.reset(ep)
    return term(step(ep, verdict=verdict, terminated=True))


def test_correct_class_per_class_values_and_default():
    t = CorrectClass(reward={"line": 0.5, "point": 0.2, "ok": 0.1})
    assert pay(t, "line", "line") == 0.5
    assert pay(t, "point", "point") == 0.2
    assert pay(t, "ok", "ok") == 0.1
    assert pay(t, "line", "point") == 0.0
    t2 = CorrectClass(reward={"ok": 0.3, "default": 1.0})
    assert pay(t2, "point", "point") == 1.0
    assert pay(t2, "ok", "ok") == 0.3
    assert pay(CorrectClass(reward=2.0), "point", "point") == 2.0


def test_false_alarm_is_keyed_by_the_declared_class():
    t = FalseAlarm(reward={"line": -0.8, "point": -0.4})
    assert pay(t, "ok", "line") == -0.8
    assert pay(t, "ok", "point") == -0.4
    assert pay(t, "ok", "ok") == 0.0
    assert pay(t, "line", "point") == 0.0  # a wrong class, not a false alarm


def test_missed_defect_is_keyed_by_the_true_class():
    t = MissedDefect(reward={"line": -1.0, "point": -0.5})
    assert pay(t, "line", "ok") == -1.0
    assert pay(t, "point", "ok") == -0.5
    assert pay(t, "ok", "ok") == 0.0
    assert pay(t, "line", "line") == 0.0


def test_wrong_class_only_between_defect_classes():
    t = WrongClass(reward=-0.3)
    assert pay(t, "line", "point") == -0.3
    assert pay(t, "point", "line") == -0.3
    assert pay(t, "line", "ok") == 0.0
    assert pay(t, "ok", "line") == 0.0
    assert pay(t, "line", "line") == 0.0


def test_outcome_terms_pay_only_on_the_verdict_step():
    ep = episode("line")
    for t in (CorrectClass(1.0), FalseAlarm(-1.0), MissedDefect(-1.0), WrongClass(-1.0)):
        t.reset(ep)
        assert t(step(ep)) == 0.0
        assert t(step(ep, truncated=True)) == 0.0


def test_unlabelled_parts_pay_nothing():
    for t in (CorrectClass(1.0), FalseAlarm(-1.0), MissedDefect(-1.0), WrongClass(-1.0)):
        for verdict in CLASSES:
            assert pay(t, None, verdict) == 0.0


def test_no_verdict_pays_on_truncation_only():
    t = NoVerdict(reward=-1.0)
    ep = episode("line")
    t.reset(ep)
    assert t(step(ep)) == 0.0
    assert t(step(ep, verdict="line", terminated=True)) == 0.0
    assert t(step(ep, truncated=True)) == -1.0
    # Running out of budget is a fact about the episode, labelled or not.
    assert t(step(episode(None), truncated=True)) == -1.0
    assert t.verdict_value("line", "line", CLASSES, "ok") == 0.0


@given(st.sampled_from(CLASSES), st.sampled_from(CLASSES))
def test_each_verdict_falls_in_exactly_one_outcome(verdict, label):
    terms = [CorrectClass(1.0), FalseAlarm(1.0), MissedDefect(1.0), WrongClass(1.0)]
    paid = [t.verdict_value(verdict, label, CLASSES, "ok") for t in terms]
    assert sum(p != 0 for p in paid) == 1
    assert paid[0] == (1.0 if verdict == label else 0.0)


def test_lcd_outcome_matrix():
    profile = load_profile("reward_profiles/lcd_panel.yaml", warn=False)
    m = profile.outcome_matrix()
    idx = {c: i for i, c in enumerate(profile.classes)}
    # rows: declared class, columns: true class
    assert m[idx["line"], idx["line"]] == pytest.approx(0.5)
    assert m[idx["point"], idx["point"]] == pytest.approx(0.2)
    assert m[idx["ok"], idx["ok"]] == pytest.approx(0.2)
    assert m[idx["line"], idx["ok"]] == pytest.approx(-0.8)
    assert m[idx["point"], idx["ok"]] == pytest.approx(-0.8)
    assert m[idx["ok"], idx["line"]] < 0 and m[idx["ok"], idx["point"]] < 0
    assert m[idx["point"], idx["line"]] < 0 and m[idx["line"], idx["point"]] < 0
