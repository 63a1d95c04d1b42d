"""The console without a server: glimpse rectangles equal the scanner's viewports; Host names."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.geometry import glimpse_boxes
from inspector.profile import ScanSettings
from inspector.scan import Scanner


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


def test_an_open_console_answers_loopback_host_names_only():
    from inspector.station.console.config import is_loopback
    from inspector.station.console.server import loopback_host

    for ok in ("127.0.0.1:8090", "localhost:8090", "[::1]:8090", "localhost", "127.0.0.2:1"):
        assert loopback_host(ok), ok
    for bad in ("evil.example:8090", "10.0.0.5:8090", "", "127.0.0.1.evil.example:80"):
        assert not loopback_host(bad), bad
    assert is_loopback("::1") and is_loopback("127.0.0.1") and not is_loopback("0.0.0.0")


def test_shadow_disagreements_join_the_review_queue():
    from types import SimpleNamespace

    from inspector.station.console.hub import ConsoleHub

    hub = object.__new__(ConsoleHub)
    hub.section = SimpleNamespace(low_confidence=0.6)
    doc = {"error": None, "has_frame": True, "confidence": 0.9, "label": "ok"}
    assert hub._why_review({**doc, "shadow_label": None}) is None
    assert hub._why_review({**doc, "shadow_label": "ok"}) is None
    assert hub._why_review({**doc, "shadow_label": "line"}) == "shadow model says line"
    assert hub._why_review({**doc, "confidence": 0.5, "shadow_label": "line"}).startswith("low")
