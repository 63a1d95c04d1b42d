"""The sharpness term: variance of the Laplacian of the native glimpse."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from inspector import EpisodeContext, Frame, StepContext
from plugins.sharpness import Sharpness, laplacian_variance


def checkerboard(n: int = 32, cell: int = 2) -> np.ndarray:
    y, x = np.mgrid[0:n, 0:n]
    return (((x // cell + y // cell) % 2) * 255).astype(np.uint8)


def step(glimpse, *, native=True):
    frame = Frame(np.zeros((64, 64), np.uint8), "p", 0.0, "test")
    ep = EpisodeContext(frame, "ok", None, ("ok", "bad"), "ok", 10)
    return StepContext(ep, 0, "zoom_in", (0, 0, 32, 32), 2, native, glimpse, True, False)


def test_sharp_beats_blurred_and_flat_is_zero():
    sharp = checkerboard()
    blurred = cv2.GaussianBlur(sharp, (7, 7), 2.0)
    assert laplacian_variance(sharp) > laplacian_variance(blurred) > 0
    assert laplacian_variance(np.full((32, 32), 128, np.uint8)) == 0.0


def test_reward_is_scaled_and_capped():
    t = Sharpness(reward=0.5, norm=1e12)
    v = t(step(checkerboard()))
    assert 0 < v < 0.5
    assert v == pytest.approx(0.5 * laplacian_variance(checkerboard()) / 1e12)
    capped = Sharpness(reward=0.5, norm=1.0)
    assert capped(step(checkerboard())) == 0.5
    assert capped(step(np.full((32, 32), 7, np.uint8))) == 0.0


def test_native_only_and_colour_glimpses():
    t = Sharpness(reward=1.0, norm=1.0)
    assert t(step(checkerboard(), native=False)) == 0.0
    assert Sharpness(reward=1.0, norm=1.0, native_only=False)(
        step(checkerboard(), native=False)
    ) == (1.0)
    colour = cv2.cvtColor(checkerboard(), cv2.COLOR_GRAY2BGR)
    assert laplacian_variance(colour) == pytest.approx(laplacian_variance(checkerboard()))
