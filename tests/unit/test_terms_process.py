"""Process terms on hand-built contexts: step cost, coverage, revisits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector import EpisodeContext, Frame, StepContext
from plugins.process import Coverage, Revisit, StepCost, level_ok

H, W = 64, 128


def episode() -> EpisodeContext:
    frame = Frame(np.zeros((H, W), np.uint8), "p", 0.0, "test")
    return EpisodeContext(frame, "ok", None, ("ok", "bad"), "ok", 10)


def step(ep, rect, *, level=2, native=True, action="left", moved=True, revisit=False, i=0):
    return StepContext(
        episode=ep,
        step=i,
        action=action,
        rect=rect,
        level=level,
        native=native,
        glimpse=np.zeros((16, 16), np.uint8),
        moved=moved,
        revisit=revisit,
        extra={"levels": 3},
    )


def test_step_cost_every_step_including_stop():
    ep = episode()
    t = StepCost(reward=-0.01)
    t.reset(ep)
    assert t(step(ep, (0, 0, 16, 16))) == -0.01
    assert t(step(ep, (0, 0, 16, 16), action="stop")) == -0.01
    assert t(step(ep, (0, 0, 16, 16), moved=False)) == -0.01


def test_coverage_pays_new_area_once():
    ep = episode()
    t = Coverage(reward=1.0)
    t.reset(ep)
    assert t(step(ep, (0, 0, 16, 16))) == pytest.approx(256 / (H * W))
    assert t(step(ep, (0, 0, 16, 16))) == 0.0  # seen already
    # half new
    assert t(step(ep, (8, 0, 24, 16))) == pytest.approx(128 / (H * W))
    t.reset(ep)
    assert t(step(ep, (0, 0, 16, 16))) == pytest.approx(256 / (H * W))


def test_coverage_counts_only_zoomed_in_glimpses():
    ep = episode()
    native_only = Coverage(reward=1.0)
    native_only.reset(ep)
    assert native_only(step(ep, (0, 0, W, H), level=0, native=False)) == 0.0
    assert native_only(step(ep, (0, 0, 64, 32), level=1, native=False)) == 0.0
    from_1 = Coverage(reward=1.0, min_level=1)
    from_1.reset(ep)
    assert from_1(step(ep, (0, 0, 64, 32), level=1, native=False)) == pytest.approx(0.25)


def test_coverage_clips_rectangles_to_the_frame():
    ep = episode()
    t = Coverage(reward=1.0)
    t.reset(ep)
    assert t(step(ep, (-8, -8, 8, 8))) == pytest.approx(64 / (H * W))


@given(
    st.lists(
        st.tuples(st.integers(0, W - 1), st.integers(0, H - 1), st.integers(1, 40)),
        min_size=1,
        max_size=20,
    )
)
def test_coverage_sums_to_the_covered_fraction_and_equals_the_potential(rects):
    ep = episode()
    term, pot = Coverage(reward=2.0), Coverage(reward=2.0)
    term.reset(ep)
    assert pot.potential(ep) == 0.0
    total = 0.0
    seen = np.zeros((H, W), bool)
    last_phi = 0.0
    for x, y, s in rects:
        ctx = step(ep, (x, y, x + s, y + s))
        total += term(ctx)
        seen[y : y + s, x : x + s] = True
        phi = pot.potential(ctx)
        assert phi >= last_phi  # coverage never shrinks
        last_phi = phi
        assert pot.potential(ctx) == phi  # asking twice does not count twice
    assert total == pytest.approx(2.0 * seen.mean())
    assert last_phi == pytest.approx(2.0 * seen.mean())


def test_revisit_pays_on_revisits_and_blocked_actions():
    ep = episode()
    t = Revisit(reward=-0.05)
    r = (0, 0, 16, 16)
    assert t(step(ep, r)) == 0.0
    assert t(step(ep, r, revisit=True)) == -0.05
    assert t(step(ep, r, moved=False)) == -0.05
    assert t(step(ep, r, revisit=True, action="stop")) == 0.0
    lenient = Revisit(reward=-0.05, include_blocked=False)
    assert lenient(step(ep, r, moved=False)) == 0.0
    assert lenient(step(ep, r, revisit=True)) == -0.05


def test_level_ok_rules():
    ep = episode()
    assert level_ok(step(ep, (0, 0, 1, 1), level=2, native=True), -1)
    assert not level_ok(step(ep, (0, 0, 1, 1), level=1, native=False), -1)
    # -2 = second deepest of 3 levels = level 1
    assert level_ok(step(ep, (0, 0, 1, 1), level=1, native=False), -2)
    assert not level_ok(step(ep, (0, 0, 1, 1), level=0, native=False), -2)
    assert level_ok(step(ep, (0, 0, 1, 1), level=0, native=False), 0)
