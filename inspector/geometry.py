"""Where each glimpse of a part looked, in frame pixels (for drawing and for pre-annotations).

A Result's glimpse path keeps each viewport's centre and zoom level; the
rectangle follows from the frame size and the model's scan settings exactly as
:meth:`inspector.scan.Scanner.crop_size` and its placement compute it (a test
holds the two equal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def glimpse_rect(
    width: int, height: int, glimpse: int, levels: int, x: float, y: float, zoom: int
) -> tuple[int, int, int, int]:
    """The viewport ``(x0, y0, x1, y1)`` in pixels of one glimpse.

    :param width: frame width in pixels.
    :param height: frame height in pixels.
    :param glimpse: the scan settings' glimpse side.
    :param levels: the scan settings' zoom levels.
    :param x: viewport centre, fraction of the width.
    :param y: viewport centre, fraction of the height.
    :param zoom: zoom level.
    """
    w, h = int(width), int(height)
    if levels <= 1:
        cw, ch = w, h
    else:
        t = min(max(int(zoom), 0), levels - 1) / (levels - 1)
        cw = max(1, min(w, round(w * (min(glimpse, w) / w) ** t)))
        ch = max(1, min(h, round(h * (min(glimpse, h) / h) ** t)))
    x0 = min(max(0, round(float(x) * w - cw / 2)), w - cw)
    y0 = min(max(0, round(float(y) * h - ch / 2)), h - ch)
    return x0, y0, x0 + cw, y0 + ch


def glimpse_boxes(
    path: Iterable[Mapping[str, Any]], width: int, height: int, scan: Mapping[str, Any]
) -> list[tuple[int, int, int, int]]:
    """The pixel rectangle of every glimpse of ``path`` (``[{"x", "y", "zoom"}, ...]``).

    :param scan: the model's scan settings (``glimpse``, ``zoom_levels``).
    """
    g, levels = int(scan.get("glimpse", 32)), int(scan.get("zoom_levels", 3))
    return [glimpse_rect(width, height, g, levels, p["x"], p["y"], p["zoom"]) for p in path or ()]
