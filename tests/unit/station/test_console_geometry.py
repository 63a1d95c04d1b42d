"""The console's glimpse rectangles are the scanner's viewports."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.profile import ScanSettings
from inspector.scan import Scanner
from inspector.station.console.geometry import glimpse_boxes


@settings(max_examples=60, deadline=None)
@given(
    w=st.integers(40, 300), h=st.integers(40, 300), glimpse=st.sampled_from([16, 32, 48]),
    levels=st.integers(1, 4), actions=st.lists(st.integers(0, 5), max_size=8),
)  # fmt: skip
def test_boxes_equal_the_scanner_viewports(w, h, glimpse, levels, actions):
    sc = Scanner(ScanSettings(glimpse=glimpse, overview=16, zoom_levels=levels, memory=2), 20)
    sc.reset(np.zeros((h, w), np.uint8))
    rects = [sc.rect]
    for a in actions:
        sc.step(a)
        rects.append(sc.rect)
    path = [{"x": p.x, "y": p.y, "zoom": p.zoom} for p in sc.path]
    boxes = glimpse_boxes(path, w, h, {"glimpse": glimpse, "zoom_levels": levels})
    # The scanner records a path point per glimpse it takes (moves that hit an edge take none).
    assert len(boxes) == len(sc.path)
    assert set(boxes) <= set(rects)
    assert boxes[-1] == sc.rect
