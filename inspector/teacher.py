"""The scripted teacher: it searches like an inspector and uses the truth only once in sight.

Used only in training: its actions are cloned before PPO and relabel the student's
own states for the KL term of the hybrid loss (DAgger-style).

A teacher that flies straight onto a defect it cannot see teaches the student moves
no observation explains (the old, fully privileged teacher did that, and cloning it
left the student wandering). This one behaves the way the student could:

* Search: zoom in to the search level (native by default) and visit the cells of its
  grid in serpentine order.
* As soon as a defect is *in sight* (inside the viewport and visible in the current
  glimpse, see :func:`defect_in_sight`), lock on: move until its centre is in the
  central half of the viewport, zoom in, repeat until the glimpse is at native
  resolution with it in view, stop.
* Nothing in sight after the last cell: stop (an ok part). A defect that stayed out
  of sight through the whole search (rare: too faint for the level-1 glimpse) is
  then approached with the truth, so its native view is still labelled.
* The last step of the budget is always a stop: a verdict beats a truncation.

A profile whose action table has tile jumps (``scan.actions: tiles`` or
``moves+tiles``) gets the :class:`TileTeacher` instead (:func:`teacher_for`): native
tiles in raster order, stop as soon as a defect is in sight.
"""

from __future__ import annotations

import cv2
import numpy as np

from inspector.scan import ACTIONS, MOVES, Scanner

#: The move table's indices (the same in ``moves+tiles``, whose stop is ``sc.stop``).
UP, DOWN, LEFT, RIGHT, ZOOM_IN, ZOOM_OUT, STOP = range(len(ACTIONS))


def _toward(sc: Scanner, tx: float, ty: float, central: bool = False) -> int | None:
    """A move bringing pixel (tx, ty) into the central part of the viewport, or None."""
    x0, y0, x1, y1 = sc.rect
    # Before zooming in the target must sit in the central half (the crop shrinks
    # around the centre); at native resolution anywhere inside the glimpse will do.
    k = 0.0 if sc.native and not central else 0.25
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


#: a defect is visible in a glimpse when a pixel it covers stands out of the glimpse's
#: 5x5 median by this many robust noise std (and by at least MIN_CONTRAST gray levels),
#: or when it covers at least MIN_AREA whole glimpse pixels.
CONTRAST_SIGMAS = 4.0
MIN_CONTRAST = 4.0
MIN_AREA = 4.0


def defect_in_sight(sc: Scanner, mask: np.ndarray | None) -> bool:
    """Whether a defect pixel of ``mask`` is inside the viewport and visible in the glimpse.

    At native resolution any defect pixel in view counts. Below it the defect must
    either stand out of its neighbourhood in the current glimpse (local contrast
    against the glimpse's own robust noise) or cover a few whole glimpse pixels.

    :param sc: the scanner (its current viewport and glimpse).
    :param mask: the frame's defect mask (bool, frame size) or None.
    """
    if mask is None:
        return False
    x0, y0, x1, y1 = sc.rect
    return defect_visible(sc.glimpse, mask[y0:y1, x0:x1], sc.native)


def defect_visible(glimpse: np.ndarray, sub: np.ndarray, native: bool) -> bool:
    """Whether the defect pixels ``sub`` of a viewport show in its ``glimpse``.

    The rule of :func:`defect_in_sight` for one viewport: any defect pixel at native
    resolution; below it, local contrast or a few whole glimpse pixels of cover.

    :param glimpse: the viewport's glimpse (G, G) uint8.
    :param sub: the frame's defect mask cut to the viewport rectangle (bool).
    :param native: the glimpse shows native pixels (no resampling).
    """
    if not sub.any():
        return False
    if native:
        return True
    g = glimpse
    cover = cv2.resize(
        sub.astype(np.float32), (g.shape[1], g.shape[0]), interpolation=cv2.INTER_AREA
    )
    if float(cover.sum()) >= MIN_AREA:
        return True
    resid = np.abs(g.astype(np.float32) - cv2.medianBlur(g, 5).astype(np.float32))
    noise = 1.4826 * float(np.median(resid))
    peak = float(resid[cover > 0].max(initial=0.0))
    return peak >= max(MIN_CONTRAST, CONTRAST_SIGMAS * noise)


def search_plan(sc: Scanner, level: int = 1) -> list[int]:
    """Cells of the ``level`` grid the search visits, serpentine (empty with one zoom level)."""
    if sc.levels < 2:
        return []
    nx, ny = _grid(sc, level)
    cells = []
    for r in range(ny):
        row = list(range(r * nx, (r + 1) * nx))
        cells += row if r % 2 == 0 else row[::-1]
    return cells


def _grid(sc: Scanner, level: int) -> tuple[int, int]:
    h, w = sc.image.shape[:2]
    cw, ch = sc.crop_size(level)
    return max(1, round(w / cw)), max(1, round(h / ch))


class ScriptedTeacher:
    """The teacher for one episode: call :meth:`reset` with the frame's mask, then :meth:`act`.

    :meth:`act` may be called on any state the scanner is in (the student's own states,
    for DAgger relabelling); it updates the teacher's search progress as a side effect.

    :param search_level: zoom level whose grid the search visits: -1 (default) the
        native level, where the smallest defects are certainly visible; 1 the first zoom
        level (fewer cells, enough where defects show at reduced resolution).
    :param fallback: approach a defect that stayed out of sight through the whole search
        with the truth (training labels); False stops instead, which makes the teacher a
        fully non-privileged searcher (used to measure what a search can reach).
    """

    def __init__(self, fallback: bool = True, search_level: int = -1) -> None:
        if search_level == 0 or search_level < -1:
            raise ValueError(f"search_level must be >= 1 or -1 (native), got {search_level}")
        self.fallback = bool(fallback)
        self.search_level = int(search_level)
        self.mask: np.ndarray | None = None
        self.target: tuple[float, float] | None = None
        self.plan: list[int] = []
        #: the defect has been in sight (the observations show it)
        self.seen = False
        #: heading for the defect (in sight, or the search ended without it)
        self.locked = False

    def reset(self, sc: Scanner, mask: np.ndarray | None) -> None:
        """Start an episode (after ``sc.reset``).

        :raises ValueError: the scanner's action table has no moves (use :class:`TileTeacher`).
        """
        if sc.actions[: len(MOVES)] != MOVES:
            raise ValueError("the scripted move teacher needs the move actions; use TileTeacher")
        self.mask = mask if mask is not None and mask.any() else None
        self.target = defect_target(self.mask)
        native = sc.levels - 1
        self.level = native if self.search_level == -1 else min(self.search_level, native)
        self.plan = search_plan(sc, self.level)
        self.seen = False
        self.locked = False

    def act(self, sc: Scanner) -> int:
        """The teacher's action in the scanner's current state (an index of its table)."""
        a = self._act(sc)
        return sc.stop if a == STOP else a

    def _act(self, sc: Scanner) -> int:
        if self.target is not None and not self.seen and defect_in_sight(sc, self.mask):
            self.seen = self.locked = True
        if sc.steps >= sc.budget - 1:
            return STOP
        if self.locked:
            return _approach(sc, self.target)
        if sc.levels < 2:
            return STOP
        if self.plan and sc.level < self.level:
            return ZOOM_IN
        h, w = sc.image.shape[:2]
        nx, ny = _grid(sc, self.level)
        while self.plan:
            cell = self.plan[0]
            cx = (cell % nx + 0.5) * w / nx
            cy = (cell // nx + 0.5) * h / ny
            if sc.level > self.level:
                return ZOOM_OUT
            mv = _toward(sc, cx, cy, central=True)
            if mv is None:
                self.plan.pop(0)
                continue
            return mv
        if self.target is not None and self.fallback:  # searched everywhere, never in sight
            self.locked = True
            return _approach(sc, self.target)
        return STOP


def _approach(sc: Scanner, target: tuple[float, float]) -> int:
    mv = _toward(sc, *target)
    if mv is not None:
        return mv
    return STOP if sc.native else ZOOM_IN


class TileTeacher:
    """The teacher for an action table with tile jumps (``scan.actions: tiles`` or
    ``moves+tiles``): the exhaustive tiling with an early stop.

    It stops as soon as a defect is in sight (the current glimpse shows it, by the rule
    of :func:`defect_in_sight`: already in the overview for a defect that shows there),
    else jumps to the first native tile of the grid not looked at yet (raster order),
    and stops when every tile has been seen (an ok part). Like :class:`ScriptedTeacher`
    it may be asked on any state (the student's own, for DAgger relabelling) and uses
    the truth only once in sight; the last step of the budget is a stop.

    :param fallback: accepted for :class:`ScriptedTeacher`'s signature; the tiles cover
        the frame, so no defect stays out of sight through the whole search.
    """

    def __init__(self, fallback: bool = True) -> None:
        self.fallback = bool(fallback)
        self.mask: np.ndarray | None = None
        self.target: tuple[float, float] | None = None
        #: the defect has been in sight (the observations show it)
        self.seen = False

    def reset(self, sc: Scanner, mask: np.ndarray | None) -> None:
        """Start an episode (after ``sc.reset``).

        :raises ValueError: the scanner's action table has no tile jumps.
        """
        if not sc.n_tiles:
            raise ValueError("the tile teacher needs tile actions (scan.actions: tiles)")
        self.mask = mask if mask is not None and mask.any() else None
        self.target = defect_target(self.mask)
        self.seen = False

    def act(self, sc: Scanner) -> int:
        """The teacher's action in the scanner's current state (an index of its table)."""
        if self.target is not None and not self.seen and defect_in_sight(sc, self.mask):
            self.seen = True
        if self.seen or sc.steps >= sc.budget - 1:
            return sc.stop
        for k in range(sc.n_tiles):
            if not sc.tile_seen(k):
                return sc.tile0 + k
        return sc.stop


def teacher_for(sc: Scanner, fallback: bool = True) -> ScriptedTeacher | TileTeacher:
    """The scripted teacher that fits ``sc``'s action table: :class:`TileTeacher` when it
    has tile jumps, else :class:`ScriptedTeacher`."""
    return TileTeacher(fallback) if sc.n_tiles else ScriptedTeacher(fallback)
