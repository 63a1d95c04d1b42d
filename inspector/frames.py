"""Frames and their ground truth: what camera drivers yield."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from inspector.imageio import to_gray


@dataclass(frozen=True)
class Box:
    """An axis-aligned defect box in frame pixels (x0, y0 inclusive; x1, y1 exclusive).

    :param x0: left edge.
    :param y0: top edge.
    :param x1: right edge (exclusive).
    :param y1: bottom edge (exclusive).
    :param label: the defect class of the box.
    """

    x0: int
    y0: int
    x1: int
    y1: int
    label: str

    @property
    def area(self) -> int:
        """Area in pixels (0 for a degenerate box)."""
        return max(0, self.x1 - self.x0) * max(0, self.y1 - self.y0)


@dataclass
class Truth:
    """What a frame really shows, for training and evaluation.

    :param label: the part's class (``ok`` or a defect class).
    :param mask: optional uint8 mask, same height and width as the image, >0 on defects.
    :param boxes: optional defect boxes.
    """

    label: str
    mask: np.ndarray | None = None
    boxes: tuple[Box, ...] = ()

    def defect_mask(self, shape: tuple[int, int]) -> np.ndarray | None:
        """Return a boolean defect mask of ``shape``: the mask, else the boxes painted.

        :param shape: (height, width) of the frame.
        :returns: None when the truth has neither mask nor boxes.
        """
        if self.mask is not None:
            return self.mask > 0
        if not self.boxes:
            return None
        out = np.zeros(shape, dtype=bool)
        for b in self.boxes:
            out[max(0, b.y0) : max(0, b.y1), max(0, b.x0) : max(0, b.x1)] = True
        return out


@dataclass
class Frame:
    """One image from a camera.

    :param image: uint8 array, (H, W) grayscale or (H, W, 3) BGR.
    :param part_id: identifier of the inspected part.
    :param timestamp: capture time, seconds since the epoch.
    :param source: where it came from (driver name and file, URL or seed).
    :param truth: optional ground truth.
    """

    image: np.ndarray
    part_id: str
    timestamp: float
    source: str
    truth: Truth | None = None
    meta: dict = field(default_factory=dict)

    @property
    def gray(self) -> np.ndarray:
        """The image as a 2-D uint8 array (converted from BGR when needed)."""
        return to_gray(self.image)

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width)."""
        return int(self.image.shape[0]), int(self.image.shape[1])
