"""``profile fit``'s maths: term values recovered from simulated preferences.

The pairs here are designed comparisons: each inspection's per-term counts are
Poisson(1.5), and each term differs between the two inspections with probability
one half, so every term is told apart by about half of the pairs (pairs recorded on
the synthetic line tell some terms apart far more rarely; see docs/preferences.md).
A hidden profile (the current values times known factors, log-spaced over [1/3, 3])
judges each pair; the fit must recover the factors' order (Spearman) and agree with
the hidden profile on fresh pairs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.errors import PreferenceError
from inspector.profile import load_profile_text
from inspector.rrm import bradley_terry as bt
from inspector.rrm.preference_records import (
    Inspection,
    Preference,
    parse_preferences,
    profile_values,
)
from inspector.rrm.preferences import features, fit_values

PROFILE = """
name: prefs_test
classes: [ok, line, point]
step_budget: 12
terms:
  - {term: correct_class, reward: 1.0}
  - {term: focus_defect, reward: 0.5}
  - {term: wrong_class, reward: -0.5}
  - {term: missed_defect, reward: -1.0}
  - {term: step_cost, reward: -0.2}
  - {term: no_verdict, reward: -2.0}
"""
NAMES = ["correct_class", "focus_defect", "wrong_class", "missed_defect", "step_cost", "no_verdict"]
VALUES = np.array([1.0, 0.5, -0.5, -1.0, -0.2, -2.0])
HIDDEN = np.array([0.333, 1.93, 1.25, 0.52, 3.0, 0.8])


@pytest.fixture(scope="module")
def profile():
    return load_profile_text(PROFILE, "prefs_test.yaml", warn=False)


def counts(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ca = rng.poisson(1.5, (n, len(NAMES)))
    cb = np.where(rng.random((n, len(NAMES))) < 0.5, rng.poisson(1.5, (n, len(NAMES))), ca)
    return ca, cb


def judged(profile, ca, cb, rng, flip=0.0) -> list[Preference]:
    """Pairs judged by the hidden profile (its return decides), a share ``flip`` flipped."""
    out = []
    for i, (a, b) in enumerate(zip(ca, cb)):
        xa, xb = a * VALUES, b * VALUES
        ua, ub = xa @ HIDDEN, xb @ HIDDEN
        choice = "tie" if abs(ua - ub) < 1e-12 else ("a" if ua > ub else "b")
        if choice != "tie" and rng.random() < flip:
            choice = "b" if choice == "a" else "a"
        out.append(
            Preference(
                part_id=f"part-{i}",
                a=Inspection(terms=dict(zip(NAMES, xa.tolist()))),
                b=Inspection(terms=dict(zip(NAMES, xb.tolist()))),
                choice=choice,
                values=profile_values(profile),
                profile_sha256=profile.sha256,
            )
        )
    return out


def spearman(x, y) -> float:
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


def clean_agreement(profile, fit, rng, n=2000) -> float:
    prefs = judged(profile, *counts(rng, n), rng)
    xa, xb, y = features(profile, prefs)
    theta = np.log([fit.multipliers[k] for k in NAMES])
    return bt.agreement(xa - xb, y, theta)[0]


def test_recovers_hidden_values_from_200_pairs(profile):
    rng = np.random.default_rng(0)
    fit = fit_values(profile, judged(profile, *counts(rng, 200), rng))
    got = [fit.multipliers[k] for k in NAMES]
    assert spearman(got, HIDDEN) >= 0.9, got
    assert fit.heldout_agreement >= 0.9
    assert clean_agreement(profile, fit, rng) >= 0.9
    # Signs stay: every new value is a positive multiple of the old one.
    for c in fit.changes:
        assert np.sign(c.new) == np.sign(c.old) and c.multiplier > 0


def test_recovers_with_a_fifth_of_choices_flipped(profile):
    # Measured over seeds 0-39: with 200 pairs and 20 % flips the order is recovered to
    # >= 0.8 in 27 of 40 seeds only; with 400 pairs in 38 of 40. Agreement with the
    # hidden profile on fresh pairs stays >= 0.8 in all 40 seeds at either size.
    rng = np.random.default_rng(0)
    fit = fit_values(profile, judged(profile, *counts(rng, 400), rng, flip=0.2))
    got = [fit.multipliers[k] for k in NAMES]
    assert spearman(got, HIDDEN) >= 0.8, got
    assert clean_agreement(profile, fit, rng) >= 0.8


def test_current_values_that_already_agree_are_kept(profile):
    """Preferences the profile already explains give the penalty the last word."""
    rng = np.random.default_rng(1)
    ca, cb = counts(rng, 100)
    prefs = []
    for p in judged(profile, ca, cb, rng):
        ua, ub = sum(p.a.terms.values()), sum(p.b.terms.values())
        c = "tie" if abs(ua - ub) < 1e-12 else ("a" if ua > ub else "b")
        prefs.append(Preference(p.part_id, p.a, p.b, c, p.values, p.profile_sha256))
    fit = fit_values(profile, prefs)
    assert fit.agreement == 1.0
    assert all(abs(np.log(m)) < 0.2 for m in fit.multipliers.values()), fit.multipliers


def test_pins_and_bounds_hold(profile):
    rng = np.random.default_rng(2)
    prefs = judged(profile, *counts(rng, 200), rng)
    fit = fit_values(profile, prefs, pins=["correct_class"], bounds={"step_cost": (-0.3, -0.1)})
    ch = {c.term: c for c in fit.changes}
    assert ch["correct_class"].pinned and ch["correct_class"].new == 1.0
    assert -0.3 <= ch["step_cost"].new <= -0.1
    assert ch["step_cost"].at_bound == "lower"  # the hidden factor 3 wants -0.6


def test_bound_that_flips_the_sign_is_refused(profile):
    rng = np.random.default_rng(2)
    prefs = judged(profile, *counts(rng, 50), rng)
    with pytest.raises(PreferenceError, match="no positive multiple.*keeps signs"):
        fit_values(profile, prefs, bounds={"step_cost": (0.1, 0.5)})


def test_unknown_pin_says_did_you_mean(profile):
    rng = np.random.default_rng(2)
    prefs = judged(profile, *counts(rng, 50), rng)
    with pytest.raises(PreferenceError, match="did you mean 'step_cost'"):
        fit_values(profile, prefs, pins=["step_cots"])


# -- degenerate and contradictory input -----------------------------------------------------


def _pref(profile, a, b, choice, i=0):
    return Preference(
        part_id=f"p{i}",
        a=Inspection(terms=dict(zip(NAMES, a))),
        b=Inspection(terms=dict(zip(NAMES, b))),
        choice=choice,
        values=profile_values(profile),
    )


def test_no_preferences(profile):
    with pytest.raises(PreferenceError, match="no preferences"):
        fit_values(profile, [])


def test_only_ties(profile):
    p = _pref(profile, [1, 0, 0, 0, -0.2, 0], [0, 0, 0, -1, -0.4, 0], "tie")
    with pytest.raises(PreferenceError, match="every choice is a tie"):
        fit_values(profile, [p] * 5)


def test_identical_inspections(profile):
    same = [1.0, 0, 0, 0, -0.2, 0]
    with pytest.raises(PreferenceError, match="same per-term rewards"):
        fit_values(profile, [_pref(profile, same, same, "a", i) for i in range(5)])


def test_every_term_pinned(profile):
    p = _pref(profile, [1, 0, 0, 0, -0.2, 0], [0, 0, 0, -1, -0.4, 0], "a")
    with pytest.raises(PreferenceError, match="every term is pinned"):
        fit_values(profile, [p] * 5, pins=NAMES)


def test_pairs_judged_both_ways_are_contradictory(profile):
    rng = np.random.default_rng(3)
    prefs = judged(profile, *counts(rng, 60), rng)
    flipped = [
        Preference(p.part_id, p.a, p.b, {"a": "b", "b": "a", "tie": "tie"}[p.choice], p.values)
        for p in prefs
    ]
    with pytest.raises(PreferenceError, match="better than chance.*judged both ways") as err:
        fit_values(profile, prefs + flipped)
    assert "\n" not in str(err.value)


def test_swapped_choices_are_reported_as_such(profile):
    better, worse = [1.0, 0.5, 0, 0, -0.2, 0], [0, 0, -0.5, 0, -0.4, 0]
    prefs = [_pref(profile, better, worse, "b", i) for i in range(10)]
    with pytest.raises(PreferenceError, match="worse in every term.*swapped"):
        fit_values(profile, prefs)


# -- conversion across profile versions -------------------------------------------------------


def test_pairs_recorded_under_a_parent_version_convert_exactly(profile):
    """A fitted child (each term a multiple of the parent) reads the parent's pairs."""
    rng = np.random.default_rng(4)
    prefs = judged(profile, *counts(rng, 20), rng)
    child = load_profile_text(
        PROFILE.replace("reward: 1.0}", "reward: 2.0}").replace("-0.2}", "-0.05}"),
        "child.yaml",
        warn=False,
    )
    xa, _, _ = features(profile, prefs)
    ca, _, _ = features(child, prefs)
    k_cc, k_sc = NAMES.index("correct_class"), NAMES.index("step_cost")
    np.testing.assert_allclose(ca[:, k_cc], 2.0 * xa[:, k_cc])
    np.testing.assert_allclose(ca[:, k_sc], 0.25 * xa[:, k_sc])


def test_pairs_without_values_need_the_same_profile(profile):
    p = _pref(profile, [1, 0, 0, 0, -0.2, 0], [0, 0, 0, -1, -0.4, 0], "a")
    bare = Preference(p.part_id, p.a, p.b, "a", {}, profile_sha256="0" * 64, line=7)
    with pytest.raises(PreferenceError, match=r"x.jsonl:7: profile_sha256: recorded under"):
        features(profile, [bare], "x.jsonl")


def test_unknown_term_in_a_record(profile):
    terms = dict(zip(NAMES, [1.0, 0, 0, 0, -0.2, 0]))
    line = json.dumps(
        {
            "part_id": "p",
            "values": profile_values(profile),
            "a": {"terms": {**terms, "stepcost": 1.0}},
            "b": {"terms": terms},
            "choice": "a",
        }
    )
    prefs = parse_preferences(line.encode(), "x.jsonl")
    with pytest.raises(PreferenceError, match=r"x.jsonl:1: a.terms.stepcost: not a term"):
        features(profile, prefs, "x.jsonl")


# -- properties -------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(5, 60),
    penalty=st.floats(0.0, 5.0),
    lapse=st.floats(0.0, 0.5),
)
def test_fit_keeps_bounds_and_pins(seed, n, penalty, lapse):
    rng = np.random.default_rng(seed)
    k = 4
    dx = rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.6)
    y = rng.choice([0.0, 0.5, 1.0], size=n)
    lo = np.log(rng.uniform(0.1, 1.0, k))
    hi = np.log(rng.uniform(1.0, 10.0, k))
    free = np.array([True, True, False, True])
    f = bt.fit(dx, y, lo, hi, free, penalty, lapse)
    assert np.all(f.theta[free] >= lo[free] - 1e-12)
    assert np.all(f.theta[free] <= hi[free] + 1e-12)
    assert f.theta[2] == 0.0
    assert np.all(np.isfinite(f.theta)) and np.isfinite(f.log_likelihood)

    # The penalised optimum is at least as good as not moving at all.
    def objective(theta, lb):
        return -bt.log_likelihood(dx, y, theta, lb, lapse) + penalty * np.sum(theta**2)

    start = min(objective(np.zeros(k), lb) for lb in bt.STARTS)
    assert objective(f.theta, f.log_beta) <= start + 1e-9


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_swapping_a_and_b_changes_nothing(seed):
    rng = np.random.default_rng(seed)
    dx = rng.normal(size=(40, 3))
    y = (dx @ np.array([1.0, 2.0, 0.5]) + rng.normal(size=40) > 0).astype(float)
    lo, hi, free = np.full(3, -3.0), np.full(3, 3.0), np.ones(3, bool)
    f1 = bt.fit(dx, y, lo, hi, free, 0.1, 0.1)
    f2 = bt.fit(-dx, 1.0 - y, lo, hi, free, 0.1, 0.1)
    # The same problem: the same optimum (up to where each descent stopped on a flat floor).
    assert f1.log_likelihood == pytest.approx(f2.log_likelihood, rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(f1.theta, f2.theta, atol=1e-2)
