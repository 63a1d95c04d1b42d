"""Scan geometry: crops, zoom levels, edges, memory, and the overview."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.profile import ScanSettings
from inspector.scan import ACTIONS, SEEN_GRID, STOP, Scanner, observation_shapes, state_size

UP, DOWN, LEFT, RIGHT, ZIN, ZOUT = range(6)


def frame(h=128, w=160, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w), dtype=np.uint8)


def test_level_zero_is_the_whole_frame_and_the_deepest_level_is_native_pixels():
    s = ScanSettings(glimpse=32, overview=32, zoom_levels=3, memory=2)
    img = frame()
    sc = Scanner(s, budget=10)
    obs = sc.reset(img)
    assert sc.rect == (0, 0, 160, 128)
    expected = cv2.resize(img, (32, 32), interpolation=cv2.INTER_AREA)
    assert np.array_equal(obs["glimpse"][0], expected)
    assert np.array_equal(obs["overview"][0], expected)
    sc.step(ZIN)
    obs, moved, _ = sc.step(ZIN)
    assert moved and sc.native
    x0, y0, x1, y1 = sc.rect
    assert (x1 - x0, y1 - y0) == (32, 32)
    assert np.array_equal(obs["glimpse"][0], img[y0:y1, x0:x1])  # no resampling at native


def test_moves_clamp_at_the_edges_and_report_no_change():
    sc = Scanner(ScanSettings(), budget=50)
    sc.reset(frame())
    _, moved, _ = sc.step(UP)
    assert not moved  # level 0 covers everything
    sc.step(ZIN)
    for _ in range(10):
        sc.step(LEFT)
    _, moved, revisit = sc.step(LEFT)
    assert not moved and revisit
    assert sc.rect[0] == 0
    _, moved, _ = sc.step(ZOUT)
    assert moved
    _, moved, _ = sc.step(ZOUT)
    assert not moved


def test_memory_keeps_previous_glimpses_in_order():
    sc = Scanner(ScanSettings(memory=3), budget=10)
    obs0 = sc.reset(frame())
    obs1, _, _ = sc.step(ZIN)
    assert np.array_equal(obs1["glimpse"][1], obs0["glimpse"][0])
    assert not obs1["glimpse"][2].any()
    obs2, _, _ = sc.step(RIGHT)
    assert np.array_equal(obs2["glimpse"][2], obs0["glimpse"][0])
    assert np.array_equal(obs2["glimpse"][1], obs1["glimpse"][0])


def test_stop_changes_nothing_and_the_state_vector_has_its_documented_size():
    s = ScanSettings()
    sc = Scanner(s, budget=4)
    obs = sc.reset(frame())
    assert obs["state"].shape == (state_size(s),)
    assert {k: v.shape for k, v in obs.items()} == observation_shapes(s)
    rect = sc.rect
    sc.step(STOP)
    assert sc.rect == rect
    assert ACTIONS[STOP] == "stop"


def test_native_coverage_map_and_pixel_fraction():
    sc = Scanner(ScanSettings(glimpse=32, zoom_levels=3), budget=10)
    sc.reset(frame(128, 128))
    sc.step(ZIN)
    sc.step(ZIN)
    assert sc.pixel_fraction() == pytest.approx(32 * 32 / (128 * 128))
    seen = sc.observation()["state"][6 + 3 : 6 + 3 + SEEN_GRID * SEEN_GRID]
    assert seen.sum() >= 1


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(40, 300),
    w=st.integers(40, 300),
    actions=st.lists(st.integers(0, 5), max_size=30),
    levels=st.integers(1, 4),
)
def test_the_viewport_always_stays_inside_the_frame(h, w, actions, levels):
    s = ScanSettings(glimpse=16, overview=16, zoom_levels=levels, memory=2)
    sc = Scanner(s, budget=40)
    sc.reset(frame(h, w))
    for a in actions:
        obs, _, _ = sc.step(a)
        x0, y0, x1, y1 = sc.rect
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert obs["glimpse"].shape == (2, 16, 16)
        assert np.all(np.abs(obs["state"]) <= 1.0)


def test_bgr_frames_are_converted_to_gray():
    img = frame()
    bgr = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    a = Scanner(ScanSettings(), 5).reset(img)
    b = Scanner(ScanSettings(), 5).reset(bgr)
    assert np.array_equal(a["glimpse"], b["glimpse"])


def test_look_at_takes_the_glimpse_a_policy_would_get_there():
    s = ScanSettings(glimpse=32, overview=32, zoom_levels=3, memory=2)
    img = frame()
    sc = Scanner(s, budget=10)
    sc.reset(img)
    # Native: the exact pixels, centred where asked.
    g = sc.look_at(2, 51 / 160, 41 / 128)
    x0, y0, x1, y1 = sc.rect
    assert (x0, y0, x1, y1) == (35, 25, 67, 57)
    assert np.array_equal(g, img[25:57, 35:67]) and sc.steps == 0
    # Past the edge: clamped inside the frame like a move would be.
    sc.look_at(2, 1.0, 0.0)
    assert sc.rect == (128, 0, 160, 32)
    # Level 0 is the whole frame, the overview; the level is clamped to the zoom levels.
    assert np.array_equal(sc.look_at(-3, 0.2, 0.9), sc.observation()["overview"][0])
    # The same viewport reached by actions gives the same glimpse.
    sc2 = Scanner(s, budget=10)
    sc2.reset(img)
    sc2.step(ZIN)
    obs, _, _ = sc2.step(RIGHT)
    sc.look_at(1, sc2.cx, sc2.cy)
    assert sc.rect == sc2.rect and np.array_equal(sc.glimpse, obs["glimpse"][0])
