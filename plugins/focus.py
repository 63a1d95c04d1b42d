"""Focus terms: did the agent look closely at the defect?

Both terms work on the defect mask's connected components (8-connected), labelled
once per episode in :meth:`reset` with ``cv2.connectedComponentsWithStats``; a step
then only counts labels inside the glimpse rectangle (a small ``bincount``), so the
cost per step does not grow with the frame.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from inspector import PROCESS, EpisodeContext, RewardTerm, StepContext, hookimpl, level_ok


class _Components:
    """Connected components of a defect mask: label image and pixel count per component."""

    def __init__(self, mask: np.ndarray | None, min_area: int = 1) -> None:
        self.labels: np.ndarray | None = None
        self.areas = np.zeros(1, dtype=np.int64)
        self.n = 0
        self.off = (0, 0)
        if mask is None:
            return
        import cv2

        m = np.ascontiguousarray(mask, dtype=np.uint8)
        # Label only the defects' bounding box: a whole-frame labelling costs milliseconds
        # at 512 px and dominated the environment's reset.
        x, y, w, h = cv2.boundingRect(m)
        if w == 0 or h == 0:
            return
        self.off = (x, y)
        n, labels, stats, _ = cv2.connectedComponentsWithStats(
            np.ascontiguousarray(m[y : y + h, x : x + w]), connectivity=8, ltype=cv2.CV_32S
        )
        areas = stats[:, cv2.CC_STAT_AREA].astype(np.int64)
        areas[0] = 0  # label 0 is the background
        if min_area > 1:
            small = np.flatnonzero(areas < min_area)
            keep = np.ones(n, dtype=bool)
            keep[small] = False
            keep[0] = True
            # Relabel so that dropped specks become background.
            remap = np.zeros(n, dtype=np.int32)
            remap[keep] = np.arange(int(keep.sum()), dtype=np.int32)
            labels = remap[labels]
            areas = np.concatenate([[0], areas[keep][1:]])
            n = int(keep.sum())
        self.labels = labels
        self.areas = areas
        self.n = n - 1

    def inside(self, rect: tuple[int, int, int, int]) -> np.ndarray:
        """Pixels of each component (index = label) inside ``rect``."""
        if self.labels is None:
            return np.zeros(1, dtype=np.int64)
        ox, oy = self.off
        x0, y0, x1, y1 = rect
        x0, x1, y0, y1 = x0 - ox, x1 - ox, y0 - oy, y1 - oy
        crop = self.labels[max(0, y0) : max(0, y1), max(0, x0) : max(0, x1)]
        return np.bincount(crop.ravel(), minlength=self.n + 1)


class FocusDefect(RewardTerm):
    """Pays ``reward`` once per defect component the agent focuses on.

    A component counts as focused when a glimpse at level >= ``min_level`` contains at
    least ``min_overlap`` of its pixels, or when the component fills at least
    ``min_cover`` of the glimpse (a long scratch never fits in one native glimpse).

    :param reward: paid per focused component.
    :param min_level: zoom level from which a glimpse counts (-1: native only).
    :param min_overlap: fraction of the component's pixels that must be inside the glimpse.
    :param min_cover: fraction of the glimpse the component must fill (alternative rule).
    :param min_area: components smaller than this many pixels are ignored (mask specks).
    """

    name = "focus_defect"
    channel = PROCESS
    summary = "paid once per defect component focused at close zoom"
    reward_sign: ClassVar[int] = 1
    param_ranges: ClassVar[dict[str, tuple[float, float]]] = {
        "min_level": (-8, 16),
        "min_overlap": (0.0, 1.0),
        "min_cover": (0.0, 1.0),
        "min_area": (1, 1_000_000),
    }

    def __init__(
        self,
        reward: float = 0.3,
        min_level: int = -1,
        min_overlap: float = 0.5,
        min_cover: float = 0.25,
        min_area: int = 1,
    ) -> None:
        super().__init__(reward)
        self.min_level = int(min_level)
        self.min_overlap = float(min_overlap)
        self.min_cover = float(min_cover)
        self.min_area = int(min_area)
        self._cc = _Components(None)
        self._paid = np.zeros(1, dtype=bool)

    def reset(self, episode: EpisodeContext) -> None:
        self._cc = _Components(episode.defect_mask, self.min_area)
        self._paid = np.zeros(self._cc.n + 1, dtype=bool)
        self._paid[0] = True  # the background is never paid

    def focused(self, rect: tuple[int, int, int, int]) -> np.ndarray:
        """Boolean per component label: focused by a glimpse over ``rect``."""
        inside = self._cc.inside(rect)
        x0, y0, x1, y1 = rect
        area = max(1, (x1 - x0) * (y1 - y0))
        with np.errstate(divide="ignore", invalid="ignore"):
            overlap = np.where(self._cc.areas > 0, inside / np.maximum(self._cc.areas, 1), 0.0)
        hit = (overlap >= self.min_overlap) | (inside / area >= self.min_cover)
        hit[0] = False
        return hit & (inside > 0)

    def __call__(self, ctx: StepContext) -> float:
        if self._cc.n == 0 or not level_ok(ctx, self.min_level):
            return 0.0
        new = self.focused(ctx.rect) & ~self._paid
        count = int(np.count_nonzero(new))
        if not count:
            return 0.0
        self._paid |= new
        return float(self.reward) * count


class FocusQuality(RewardTerm):
    """A shaping potential: how well the current glimpse frames the best-covered defect.

    Phi = scale * max over components of (fraction of the component inside the glimpse)
    * level / (levels - 1); the zoom weight makes the same framing worth more up close.
    The number of zoom levels comes from ``ctx.extra['levels']`` (set by the environment)
    or the ``zoom_levels`` parameter; without either only native glimpses count (weight 1,
    others 0). At reset the viewport is the level-0 overview, whose weight is 0.

    :param reward: ``scale`` of the potential (the profile's ``rrm.shaping.scale``).
    :param zoom_levels: number of zoom levels when ``ctx.extra`` does not say (0: unknown).
    """

    name = "focus_quality"
    channel = PROCESS
    is_potential = True
    summary = "potential: fraction of the best-framed defect in view, weighted by zoom"
    reward_sign: ClassVar[int] = 1
    param_ranges: ClassVar[dict[str, tuple[float, float]]] = {"zoom_levels": (0, 16)}

    def __init__(self, reward: float = 1.0, zoom_levels: int = 0) -> None:
        super().__init__(reward)
        self.zoom_levels = int(zoom_levels)
        self._cc = _Components(None)
        self._prev = 0.0

    def reset(self, episode: EpisodeContext) -> None:
        self._cc = _Components(episode.defect_mask)
        self._prev = 0.0

    def _weight(self, ctx: StepContext) -> float:
        levels = ctx.extra.get("levels") or self.zoom_levels
        if not levels:
            return 1.0 if ctx.native else 0.0
        if levels <= 1:
            return 1.0
        return min(1.0, max(0.0, ctx.level / (levels - 1)))

    def potential(self, ctx: StepContext | EpisodeContext) -> float:
        if isinstance(ctx, EpisodeContext):
            self.reset(ctx)
            return 0.0  # the initial viewport is the whole frame at level 0
        if self._cc.n == 0:
            return 0.0
        w = self._weight(ctx)
        if w == 0.0:
            return 0.0
        inside = self._cc.inside(ctx.rect)[1:]
        best = float(np.max(inside / np.maximum(self._cc.areas[1:], 1)))
        return float(self.reward) * best * w

    def __call__(self, ctx: StepContext) -> float:
        # As a plain term (in ``terms:``) it pays the change of Phi since the last step
        # (undiscounted; the episode's sum is the last Phi). Shaping proper, with gamma and
        # Phi(terminal) = 0, is the RRM's job when the term is ``rrm.shaping.potential``.
        phi = self.potential(ctx)
        delta, self._prev = phi - self._prev, phi
        return delta


TERMS: tuple[type[RewardTerm], ...] = (FocusDefect, FocusQuality)


@hookimpl
def register_reward_terms(register) -> None:
    """Register the focus terms."""
    for cls in TERMS:
        register(cls.name, cls)
