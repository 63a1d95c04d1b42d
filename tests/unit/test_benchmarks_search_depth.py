"""benchmarks.studies.search_depth: every depth read from one full-depth pass, the choices
made on val, the figures on test, the report."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import benchmarks.studies.search_depth.cli as sd
from inspector.policy.agent import Decision

R2 = np.array([[1.0, -1.0], [-1.0, 1.0]])


def dec(full: float, early: float, steps: int = 6) -> Decision:
    """p(ok) ``full`` after a full search that first asked for native pixels at step 1,
    when p(ok) was ``early``."""
    deeper = [(0, 1, np.array([0.5, 0.5])), (1, 2, np.array([early, 1 - early]))]
    return Decision("ok", np.array([full, 1 - full]), steps, [], pixel_fraction=0.1, deeper=deeper)


def split(n: int, seed: int) -> tuple[np.ndarray, list[Decision]]:
    """Good parts (label 0) and defects (1) whose native glimpses blur the verdict."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    early = np.where(y == 0, rng.uniform(0.6, 1.0, n), rng.uniform(0.0, 0.4, n))
    full = np.clip(early + rng.normal(0, 0.4, n), 0.01, 0.99)
    return y, [dec(f, e) for f, e in zip(full, early)]


def test_figures_choose_on_val_and_judge_on_test():
    pol = SimpleNamespace(meta=SimpleNamespace(outcome_matrix=R2, scan={"zoom_levels": 3}))
    fig = sd.figures(pol, {"val": split(60, 0), "test": split(80, 1)})
    assert (fig["val_parts"], fig["test_parts"]) == (60, 80)
    by = {r["max_zoom"]: r for r in fig["depths"]}
    assert [r["max_zoom"] for r in fig["depths"]] == [2, 1, 0]
    # Depth 1 reads the separable early verdicts: perfect on both splits, no native pixel.
    assert by[1]["test_auroc"] == 1.0 and by[1]["balanced"]["test"]["balanced_accuracy"] == 1.0
    assert by[1]["test_pixel_fraction"] == 0.0 and by[1]["test_actions"] == 2.0
    assert by[2]["test_pixel_fraction"] == pytest.approx(0.1) and by[2]["test_actions"] == 6.0
    assert by[2]["test_auroc"] < 1.0
    # Every episode zooms straight in and asks for native pixels next: the fixed look.
    assert by[1]["test_fixed_look"] == 1.0 and by[2]["test_fixed_look"] is None
    assert fig["auto"] == {"balanced": 1, "fa05": 1}
    result = {"benchmark": {"config": {"label": "s0", "model": "student"}}, **fig}
    member = {"benchmark": {"config": {"label": "s0", "model": "members/m0"}}, **fig}
    text = sd.report([result, member])
    assert "auto for balanced (picked 1)" in text and "| member | 2 (full) | 1 |" in text
    assert "| s0 | student | 1 | 2.00 | 0.000 |" in text


def test_a_student_recorded_without_its_members_has_no_pooled_pick_row():
    pol = SimpleNamespace(meta=SimpleNamespace(outcome_matrix=R2, scan={"zoom_levels": 3}))
    fig = sd.figures(pol, {"val": split(40, 2), "test": split(40, 3)})
    alone = {"benchmark": {"config": {"label": "s9", "model": "student"}}, **fig}
    assert sd.members_pick([alone], "s9", "balanced") is None
    text = sd.report([alone])  # was an IndexError in pooled_depth
    assert "auto for balanced (picked 1)" in text and "members' pooled pick" not in text
