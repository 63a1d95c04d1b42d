"""Focus terms on hand-built masks and viewports (and on one real magnetic-tile mask)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector import EpisodeContext, Frame, StepContext
from plugins.focus import FocusDefect, FocusQuality

H = W = 128


def mask_with(*rects) -> np.ndarray:
    m = np.zeros((H, W), bool)
    for x0, y0, x1, y1 in rects:
        m[y0:y1, x0:x1] = True
    return m


def episode(mask) -> EpisodeContext:
    frame = Frame(np.zeros((H, W), np.uint8), "p", 0.0, "test")
    return EpisodeContext(frame, "point", mask, ("ok", "point"), "ok", 10)


def step(ep, rect, *, level=2, native=True, levels=3, i=0):
    return StepContext(
        episode=ep,
        step=i,
        action="zoom_in",
        rect=rect,
        level=level,
        native=native,
        glimpse=np.zeros((32, 32), np.uint8),
        moved=True,
        revisit=False,
        extra={"levels": levels} if levels else {},
    )


SPOTS = mask_with((10, 10, 14, 14), (100, 100, 104, 104))


def test_focus_defect_pays_once_per_component():
    ep = episode(SPOTS)
    t = FocusDefect(reward=0.3)
    t.reset(ep)
    assert t(step(ep, (0, 0, 32, 32))) == pytest.approx(0.3)
    assert t(step(ep, (0, 0, 32, 32))) == 0.0  # already paid
    assert t(step(ep, (40, 40, 72, 72))) == 0.0  # nothing there
    assert t(step(ep, (90, 90, 122, 122))) == pytest.approx(0.3)
    t.reset(ep)
    assert t(step(ep, (0, 0, 32, 32))) == pytest.approx(0.3)


def test_focus_defect_pays_for_two_components_in_one_glimpse():
    ep = episode(mask_with((10, 10, 12, 12), (20, 20, 22, 22)))
    t = FocusDefect(reward=0.3)
    t.reset(ep)
    assert t(step(ep, (0, 0, 32, 32))) == pytest.approx(0.6)


def test_focus_defect_needs_the_zoom_level():
    ep = episode(SPOTS)
    t = FocusDefect(reward=0.3)
    t.reset(ep)
    assert t(step(ep, (0, 0, W, H), level=0, native=False)) == 0.0
    assert t(step(ep, (0, 0, 64, 64), level=1, native=False)) == 0.0
    lvl1 = FocusDefect(reward=0.3, min_level=1)
    lvl1.reset(ep)
    assert lvl1(step(ep, (0, 0, 64, 64), level=1, native=False)) == pytest.approx(0.3)


def test_focus_defect_overlap_threshold():
    ep = episode(mask_with((28, 10, 36, 14)))  # 8 px wide, glimpse covers 4 of them
    half = FocusDefect(reward=1.0, min_overlap=0.5, min_cover=1.0)
    half.reset(ep)
    assert half(step(ep, (0, 0, 32, 32))) == 1.0
    strict = FocusDefect(reward=1.0, min_overlap=0.75, min_cover=1.0)
    strict.reset(ep)
    assert strict(step(ep, (0, 0, 32, 32))) == 0.0


def test_focus_defect_long_scratch_counts_by_glimpse_cover():
    # A full-width line never fits half into a 16 px glimpse but fills it.
    ep = episode(mask_with((0, 0, W, 8)))
    t = FocusDefect(reward=1.0, min_overlap=0.5)
    t.reset(ep)
    assert t(step(ep, (0, 0, 16, 16))) == 1.0  # 8x16 of 16x16 = 50% >= 25%
    t.reset(ep)
    assert t(step(ep, (0, 4, 16, 36))) == 0.0  # 4x16 of 32x16 = 12.5%


def test_focus_defect_ignores_specks_and_missing_masks():
    ep = episode(mask_with((10, 10, 11, 11), (50, 50, 56, 56)))
    t = FocusDefect(reward=1.0, min_area=4)
    t.reset(ep)
    assert t(step(ep, (0, 0, 32, 32))) == 0.0
    assert t(step(ep, (40, 40, 72, 72))) == 1.0
    for mask in (None, np.zeros((H, W), bool)):
        e = episode(mask)
        t.reset(e)
        assert t(step(e, (0, 0, 32, 32))) == 0.0


def test_focus_quality_potential_values():
    ep = episode(SPOTS)
    t = FocusQuality(reward=2.0)
    assert t.potential(ep) == 0.0
    assert t.potential(step(ep, (0, 0, 32, 32))) == pytest.approx(2.0)
    # half a spot in view at native: 0.5
    assert t.potential(step(ep, (0, 0, 12, 32))) == pytest.approx(1.0)
    # whole spot at level 1 of 3: weight 1/2
    assert t.potential(step(ep, (0, 0, 64, 64), level=1, native=False)) == pytest.approx(1.0)
    assert t.potential(step(ep, (0, 0, W, H), level=0, native=False)) == 0.0
    assert t.potential(step(ep, (40, 40, 72, 72))) == 0.0


def test_focus_quality_without_level_count():
    ep = episode(SPOTS)
    t = FocusQuality(reward=1.0)
    t.reset(ep)
    assert t.potential(step(ep, (0, 0, 32, 32), levels=0)) == 1.0
    assert t.potential(step(ep, (0, 0, 64, 64), level=1, native=False, levels=0)) == 0.0
    with_param = FocusQuality(reward=1.0, zoom_levels=3)
    with_param.reset(ep)
    assert with_param.potential(
        step(ep, (0, 0, 64, 64), level=1, native=False, levels=0)
    ) == pytest.approx(0.5)


@settings(max_examples=50)
@given(st.lists(st.tuples(st.integers(0, 96), st.integers(0, 96)), min_size=1, max_size=12))
def test_focus_quality_as_a_term_telescopes_to_the_last_phi(corners):
    ep = episode(SPOTS)
    t, ref = FocusQuality(reward=1.0), FocusQuality(reward=1.0)
    t.reset(ep)
    ref.reset(ep)
    total = 0.0
    for i, (x, y) in enumerate(corners):
        ctx = step(ep, (x, y, x + 32, y + 32), i=i)
        total += t(ctx)
    assert total == pytest.approx(ref.potential(ctx))


def test_focus_defect_on_a_real_magnetic_tile_mask(magnetic_tile):
    import cv2

    masks = sorted(magnetic_tile.glob("MT_Blowhole/Imgs/*.png"))
    if not masks:
        pytest.skip("no blowhole masks")
    mask = cv2.imread(str(masks[0]), cv2.IMREAD_GRAYSCALE) > 0
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    frame = Frame(np.zeros((h, w), np.uint8), "mt", 0.0, "mt")
    ep = EpisodeContext(frame, "blowhole", mask, ("free", "blowhole"), "free", 16)
    t = FocusDefect(reward=0.2)
    t.reset(ep)
    n = t._cc.n
    assert n >= 1
    # Walk a 32 px native glimpse over the whole frame: every component is paid exactly once.
    total = 0.0
    for y in range(0, h, 16):
        for x in range(0, w, 16):
            total += t(step(ep, (x, y, x + 32, y + 32)))
    paid = round(total / 0.2)
    assert 1 <= paid <= n
    assert t(step(ep, (int(xs[0]) - 8, int(ys[0]) - 8, int(xs[0]) + 24, int(ys[0]) + 24))) == 0.0
