"""The magnetic-tile frames, their native tiles and their full-frame resamplings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.studies.quality_magnetic_tile.settings import FULL_SIZE, JITTER, MIN_OVERLAP, TILE


# -- data -----------------------------------------------------------------------------
@dataclass
class Sample:
    """One labelled frame.

    :param image: gray uint8 frame.
    :param mask: boolean defect mask (all False on free frames), or None.
    :param label: the frame's class.
    """

    image: np.ndarray
    mask: np.ndarray | None
    label: str


def camera_params(root: str | Path, split: str) -> dict[str, str]:
    """``folder`` driver parameters for one split of the data set."""
    return {"path": str(root), "manifest": "splits.csv", "split": split}


def load_split(root: str | Path, split: str, limit: int | None = None) -> list[Sample]:
    """The frames of ``split`` through the ``folder`` driver (the agent's camera).

    :param limit: keep only the first ``limit`` readable frames (tests).
    """
    from inspector.camera import open_camera
    from inspector.scan import to_gray

    driver = open_camera("folder", camera_params(root, split))
    out: list[Sample] = []
    try:
        for i in range(len(driver)):
            if limit is not None and len(out) >= limit:
                break
            f = driver.load(i)
            if f is None or f.truth is None:
                continue
            img = to_gray(f.image)
            out.append(Sample(img, f.truth.defect_mask(img.shape[:2]), f.truth.label))
    finally:
        driver.close()
    return out


def tile_origins(h: int, w: int, tile: int = TILE) -> list[tuple[int, int]]:
    """Top-left corners (y, x) of tiles covering an h x w frame.

    ceil(side / tile) tiles per axis, evenly spread so the last one ends at the edge
    (neighbours overlap rather than leaving a strip unseen). A side shorter than the
    tile gets one tile at 0 (the frame is padded by :func:`frame_tiles`).
    """

    def axis(n: int) -> list[int]:
        if n <= tile:
            return [0]
        k = -(-n // tile)
        return sorted({int(round(v)) for v in np.linspace(0, n - tile, k)})

    return [(y, x) for y in axis(h) for x in axis(w)]


def _pad(image: np.ndarray, tile: int) -> np.ndarray:
    h, w = image.shape[:2]
    if h >= tile and w >= tile:
        return image
    return np.pad(image, ((0, max(0, tile - h)), (0, max(0, tile - w))), mode="edge")


def frame_tiles(image: np.ndarray, tile: int = TILE) -> tuple[np.ndarray, float]:
    """All tiles of a frame as [n, tile, tile] uint8, and the pixel fraction they examine."""
    h, w = image.shape[:2]
    img = _pad(image, tile)
    origins = tile_origins(h, w, tile)
    tiles = np.stack([img[y : y + tile, x : x + tile] for y, x in origins])
    return tiles, len(origins) * tile * tile / float(h * w)


def tile_dataset(
    samples: Sequence[Sample],
    classes: Sequence[str],
    ok_class: str,
    rng: np.random.Generator,
    tile: int = TILE,
    jitter: int = JITTER,
) -> tuple[np.ndarray, np.ndarray]:
    """Training tiles and labels: every grid tile plus ``jitter`` crops per defect frame."""
    idx = {c: i for i, c in enumerate(classes)}
    xs: list[np.ndarray] = []
    ys: list[int] = []
    for s in samples:
        img = _pad(s.image, tile)
        mask = (
            _pad(s.mask.astype(np.uint8), tile)
            if s.mask is not None
            else np.zeros(img.shape, dtype=np.uint8)
        )
        defect = s.label != ok_class
        for y, x in tile_origins(*s.image.shape[:2], tile):
            n = int(mask[y : y + tile, x : x + tile].sum())
            if defect and n >= MIN_OVERLAP:
                ys.append(idx[s.label])
            elif n == 0:
                ys.append(idx[ok_class])
            else:
                continue  # a sliver of defect: neither clearly defective nor clearly free
            xs.append(img[y : y + tile, x : x + tile])
        if defect and mask.any() and jitter:
            py, px = np.nonzero(mask)
            h, w = img.shape
            for k in rng.integers(len(py), size=jitter):
                y = int(np.clip(py[k] - rng.integers(tile), 0, h - tile))
                x = int(np.clip(px[k] - rng.integers(tile), 0, w - tile))
                if mask[y : y + tile, x : x + tile].sum() >= MIN_OVERLAP:
                    xs.append(img[y : y + tile, x : x + tile])
                    ys.append(idx[s.label])
    return np.stack(xs).astype(np.uint8), np.asarray(ys, dtype=np.int64)


def full_frames(samples: Sequence[Sample], size: int = FULL_SIZE) -> np.ndarray:
    """Every frame resized to size x size (anti-aliased, like the agent's overview)."""
    import cv2

    return np.stack(
        [cv2.resize(s.image, (size, size), interpolation=cv2.INTER_AREA) for s in samples]
    )
