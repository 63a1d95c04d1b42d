"""The privileged scripted teacher: it reads the frame's truth and scans onto the defect.

Used only in training, as the KL teacher of the hybrid loss (DAgger-style: the
student's own states are relabelled by the teacher at every step).

* Defective part: move until the defect's centre is inside the viewport, zoom in,
  repeat until the glimpse is at native resolution with the defect in view, stop.
* OK part: visit every cell of the level-1 grid (zoomed in once), then stop.
"""

from __future__ import annotations

import numpy as np

from inspector.scan import ACTIONS, Scanner

UP, DOWN, LEFT, RIGHT, ZOOM_IN, ZOOM_OUT, STOP = range(len(ACTIONS))


def _toward(sc: Scanner, tx: float, ty: float) -> int | None:
    """A move bringing pixel (tx, ty) into the central part of the viewport, or None."""
    x0, y0, x1, y1 = sc.rect
    # Before zooming in the target must sit in the central half (the crop shrinks
    # around the centre); at native resolution anywhere inside the glimpse will do.
    k = 0.0 if sc.native else 0.25
    mx, my = (x1 - x0) * k, (y1 - y0) * k
    dx = tx - (x0 + x1) / 2
    dy = ty - (y0 + y1) / 2
    inside_x = x0 + mx <= tx < x1 - mx or (tx < x0 + mx and x0 == 0)
    inside_x = inside_x or (tx >= x1 - mx and x1 == sc.image.shape[1])
    inside_y = y0 + my <= ty < y1 - my or (ty < y0 + my and y0 == 0)
    inside_y = inside_y or (ty >= y1 - my and y1 == sc.image.shape[0])
    if inside_x and inside_y:
        return None
    if not inside_x and (inside_y or abs(dx) / (x1 - x0) >= abs(dy) / (y1 - y0)):
        return RIGHT if dx > 0 else LEFT
    return DOWN if dy > 0 else UP


def defect_target(mask: np.ndarray | None) -> tuple[float, float] | None:
    """Centre (x, y) of the largest defect pixel cluster (its median pixel), or None."""
    if mask is None or not mask.any():
        return None
    ys, xs = np.nonzero(mask)
    i = len(xs) // 2
    order = np.argsort(xs + ys * mask.shape[1])
    return float(xs[order[i]]) + 0.5, float(ys[order[i]]) + 0.5


def scripted_action(sc: Scanner, target: tuple[float, float] | None, ok_plan: list[int]) -> int:
    """The teacher's action in the scanner's current state.

    :param sc: the scanner (viewport state).
    :param target: the defect centre, or None for an ok part.
    :param ok_plan: for ok parts, remaining level-1 cell indices to visit (mutated).
    """
    if sc.steps >= sc.budget - 1:
        return STOP  # the last step of the budget: a verdict beats a truncation
    if target is not None:
        mv = _toward(sc, *target)
        if mv is not None:
            return mv
        return STOP if sc.native else ZOOM_IN
    if sc.levels < 2:
        return STOP
    if sc.level == 0:
        return ZOOM_IN if ok_plan else STOP
    h, w = sc.image.shape[:2]
    cw, ch = sc.crop_size(1)
    nx, ny = max(1, round(w / cw)), max(1, round(h / ch))
    while ok_plan:
        cell = ok_plan[0]
        cx = (cell % nx + 0.5) * w / nx
        cy = (cell // nx + 0.5) * h / ny
        if sc.level > 1:
            return ZOOM_OUT
        mv = _toward(sc, cx, cy)
        if mv is None:
            ok_plan.pop(0)
            continue
        return mv
    return STOP


def ok_plan_for(sc: Scanner) -> list[int]:
    """Level-1 cells an ok part's scan visits, in serpentine order."""
    if sc.levels < 2:
        return []
    h, w = sc.image.shape[:2]
    cw, ch = sc.crop_size(1)
    nx, ny = max(1, round(w / cw)), max(1, round(h / ch))
    cells = []
    for r in range(ny):
        row = list(range(r * nx, (r + 1) * nx))
        cells += row if r % 2 == 0 else row[::-1]
    return cells
