"""The ``synthetic`` camera: procedural display panels with line and point defects.

What a panel looks like to the camera: a pixel grid (sub-pixel stripes and a
dark black matrix at a pitch of 3-5 camera pixels), uneven illumination and
mura (low- and mid-frequency brightness blobs), and sensor noise. Defects:

* ``line``: a thin bright or dark line (``line_width`` px), partial length,
  horizontal, vertical or slightly oblique. Long, so it survives shrinking the
  frame to an overview.
* ``point``: stuck or dead pixels and small clusters (``point_size`` px a side).
  Their contrast is capped so that in a 64-px overview (``cv2.INTER_AREA``) they
  stay below the overview's own texture/noise fluctuation: only a glimpse at
  native resolution shows them. That is what makes focusing worth learning.

Frame ``i`` is a pure function of ``(seed, i, params)``: the texture, mura and
noise banks come from ``default_rng([BANK, seed, size])`` and every per-frame
choice from ``default_rng([FRAME, seed, i])``; pixels are built with integer
arithmetic and IEEE ``+ - *`` only (no transcendental functions, no BLAS, no
OpenCV), so the bytes are the same on every machine. Speed comes from composing
precomputed banks with random offsets and flips instead of generating noise per
frame.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

from inspector import Box, CameraDriver, CameraError, Frame, Truth, hookimpl

#: Classes the synthetic camera produces, the ok class first.
CLASSES: tuple[str, ...] = ("ok", "line", "point")
#: Defect classes ``class_mix`` may name.
DEFECT_CLASSES: tuple[str, ...] = ("line", "point")
#: Side of the overview the point-invisibility guarantee refers to.
OVERVIEW = 64
#: Lower bound, by design, of the 64-px overview's local fluctuation (gray levels):
#: the std of ``overview - blur(overview)`` that mura, grid moire and noise leave.
#: Point contrast is capped against it (``POINT_MARGIN`` of it at most).
OVERVIEW_FLOOR = 3.0
POINT_MARGIN = 0.7

_BANK_KEY = 0xBA4C
_FRAME_KEY = 0x5EED
_PITCHES = (3, 4, 5)
_FIELDS = 6


def _smoothstep_axis(n: int, cell: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid index and smoothstep weight of each of ``n`` positions for a grid of ``cell`` px."""
    pos = np.arange(n)
    i0 = pos // cell
    t = (pos % cell).astype(np.float64) / float(cell)
    return i0, t * t * (3.0 - 2.0 * t)


def _smooth_field(rng: np.random.Generator, h: int, w: int, cell: int) -> np.ndarray:
    """A smooth random field in [-1, 1]: a coarse random grid, smoothstep-interpolated.

    Only ``+ - *`` so that the result is bit-identical everywhere.
    """
    grid = rng.uniform(-1.0, 1.0, size=(h // cell + 2, w // cell + 2))
    ix, tx = _smoothstep_axis(w, cell)
    rows = grid[:, ix] * (1.0 - tx) + grid[:, ix + 1] * tx
    iy, ty = _smoothstep_axis(h, cell)
    return rows[iy, :] * (1.0 - ty)[:, None] + rows[iy + 1, :] * ty[:, None]


def _check_range(name: str, value: tuple, lo: float, hi: float) -> tuple:
    if len(value) != 2:
        raise CameraError(f"synthetic: {name} expects two values LO,HI, got {value!r}")
    a, b = value
    if not (lo <= a <= b <= hi):
        raise CameraError(f"synthetic: {name} expects {lo} <= LO <= HI <= {hi}, got {a},{b}")
    return (a, b)


class SyntheticCamera(CameraDriver):
    """Procedural display panels with ``ok``, ``line`` and ``point`` classes.

    :param size: side of the square frame in pixels (128 to 2048).
    :param seed: the data set's seed (>= 0); frame ``i`` depends only on seed, ``i`` and
        the parameters.
    :param count: number of frames; None means endless.
    :param defect_rate: probability that a frame has a defect (0 to 1).
    :param class_mix: relative weights of the defect classes (``line:0.5,point:0.5``).
    :param contrast: range LO,HI of defect contrast, as a fraction of the panel's
        brightness (a line at 0.3 is 30 % brighter or darker than the panel around it).
        Point contrast is further capped so that points stay invisible in a 64-px
        overview.
    :param point_size: range LO,HI of the side of a point cluster in pixels.
    :param line_width: width of line defects in pixels (1 to 4).
    :param noise: sensor noise std in gray levels (0 to 20).
    :param grid: depth of the pixel grid (sub-pixel stripes and black matrix), 0 (a
        flat panel) to 1 (default, a real panel's grid). A shallower grid makes small
        points easier to tell from the texture at native and intermediate zoom; their
        overview invisibility does not depend on it.
    :param invisible_at: points stay invisible when the whole frame is shrunk to this many
        pixels (INTER_AREA); default 64. Set it to the agent's overview size so that
        finding points needs focusing.
    """

    has_truth = True

    def __init__(
        self,
        size: int = 512,
        seed: int = 0,
        count: int | None = None,
        defect_rate: float = 0.67,
        class_mix: dict[str, float] | None = None,
        contrast: tuple[float, float] = (0.25, 0.6),
        point_size: tuple[int, int] = (1, 2),
        line_width: int = 1,
        noise: float = 3.0,
        invisible_at: int = OVERVIEW,
        grid: float = 1.0,
    ) -> None:
        super().__init__()
        if not 128 <= size <= 2048:
            raise CameraError(f"synthetic: size must be 128 to 2048, got {size}")
        if seed < 0:
            raise CameraError(f"synthetic: seed must be >= 0, got {seed}")
        if count is not None and count < 0:
            raise CameraError(f"synthetic: count must be >= 0 or none, got {count}")
        if not 0.0 <= defect_rate <= 1.0:
            raise CameraError(f"synthetic: defect_rate must be 0 to 1, got {defect_rate}")
        mix = dict(class_mix) if class_mix is not None else {"line": 0.5, "point": 0.5}
        unknown = sorted(set(mix) - set(DEFECT_CLASSES))
        if unknown:
            raise CameraError(
                f"synthetic: class_mix names unknown class(es) {', '.join(unknown)}; "
                f"expected: {', '.join(DEFECT_CLASSES)}"
            )
        if any(v < 0 for v in mix.values()) or sum(mix.values()) <= 0:
            raise CameraError("synthetic: class_mix weights must be >= 0 and not all 0")
        self.contrast = tuple(float(c) for c in _check_range("contrast", tuple(contrast), 0, 1))
        self.point_size = tuple(int(c) for c in _check_range("point_size", tuple(point_size), 1, 8))
        if not 1 <= line_width <= 4:
            raise CameraError(f"synthetic: line_width must be 1 to 4, got {line_width}")
        if not 0 <= noise <= 20:
            raise CameraError(f"synthetic: noise must be 0 to 20, got {noise}")
        if not 0.0 <= grid <= 1.0:
            raise CameraError(f"synthetic: grid must be 0 to 1, got {grid}")
        self.grid = float(grid)
        if not 16 <= invisible_at <= size:
            raise CameraError(f"synthetic: invisible_at must be 16 to size, got {invisible_at}")
        self.invisible_at = int(invisible_at)
        self.size = int(size)
        self.seed = int(seed)
        self.count = count
        self.defect_rate = float(defect_rate)
        total = float(sum(mix.values()))
        self._mix = [(k, mix.get(k, 0.0) / total) for k in DEFECT_CLASSES]
        self.line_width = int(line_width)
        self.noise = float(noise)
        self.classes = CLASSES
        self._build_banks()

    # -- banks (per instance, from the seed) -------------------------------------------------

    def _build_banks(self) -> None:
        s = self.size
        rng = np.random.default_rng([_BANK_KEY, self.seed, s])
        # Pixel grid: sub-pixel stripes across a display pixel, a dark row of black matrix.
        self._textures = []
        for p in _PITCHES:
            cols = 1.0 - np.sort(rng.uniform(0.0, 0.12, size=p))
            if p > 3:
                cols[-1] = 0.87 - rng.uniform(0.0, 0.03)  # the gap between pixels
            rows = np.ones(p)
            rows[-1] = 0.86 + rng.uniform(0.0, 0.03)
            depth = rows[:, None] * cols[None, :]
            if self.grid != 1.0:  # the default keeps its exact bytes
                depth = 1.0 - self.grid * (1.0 - depth)
            tile = np.rint(255.0 * depth).astype(np.uint8)
            reps = (s + p) // p + 1
            self._textures.append(
                np.ascontiguousarray(np.tile(tile, (reps, reps))[: s + p, : s + p])
            )
        # Illumination and mura: a slow gradient plus mid-sized blobs, scaled with the
        # frame so that the overview looks alike at every size.
        m = s // 4
        self._margin = m
        self._fields = []
        self._levels = []
        for _ in range(_FIELDS):
            mean = rng.uniform(165.0, 215.0)
            slow = _smooth_field(rng, s + m, s + m, max(16, s // 2)) * rng.uniform(12.0, 28.0)
            blobs = _smooth_field(rng, s + m, s + m, max(6, s // 24)) * rng.uniform(15.0, 20.0)
            field = np.clip(np.rint(mean + slow + blobs), 40.0, 255.0).astype(np.uint8)
            self._fields.append(field)
        tex_mean = float(np.mean([t.mean() for t in self._textures]))
        self._levels = [float(f.mean()) * tex_mean / 256.0 for f in self._fields]
        # Sensor noise: a sum of four uniform bytes is close to Gaussian and exact.
        if self.noise > 0:
            acc = np.zeros((s + m, s + m), dtype=np.int16)
            for _ in range(4):
                acc += rng.integers(0, 256, size=acc.shape, dtype=np.uint8)
            std = float(np.sqrt(4 * (256.0**2 - 1) / 12.0))
            self._noise = np.rint((acc.astype(np.float64) - 510.0) * (self.noise / std)).astype(
                np.int16
            )
        else:
            self._noise = None

    # -- frames ------------------------------------------------------------------------------

    def __len__(self) -> int:
        if self.count is None:
            raise TypeError("an endless synthetic camera (count=None) has no length")
        return int(self.count)

    def describe(self) -> str:
        """One line for start-up banners."""
        n = "endless" if self.count is None else f"{self.count} frames"
        return f"synthetic panels {self.size}x{self.size}, seed {self.seed}, {n}"

    def _rng(self, i: int) -> np.random.Generator:
        return np.random.default_rng([_FRAME_KEY, self.seed, i])

    def render(self, i: int, *, defects: bool = True) -> tuple[np.ndarray, Truth]:
        """Render frame ``i``: the image and its truth.

        :param i: frame index (>= 0, < count when count is set).
        :param defects: False renders the same panel without its defects (the truth
            still says what would be there); tests compare the two.
        :raises IndexError: ``i`` is out of range.
        """
        if i < 0 or (self.count is not None and i >= self.count):
            raise IndexError(f"synthetic frame {i} out of range (count={self.count})")
        rng = self._rng(i)
        s, m = self.size, self._margin
        k = int(rng.integers(len(_PITCHES)))
        p = _PITCHES[k]
        oy, ox = (int(v) for v in rng.integers(0, p, size=2))
        tex = self._textures[k][oy : oy + s, ox : ox + s]
        j = int(rng.integers(_FIELDS))
        fy, fx, flip = (int(v) for v in rng.integers(0, [m + 1, m + 1, 4]))
        field = self._fields[j][fy : fy + s, fx : fx + s]
        field = field[:: 1 - 2 * (flip & 1), :: 1 - (flip & 2)]
        acc = np.multiply(tex, field, dtype=np.uint16)
        acc >>= 8
        img16 = acc.view(np.int16)  # values <= 254, so the bits read the same signed
        if self._noise is not None:
            ny, nx, nflip = (int(v) for v in rng.integers(0, [m + 1, m + 1, 4]))
            noise = self._noise[ny : ny + s, nx : nx + s]
            img16 += noise[:: 1 - 2 * (nflip & 1), :: 1 - (nflip & 2)]
            np.clip(img16, 0, 255, out=img16)
        img = img16.astype(np.uint8)

        u = float(rng.random())
        label = "ok"
        if u < self.defect_rate:
            v, acc_w = float(rng.random()), 0.0
            label = self._mix[-1][0]
            for name, w in self._mix:
                acc_w += w
                if v < acc_w and w > 0:
                    label = name
                    break
        mask = np.zeros((s, s), dtype=np.uint8)
        boxes: list[Box] = []
        level = self._levels[j]
        if label == "line":
            n = 1 + int(rng.random() < 0.2)
            for _ in range(n):
                boxes.append(self._line(rng, img, mask, level, paint=defects))
        elif label == "point":
            n = int(rng.integers(1, 4))
            taken: list[tuple[int, int]] = []
            for _ in range(n):
                box = self._point(rng, img, mask, level, taken, paint=defects)
                if box is not None:
                    boxes.append(box)
        return img, Truth(label=label, mask=mask, boxes=tuple(boxes))

    def _delta(self, rng: np.random.Generator, level: float) -> int:
        """A signed defect contrast in gray levels."""
        sign = 1 if rng.random() < 0.5 else -1
        return sign * max(1, int(round(rng.uniform(*self.contrast) * level)))

    def _line(
        self, rng: np.random.Generator, img: np.ndarray, mask: np.ndarray, level: float, paint: bool
    ) -> Box:
        s, w = self.size, self.line_width
        kind = int(rng.integers(5))  # 0-1 horizontal, 2-3 vertical, 4 oblique
        length = int(rng.integers(s // 5, int(s * 0.9)))
        slope = 0.0
        if kind == 4:
            slope = float(rng.uniform(0.01, 0.06)) * (1 if rng.random() < 0.5 else -1)
        start = int(rng.integers(0, s - length + 1))
        drift = int(np.ceil(abs(slope) * length))
        lo = 4 + (drift if slope < 0 else 0)
        hi = s - 4 - w - (drift if slope > 0 else 0)
        cross = int(rng.integers(lo, max(lo + 1, hi)))
        delta = self._delta(rng, level)
        t = np.arange(length)
        along = start + t
        across = cross + np.floor(t * slope + 0.5).astype(np.int64)
        across = np.concatenate([across + d for d in range(w)])
        along = np.tile(along, w)
        ys, xs = (along, across) if kind in (2, 3) else (across, along)
        if paint:
            vals = img[ys, xs].astype(np.int16) + delta
            img[ys, xs] = np.clip(vals, 0, 255).astype(np.uint8)
        mask[ys, xs] = 255
        return Box(int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1, "line")

    def point_cap(self, area: int) -> float:
        """Largest point contrast (gray levels) that stays invisible in the overview.

        A cluster of ``area`` pixels shifts its overview pixel by about
        ``delta * area / f**2`` (``f`` = size / invisible_at); the cap keeps that below
        ``POINT_MARGIN * OVERVIEW_FLOOR``.

        :param area: the cluster's area in pixels.
        """
        f2 = (self.size / self.invisible_at) ** 2
        return POINT_MARGIN * OVERVIEW_FLOOR * f2 / max(1, area)

    def _point(
        self,
        rng: np.random.Generator,
        img: np.ndarray,
        mask: np.ndarray,
        level: float,
        taken: list[tuple[int, int]],
        paint: bool,
    ) -> Box | None:
        s = self.size
        lo, hi = self.point_size
        h, w = (int(v) for v in rng.integers(lo, hi + 1, size=2))
        y, x = (int(v) for v in rng.integers(4, s - 4 - max(h, w), size=2))
        delta = self._delta(rng, level)
        cap = self.point_cap(h * w)
        if abs(delta) > cap:
            delta = int(np.sign(delta)) * max(1, int(cap))
        # Two points in one overview cell would add up; keep them apart instead.
        sep = 2 * max(1, s // self.invisible_at)
        if any(abs(y - ty) < sep and abs(x - tx) < sep for ty, tx in taken):
            return None
        taken.append((y, x))
        if paint:
            patch = img[y : y + h, x : x + w].astype(np.int16) + delta
            img[y : y + h, x : x + w] = np.clip(patch, 0, 255).astype(np.uint8)
        mask[y : y + h, x : x + w] = 255
        return Box(x, y, x + w, y + h, "point")

    def load(self, i: int) -> Frame:
        """Frame ``i`` (random access; the training environment samples by index).

        :param i: frame index.
        :raises IndexError: out of range.
        """
        img, truth = self.render(i)
        self.stats.frames_read += 1
        return Frame(
            image=img,
            part_id=f"syn-{self.seed}-{i}",
            timestamp=time.time(),
            source=f"synthetic:seed={self.seed}",
            truth=truth,
            meta={"index": i, "seed": self.seed},
        )

    def frames(self) -> Iterator[Frame]:
        """Frames 0, 1, 2, ... (up to ``count``, or forever)."""
        i = 0
        while self.count is None or i < self.count:
            yield self.load(i)
            i += 1


@hookimpl
def register_camera_drivers(register: Callable[..., None]) -> None:
    """Register the ``synthetic`` driver."""
    register("synthetic", SyntheticCamera)
