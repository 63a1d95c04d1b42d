"""benchmarks.studies.operating_margin: each rule chooses on val and is judged on test, a
stricter rule never raises the judged false alarms, and the report says so."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import benchmarks.studies.operating_margin.cli as om
from inspector.policy.agent import Decision
from inspector.policy.operating_point import upper_bound

R2 = np.array([[1.0, -1.0], [-1.0, 1.0]])


def split(good: int, bad: int, seed: int) -> tuple[np.ndarray, list[Decision]]:
    """Good parts (label 0) and defects (1) whose scores overlap a little."""
    rng = np.random.default_rng(seed)
    y = np.array([0] * good + [1] * bad)
    p_ok = np.where(y == 0, rng.beta(8, 2, len(y)), rng.beta(2, 6, len(y)))
    return y, [Decision("ok", np.array([p, 1 - p]), 2, []) for p in p_ok]


def test_rules_choose_on_val_judge_on_test_and_stricter_never_alarms_more(monkeypatch):
    monkeypatch.setattr(om, "SPLITS", 30)
    pol = SimpleNamespace(meta=SimpleNamespace(outcome_matrix=R2, scan={"zoom_levels": 1}))
    val, test = split(90, 40, 0), split(202, 61, 1)
    fig = om.figures(pol, {"val": val, "test": test}, [0])
    assert (fig["val_parts"], fig["val_good"], fig["test_good"]) == (130, 90, 202)
    from inspector.policy.operating_point import rates_at

    pv = np.stack([d.probabilities for d in val[1]])
    counts = {}
    for name, conf in om.RULES:
        f = fig["fixed"][name]
        at_val = rates_at(pv, val[0], R2, f["bias"])
        k = round(at_val["false_alarm_rate"] * 90)
        counts[name] = k
        if conf is None:
            assert k / 90 <= 0.05
        else:
            assert upper_bound(k, 90, conf) <= 0.05
        assert f["test"]["false_alarms"] == round(f["test"]["false_alarm_rate"] * 202)
        r = fig["resplit"][name]
        assert r["splits"] == 30 and r["chosen"] == 30 and 0.0 <= r["fa_over_ceiling"] <= 1.0
    assert counts["c0.9"] <= counts["c0.8"] <= counts["seen"]
    # One depth: a stricter rule's bias is as cautious or more on every split.
    fa = [fig["resplit"][n]["fa_mean"] for n, _ in om.RULES]
    assert fa[0] >= fa[1] >= fa[2]
    over = [fig["resplit"][n]["fa_over_ceiling"] for n, _ in om.RULES]
    assert over[0] >= over[1] >= over[2]
    text = om.report([{"benchmark": {"config": {"label": "s0", "model": "student"}}, **fig}])
    assert "Over the 1 models, the share of re-splits" in text
    assert "| s0 | student | c0.8 | 0 |" in text
