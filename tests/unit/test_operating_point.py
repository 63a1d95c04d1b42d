"""The operating point: the ok bias, the AUROC, the calibration search and its storage."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.errors import InspectorError, ModelError
from inspector.policy.base import ModelMeta, decide_verdict
from inspector.policy.operating_point import (
    FILE,
    GRID,
    OperatingPoint,
    choose_bias,
    defect_auroc,
    holds,
    parts_needed,
    rates,
    read_ok_bias,
    shift_ok,
    upper_bound,
    verdicts_at,
)

# ok, line, point: declaring the truth pays 1, anything else 0.
R3 = np.eye(3)


def _probs(n: int, seed: int) -> np.ndarray:
    p = np.random.default_rng(seed).dirichlet(np.ones(3), size=n)
    return p


@given(st.integers(0, 10_000), st.floats(-8, 8))
@settings(max_examples=50, deadline=None)
def test_shift_ok_keeps_rows_normalised_and_moves_only_the_ok_odds(seed: int, b: float) -> None:
    p = _probs(20, seed)
    q = shift_ok(p, b)
    assert np.allclose(q.sum(axis=1), 1.0)
    # The odds between the defect classes do not change; the ok odds move by e^b.
    assert np.allclose(q[:, 1] / q[:, 2], p[:, 1] / p[:, 2])
    odds_p = p[:, 0] / (1 - p[:, 0])
    odds_q = q[:, 0] / (1 - q[:, 0])
    assert np.allclose(odds_q, odds_p * np.exp(b))


def test_shift_ok_zero_is_identity_and_zero_stays_zero() -> None:
    p = np.array([0.0, 0.3, 0.7])
    assert np.array_equal(shift_ok(p, 0.0), p)
    assert shift_ok(p, 5.0)[0] == 0.0


def test_decide_verdict_follows_the_bias() -> None:
    p = np.array([0.4, 0.35, 0.25])
    assert decide_verdict(p, R3) == 0
    assert decide_verdict(p, R3, ok_bias=-1.0) == 1
    assert decide_verdict(p, R3, ok_bias=2.0) == 0


@given(st.lists(st.floats(0, 1), min_size=2, max_size=40), st.integers(0, 1000))
@settings(max_examples=60, deadline=None)
def test_auroc_matches_counting_pairs(s: list[float], seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.random(len(s)) < 0.5
    probs = np.stack([1 - np.asarray(s), np.asarray(s), np.zeros(len(s))], axis=1)
    got = defect_auroc(probs, y)
    score = 1 - probs[:, 0]
    pos, neg = score[y], score[~y]
    if not len(pos) or not len(neg):
        assert got is None
        return
    want = np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])
    assert got == pytest.approx(want)


def test_auroc_ends() -> None:
    p = np.array([[0.9, 0.1, 0], [0.8, 0.2, 0], [0.1, 0.9, 0], [0.2, 0, 0.8]])
    assert defect_auroc(p, [False, False, True, True]) == 1.0
    assert defect_auroc(p, [True, True, False, False]) == 0.0


def _parts() -> tuple[np.ndarray, np.ndarray]:
    """Ten good parts with p(ok) 0.50..0.95 and ten defective ones with 0.05..0.50."""
    ok = np.linspace(0.5, 0.95, 10)
    bad = np.linspace(0.05, 0.5, 10)
    p_ok = np.concatenate([ok, bad])
    probs = np.stack([p_ok, (1 - p_ok) * 0.7, (1 - p_ok) * 0.3], axis=1)
    y = np.array([0] * 10 + [1] * 10)
    return probs, y


def test_constrained_objectives_meet_their_targets_on_the_parts() -> None:
    probs, y = _parts()
    every = rates(verdicts_at(probs, R3, GRID), y, 3)
    b, r = choose_bias(probs, y, R3, "max_false_alarms", 0.0)
    assert r["false_alarm_rate"] == 0.0
    # No bias without false alarms finds more defects.
    assert r["defect_recall"] == every["defect_recall"][every["false_alarm_rate"] == 0].max()
    assert 0.0 < r["defect_recall"] < 1.0
    b2, r2 = choose_bias(probs, y, R3, "min_recall", 1.0)
    assert r2["defect_recall"] == 1.0
    assert r2["false_alarm_rate"] == every["false_alarm_rate"][every["defect_recall"] == 1].min()
    assert b2 < b


def test_balanced_objective_prefers_the_bias_nearest_zero_among_equals() -> None:
    probs, y = _parts()
    b, r = choose_bias(probs, y, R3)
    full = rates(verdicts_at(probs, R3, np.array([b])), y, 3)
    assert r["balanced_accuracy"] == pytest.approx(full["balanced_accuracy"][0])
    # Perfectly separable parts at zero: no reason to move.
    sep = np.array([[0.9, 0.05, 0.05], [0.1, 0.8, 0.1]])
    assert choose_bias(sep, np.array([0, 1]), R3)[0] == 0.0


def test_bad_calibration_requests_are_clear_errors() -> None:
    probs, y = _parts()
    with pytest.raises(InspectorError, match="unknown objective"):
        choose_bias(probs, y, R3, "precision")
    with pytest.raises(InspectorError, match="needs a target"):
        choose_bias(probs, y, R3, "min_recall")
    with pytest.raises(InspectorError, match="no good parts"):
        choose_bias(probs[10:], y[10:], R3, "max_false_alarms", 0.05)
    with pytest.raises(InspectorError, match="one probability row"):
        choose_bias(probs, y[:3], R3)
    # A part the model is certain is ok can never be called defective.
    certain = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0]])
    with pytest.raises(InspectorError, match="reaches defect recall"):
        choose_bias(certain, np.array([1, 0]), R3, "min_recall", 1.0)


def test_meta_props_carry_the_bias_and_old_models_read_as_zero() -> None:
    meta = ModelMeta(("ok", "a"), ("stop",), {}, 3, np.eye(2), ok_bias=1.25)
    props = meta.to_props()
    assert json.loads(props["inspector.ok_bias"]) == 1.25
    assert ModelMeta.from_props(props).ok_bias == 1.25
    plain = ModelMeta(("ok", "a"), ("stop",), {}, 3, np.eye(2))
    assert "inspector.ok_bias" not in plain.to_props()
    assert ModelMeta.from_props(plain.to_props()).ok_bias == 0.0


def _point(tmp_path: Path, sha: str = "abc", bias: float = 0.7) -> Path:
    OperatingPoint(bias, "balanced", None, sha, 10, "folder split=val").write(tmp_path)
    return tmp_path / FILE


def test_read_ok_bias(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert read_ok_bias(tmp_path, "abc") == 0.0
    path = _point(tmp_path)
    doc = json.loads(path.read_text())
    assert doc["created_at"] and doc["objective"] == "balanced"
    assert read_ok_bias(tmp_path, "abc") == 0.7
    assert read_ok_bias(tmp_path / "model.zip", "abc") == 0.7
    with caplog.at_level(logging.WARNING):
        assert read_ok_bias(tmp_path, "def") == 0.0
    assert "calibrated for another model" in caplog.text


@pytest.mark.parametrize("text", ["{", '{"ok_bias": "x"}', "{}", '{"ok_bias": NaN}'])
def test_broken_operating_point_is_a_model_error(tmp_path: Path, text: str) -> None:
    (tmp_path / FILE).write_text(text)
    with pytest.raises(ModelError, match=FILE):
        read_ok_bias(tmp_path, "abc")


def test_upper_bound_matches_closed_forms_and_published_values() -> None:
    # No event in n: 1 - (1 - c) ** (1 / n); the "rule of three" at 95 %: about 3 / n.
    assert upper_bound(0, 90, 0.9) == pytest.approx(1 - 0.1 ** (1 / 90), abs=1e-9)
    assert upper_bound(0, 300, 0.95) == pytest.approx(3 / 300, rel=0.01)
    # Clopper-Pearson's one-sided 95 % bound of 3 in 10 is 0.6066 (tables, e.g. R's
    # binom.test(3, 10, alternative = "less")).
    assert upper_bound(3, 10, 0.95) == pytest.approx(0.6066, abs=1e-4)
    assert upper_bound(10, 10, 0.9) == 1.0
    assert parts_needed(0.05, 0.9) == 45
    assert holds(0, 45, 0.05, 0.9) and not holds(0, 44, 0.05, 0.9)
    assert holds(4, 90, 0.05, None) and not holds(5, 90, 0.05, None)
    for bad in (0.0, 1.0, -0.1, float("nan"), True):
        with pytest.raises(InspectorError, match="confidence"):
            upper_bound(1, 10, bad)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 400),
    st.floats(0.0, 1.0),
    st.floats(0.01, 0.99),
    st.sampled_from([0.5, 0.8, 0.9, 0.99]),
)
def test_holds_is_the_bound_against_the_ceiling(n: int, share: float, ceiling: float, c: float):
    k = int(share * n)
    b = upper_bound(k, n, c)
    assert k / n <= b + 1e-12  # a bound never sits below the rate seen
    assert upper_bound(max(0, k - 1), n, c) <= b + 1e-12  # fewer events, lower bound
    if abs(b - ceiling) > 1e-6:  # away from the boundary the two tests agree
        assert holds(k, n, ceiling, c) == (b <= ceiling)


def test_the_bound_covers_the_true_rate_at_least_as_often_as_promised() -> None:
    """Draw false-alarm counts from a known rate: the 90 % bound lies below it in at most
    10 % of draws (Clopper-Pearson errs on the safe side)."""
    rng = np.random.default_rng(7)
    for n, p in ((90, 0.05), (200, 0.02), (40, 0.2)):
        below = [upper_bound(int(k), n, 0.9) < p for k in rng.binomial(n, p, size=400)]
        assert np.mean(below) <= 0.10 + 0.03


def test_confidence_keeps_a_margin_below_the_ceiling_and_refuses_too_few_parts() -> None:
    # 100 good parts with p(ok) spread 0.50..0.99, 20 defective ones below them.
    ok = np.linspace(0.5, 0.99, 100)
    bad = np.linspace(0.05, 0.6, 20)
    p_ok = np.concatenate([ok, bad])
    probs = np.stack([p_ok, (1 - p_ok) * 0.7, (1 - p_ok) * 0.3], axis=1)
    y = np.array([0] * 100 + [1] * 20)
    _, seen = choose_bias(probs, y, R3, "max_false_alarms", 0.05)
    _, held = choose_bias(probs, y, R3, "max_false_alarms", 0.05, confidence=0.9)
    assert seen["false_alarm_rate"] <= 0.05 and held["false_alarm_rate"] < seen["false_alarm_rate"]
    alarms = round(held["false_alarm_rate"] * 100)
    assert upper_bound(alarms, 100, 0.9) <= 0.05
    # ... and no bias whose bound holds finds more defects.
    every = rates(verdicts_at(probs, R3, GRID), y, 3)
    bounds = [upper_bound(round(f * 100), 100, 0.9) for f in every["false_alarm_rate"]]
    assert held["defect_recall"] == max(
        r for r, b in zip(every["defect_recall"], bounds) if b <= 0.05
    )
    assert held["defect_recall"] <= seen["defect_recall"]
    _, floor = choose_bias(probs, y, R3, "min_recall", 0.8, confidence=0.9)
    misses = round((1 - floor["defect_recall"]) * 20)
    assert 1 - upper_bound(misses, 20, 0.9) >= 0.8
    with pytest.raises(InspectorError, match="needs at least 45 good parts"):
        choose_bias(probs[60:], y[60:], R3, "max_false_alarms", 0.05, confidence=0.9)
    with pytest.raises(InspectorError, match="not with balanced"):
        choose_bias(probs, y, R3, confidence=0.9)
    with pytest.raises(InspectorError, match="loosen the target"):
        choose_bias(probs, y, R3, "max_false_alarms", 0.0, confidence=0.9)
