"""Scan geometry: (frame, viewport) -> observation. Shared by training and the station.

The agent sees three things:

* ``glimpse`` (M, G, G) uint8: the current glimpse first, then the M-1 previous ones
  (zeros before the first moves), so a verdict can weigh the evidence of several
  glimpses without a recurrent policy;
* ``overview`` (1, O, O) uint8: the whole frame shrunk with INTER_AREA (anti-aliased,
  so a point a few pixels wide vanishes: the agent has to focus to see it);
* ``state`` float32: viewport position and size, zoom level, steps used, a coarse map
  of what has been seen at native resolution, and where each remembered glimpse was.

Zoom level 0 shows the whole frame; the deepest level ``L-1`` crops exactly G x G
frame pixels (native resolution, no resampling). Crop sizes in between are
geometric. This module has no gymnasium dependency: the station calls it directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from inspector.errors import ModelError
from inspector.imageio import to_gray
from inspector.profile import ScanSettings
from inspector.yamlio.profile_spec import ACTION_SETS

#: The move and zoom actions in index order (``scan.actions: moves``).
MOVES: tuple[str, ...] = ("up", "down", "left", "right", "zoom_in", "zoom_out")
#: The default action table (``scan.actions: moves``), in index order. ``stop`` ends the
#: part; its verdict comes separately. A profile may choose another table
#: (:func:`action_names`); a model's own table is its metadata's ``actions``.
ACTIONS: tuple[str, ...] = (*MOVES, "stop")
#: ``stop`` of the default table. Every table ends with ``stop``, so a model's stop
#: index is ``len(actions) - 1`` (:func:`stop_index`).
STOP = ACTIONS.index("stop")
#: Most tiles per side of the jump grid (the profile allows 16; metadata is bounded too).
MAX_TILES = 64
#: The step budget of a model whose metadata names none.
DEFAULT_BUDGET = 12
_MOVES = {0: (0, -1), 1: (0, 1), 2: (-1, 0), 3: (1, 0)}
#: Side of the coarse "seen at native resolution" grid in the state vector.
SEEN_GRID = 4


def action_names(settings: ScanSettings) -> tuple[str, ...]:
    """The action table of ``settings`` in index order, ``stop`` last.

    ``moves``: :data:`ACTIONS` (half-viewport moves, zooms). ``tiles``: ``tile_0`` ..
    ``tile_{n-1}``, a jump to each native tile of the ``tiles`` x ``tiles`` grid in
    raster order (:meth:`Scanner.tile_centre`). ``moves+tiles``: the moves, then the
    tiles.

    :raises ValueError: an unknown action set or a grid of no tile.
    """
    kind = getattr(settings, "actions", "moves")
    if kind not in ACTION_SETS:
        raise ValueError(f"unknown scan actions {kind!r}; allowed: {', '.join(ACTION_SETS)}")
    if kind == "moves":
        return ACTIONS
    n = int(settings.tiles)
    if not 1 <= n <= MAX_TILES:
        raise ValueError(f"scan.tiles must be 1 .. {MAX_TILES}, got {n}")
    tiles = tuple(f"tile_{k}" for k in range(n * n))
    return (*(MOVES if kind == "moves+tiles" else ()), *tiles, "stop")


def stop_index(actions: tuple[str, ...] | int) -> int:
    """The index of ``stop`` in an action table (its last entry), or in a table of that
    many actions."""
    return (actions if isinstance(actions, int) else len(actions)) - 1


def scan_metadata(settings: ScanSettings) -> dict[str, Any]:
    """The scan settings as a model's metadata stores them.

    The action table's fields are written only when they are not the default
    (``moves``), so a model trained with the moves exports exactly as before and an
    older model's metadata rebuilds the same scanner (:meth:`Scanner.from_metadata`).
    """
    out = {
        "glimpse": settings.glimpse,
        "overview": settings.overview,
        "zoom_levels": settings.zoom_levels,
        "memory": settings.memory,
        "move_fraction": settings.move_fraction,
    }
    if settings.actions != "moves":
        out["actions"] = settings.actions
        out["tiles"] = settings.tiles
    return out


def state_size(settings: ScanSettings) -> int:
    """Length of the state vector for ``settings``."""
    return 6 + settings.zoom_levels + SEEN_GRID * SEEN_GRID + 5 * settings.memory


def observation_shapes(settings: ScanSettings) -> dict[str, tuple[int, ...]]:
    """Shapes of the observation arrays."""
    g, o = settings.glimpse, settings.overview
    return {
        "glimpse": (settings.memory, g, g),
        "overview": (1, o, o),
        "state": (state_size(settings),),
    }


@dataclass(frozen=True)
class PathPoint:
    """One step of the glimpse path: centre (normalised 0..1) and zoom level."""

    x: float
    y: float
    zoom: int


class Scanner:
    """The viewport over one frame and the observation it produces.

    :param settings: scan settings from the profile.
    :param budget: the step budget (for the ``steps used`` state entry).
    """

    def __init__(self, settings: ScanSettings, budget: int) -> None:
        self.settings = settings
        self.budget = max(1, int(budget))
        self.levels = int(settings.zoom_levels)
        #: the action table in index order (``stop`` last)
        self.actions = action_names(settings)
        self.stop = stop_index(self.actions)
        self._has_moves = self.actions[: len(MOVES)] == MOVES
        #: tiles of the jump grid (0 without tile actions) and the first tile's action
        self.n_tiles = sum(1 for a in self.actions if a.startswith("tile_"))
        self.tile0 = self.actions.index("tile_0") if self.n_tiles else -1
        g = settings.glimpse
        self._glimpses = np.zeros((settings.memory, g, g), dtype=np.uint8)
        self._overview = np.zeros((1, settings.overview, settings.overview), dtype=np.uint8)
        self._state = np.zeros(state_size(settings), dtype=np.float32)
        self._mem_geom = np.full((settings.memory, 5), -1.0, dtype=np.float32)
        self._seen = np.zeros((SEEN_GRID, SEEN_GRID), dtype=np.float32)
        self._visited: set[tuple[int, int, int]] = set()
        self.image: np.ndarray | None = None
        self.path: list[PathPoint] = []
        self.steps = 0
        self.level = 0
        self.cx = 0.5
        self.cy = 0.5
        self.rect = (0, 0, 1, 1)
        self.native_pixels = 0

    @classmethod
    def from_metadata(cls, meta: Any, budget: int | None = None) -> Scanner:
        """The scanner a model was trained with, rebuilt from its metadata.

        The one way to do it (station, export, retraining, evaluation), so that every
        place sees the pixels training saw.

        :param meta: a :class:`inspector.policy.base.ModelMeta` (anything with ``scan``,
            a mapping of :class:`ScanSettings` fields, and ``step_budget``).
        :param budget: the step budget; by default the model's, else ``DEFAULT_BUDGET``.
        :raises ModelError: the metadata's scan settings are not ScanSettings' fields,
            or name an action table this version does not know.
        """
        try:
            settings = ScanSettings(**dict(meta.scan))
            action_names(settings)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"unusable scan settings: {exc}") from None
        return cls(settings, budget or meta.step_budget or DEFAULT_BUDGET)

    # -- geometry ---------------------------------------------------------------
    def crop_size(self, level: int) -> tuple[int, int]:
        """(width, height) of the crop at ``level`` for the current frame."""
        h, w = self.image.shape[:2]
        g = self.settings.glimpse
        if self.levels <= 1:
            return w, h
        t = level / (self.levels - 1)
        cw = w * (min(g, w) / w) ** t
        ch = h * (min(g, h) / h) ** t
        return max(1, min(w, round(cw))), max(1, min(h, round(ch)))

    def _place(self) -> None:
        h, w = self.image.shape[:2]
        cw, ch = self.crop_size(self.level)
        x0 = round(self.cx * w - cw / 2)
        y0 = round(self.cy * h - ch / 2)
        x0 = min(max(0, x0), w - cw)
        y0 = min(max(0, y0), h - ch)
        self.rect = (x0, y0, x0 + cw, y0 + ch)
        # Re-centre on the clamped rectangle so a move against an edge changes nothing.
        self.cx = (x0 + cw / 2) / w
        self.cy = (y0 + ch / 2) / h

    def tile_centre(self, k: int) -> tuple[float, float]:
        """Centre (normalised) of native tile ``k`` of the jump grid, raster order.

        The ``tiles`` x ``tiles`` native viewports are spread evenly from one edge of the
        frame to the other (the first at the left/top edge, the last at the right/bottom
        edge), so they cover the frame whenever the grid has at least as many tiles per
        side as native viewports fit; where exactly that many fit they are the frame's
        non-overlapping tiling (the tiling control of the search_controls study).
        """
        n = int(self.settings.tiles)
        h, w = self.image.shape[:2]
        cw, ch = self.crop_size(self.levels - 1)
        i, j = k % n, k // n
        x0 = i * (w - cw) / (n - 1) if n > 1 else (w - cw) / 2
        y0 = j * (h - ch) / (n - 1) if n > 1 else (h - ch) / 2
        return (round(x0) + cw / 2) / w, (round(y0) + ch / 2) / h

    def tile_seen(self, k: int) -> bool:
        """Whether native tile ``k``'s viewport has been looked at in this part."""
        cx, cy = self.tile_centre(k)
        h, w = self.image.shape[:2]
        cw, ch = self.crop_size(self.levels - 1)
        x0 = min(max(0, round(cx * w - cw / 2)), w - cw)
        y0 = min(max(0, round(cy * h - ch / 2)), h - ch)
        return (self.levels - 1, x0, y0) in self._visited

    @property
    def glimpse(self) -> np.ndarray:
        """The current glimpse (G, G) uint8 (a view: copy it to keep it)."""
        return self._glimpses[0]

    @property
    def native(self) -> bool:
        """The current glimpse shows native pixels."""
        return self.level == self.levels - 1

    # -- episode ----------------------------------------------------------------
    def reset(self, image: np.ndarray) -> dict[str, np.ndarray]:
        """Start a new part on ``image`` (gray or BGR); return the first observation."""
        img = to_gray(image)
        if img.dtype != np.uint8:
            raise ValueError(f"frames must be uint8, got {img.dtype}")
        self.image = np.ascontiguousarray(img)
        o = self.settings.overview
        self._overview[0] = cv2.resize(self.image, (o, o), interpolation=cv2.INTER_AREA)
        self._glimpses[:] = 0
        self._mem_geom[:] = -1.0
        self._seen[:] = 0.0
        self._visited.clear()
        self.path = []
        self.steps = 0
        self.level = 0
        self.cx = self.cy = 0.5
        self.native_pixels = 0
        self._place()
        self._look()
        return self.observation()

    def level_after(self, action: int) -> int:
        """The zoom level ``action`` would take the viewport to (``stop``: the current one).

        What the agent loop checks against a model's search depth
        (:func:`inspector.policy.agent.run_episode`) before it lets an action look.
        """
        a = int(action)
        if self.n_tiles and 0 <= a - self.tile0 < self.n_tiles:
            return self.levels - 1
        if self._has_moves and a == 4:
            return min(self.levels - 1, self.level + 1)
        if self._has_moves and a == 5:
            return max(0, self.level - 1)
        return self.level

    def step(self, action: int) -> tuple[dict[str, np.ndarray], bool, bool]:
        """Apply a move, zoom or tile action of :attr:`actions` (``stop`` changes nothing).

        :returns: (observation, moved, revisit): ``moved`` is False when the action hit an
            edge or a zoom limit (or jumped to the tile in view); ``revisit`` is True when
            the new viewport was seen before.
        """
        before = (self.rect, self.level)
        a = int(action)
        if self.n_tiles and 0 <= a - self.tile0 < self.n_tiles:
            self.level = self.levels - 1
            self.cx, self.cy = self.tile_centre(a - self.tile0)
        elif not self._has_moves:
            pass
        elif a in _MOVES:
            dx, dy = _MOVES[a]
            h, w = self.image.shape[:2]
            x0, y0, x1, y1 = self.rect
            f = self.settings.move_fraction
            self.cx += dx * f * (x1 - x0) / w
            self.cy += dy * f * (y1 - y0) / h
        elif a == 4:
            self.level = min(self.levels - 1, self.level + 1)
        elif a == 5:
            self.level = max(0, self.level - 1)
        self.steps += 1
        if a != self.stop:
            self._place()
        moved = (self.rect, self.level) != before
        revisit = False
        if a != self.stop:
            revisit = self._key() in self._visited
            if moved:
                self._look()
        return self.observation(), moved, revisit

    def look_at(self, level: int, cx: float, cy: float) -> np.ndarray:
        """Jump the viewport to ``level`` centred at (cx, cy) and take that glimpse.

        Not an action: for collecting training crops (perception pretraining), which are
        then exactly the glimpses the policy gets at that viewport (same clamping to the
        frame, same resampling). The glimpse enters the memory like any other; no step
        is counted.

        :param level: zoom level (clamped to 0 .. zoom_levels - 1).
        :param cx: centre x, normalised 0..1 (the viewport is then kept inside the frame).
        :param cy: centre y, likewise.
        :returns: a copy of the glimpse (G, G) uint8; :attr:`rect` holds its frame rectangle.
        """
        self.level = min(max(0, int(level)), self.levels - 1)
        self.cx, self.cy = float(cx), float(cy)
        self._place()
        self._look()
        return self._glimpses[0].copy()

    def _key(self) -> tuple[int, int, int]:
        return (self.level, self.rect[0], self.rect[1])

    def _look(self) -> None:
        """Take the glimpse at the current viewport and push it into memory."""
        x0, y0, x1, y1 = self.rect
        g = self.settings.glimpse
        h, w = self.image.shape[:2]
        crop = self.image[y0:y1, x0:x1]
        if self._glimpses.shape[0] > 1:
            self._glimpses[1:] = self._glimpses[:-1].copy()
            self._mem_geom[1:] = self._mem_geom[:-1].copy()
        if crop.shape[0] == g and crop.shape[1] == g:
            self._glimpses[0] = crop
        elif (x1 - x0, y1 - y0) == (w, h) and g == self.settings.overview:
            # The whole frame at glimpse size is the overview: do not resize it twice.
            self._glimpses[0] = self._overview[0]
        else:
            interp = cv2.INTER_AREA if crop.shape[0] >= g else cv2.INTER_LINEAR
            self._glimpses[0] = cv2.resize(crop, (g, g), interpolation=interp)
        self._mem_geom[0] = (
            x0 / w,
            y0 / h,
            (x1 - x0) / w,
            (y1 - y0) / h,
            self.level / max(1, self.levels - 1),
        )
        self._visited.add(self._key())
        if self.native:
            self.native_pixels += (x1 - x0) * (y1 - y0)
            gx0 = int(x0 / w * SEEN_GRID)
            gx1 = max(gx0 + 1, int(np.ceil(x1 / w * SEEN_GRID)))
            gy0 = int(y0 / h * SEEN_GRID)
            gy1 = max(gy0 + 1, int(np.ceil(y1 / h * SEEN_GRID)))
            self._seen[gy0:gy1, gx0:gx1] = 1.0
        self.path.append(PathPoint(float(self.cx), float(self.cy), int(self.level)))

    def observation(self) -> dict[str, np.ndarray]:
        """The current observation (fresh arrays, safe to keep)."""
        s = self._state
        h, w = self.image.shape[:2]
        x0, y0, x1, y1 = self.rect
        levels = self.levels
        s[0] = self.cx
        s[1] = self.cy
        s[2] = (x1 - x0) / w
        s[3] = (y1 - y0) / h
        s[4] = self.level / max(1, levels - 1)
        s[5] = min(1.0, self.steps / self.budget)
        s[6 : 6 + levels] = 0.0
        s[6 + self.level] = 1.0
        k = 6 + levels
        s[k : k + SEEN_GRID * SEEN_GRID] = self._seen.ravel()
        k += SEEN_GRID * SEEN_GRID
        s[k:] = self._mem_geom.ravel()
        return {
            "glimpse": self._glimpses.copy(),
            "overview": self._overview.copy(),
            "state": s.copy(),
        }

    def pixel_fraction(self) -> float:
        """Native-resolution pixels examined so far / pixels in the frame (revisits count)."""
        h, w = self.image.shape[:2]
        return self.native_pixels / float(h * w)
