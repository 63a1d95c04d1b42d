"""The footage store's records and the pure functions around them.

Frame ids (content hashes), the split a hash falls in, PNG encoding, atomic writes,
the index row as a :class:`FrameRecord`, and the order of label sources. Split from
:mod:`inspector.footage.store` (which re-exports these names) to keep both small.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.files import sha256_bytes
from inspector.files import write_atomic as write_atomic  # the store's writes go through it
from inspector.frames import Box

#: Where a label came from, weakest first: a later, stronger source may replace it.
#: An operator's label may name the operator: ``operator:<name>`` (see :func:`source_kind`).
LABEL_SOURCES: tuple[str, ...] = ("station-verdict", "import", "operator")
#: What an operator's name may look like in ``operator:<name>``.
OPERATOR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}$")
#: Default held-out threshold on the first byte of the frame hash (51/256 = 19.9 %).
DEFAULT_HELDOUT_THRESHOLD = 51
#: Default width of the val band just above the held-out one (26/256 = 10.2 %).
DEFAULT_VAL_WIDTH = 26
#: The store's splits: ``train`` trains, ``val`` chooses (checkpoints, operating
#: points), ``heldout`` gives the final figure and the promotion gate.
SPLITS: tuple[str, ...] = ("train", "val", "heldout")


def frame_hash(gray: np.ndarray) -> str:
    """The frame id: sha256 of ``b"gray8:<W>x<H>:"`` followed by the pixel bytes (row-major).

    Hashing the decoded pixels rather than a file's bytes makes the id independent of
    the container and the encoder, so a frame the station wrote as PNG and the same
    frame imported from a JPEG replay are one frame.

    :param gray: a 2-D uint8 array.
    """
    g = np.ascontiguousarray(gray, dtype=np.uint8)
    if g.ndim != 2:
        raise ValueError(f"frame_hash expects a 2-D gray image, got shape {g.shape}")
    h, w = g.shape
    return sha256_bytes(f"gray8:{w}x{h}:".encode() + g.tobytes())


def split_of(
    frame_id: str,
    threshold: int = DEFAULT_HELDOUT_THRESHOLD,
    val_width: int = DEFAULT_VAL_WIDTH,
) -> str:
    """The frame's split, from the first byte ``b`` of its hash alone.

    ``heldout`` when ``b < threshold``, ``val`` when ``threshold <= b < threshold +
    val_width``, else ``train``. The split depends on nothing but the frame's content,
    so it is the same whatever order frames were imported in, and adding the val band
    to an older store moves only ``train`` frames (held-out ones never change).

    :param frame_id: the hex frame hash.
    :param threshold: 0..256; 51 holds out about 20 %.
    :param val_width: 0..256 - threshold; 26 gives val about 10 %.
    """
    b = int(frame_id[:2], 16)
    if b < threshold:
        return "heldout"
    return "val" if b < threshold + val_width else "train"


def encode_png(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of a uint8 image.

    Huffman-only deflate after PNG's SUB row filter: on camera frames (sensor noise
    everywhere, little repetition for LZ77 to find) Huffman-only is both smaller and
    about three times faster than zlib level 3 (measured on 512x512 synthetic panels:
    158 KB in 5 ms against 182 KB in 14 ms), and one fixed filter instead of trying all
    five per row saves another fifth of the time at the same size (5.1 ms against
    6.5 ms, 170 KB both).
    """
    import cv2

    params = [cv2.IMWRITE_PNG_COMPRESSION, 1,
              cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_HUFFMAN_ONLY]  # fmt: skip
    if hasattr(cv2, "IMWRITE_PNG_FILTER"):  # OpenCV >= 4.11; older ones filter adaptively
        params += [cv2.IMWRITE_PNG_FILTER, cv2.IMWRITE_PNG_FILTER_SUB]
    ok, buf = cv2.imencode(".png", image, params)
    if not ok:
        raise FootageError("PNG encoding failed")
    return buf.tobytes()


def frame_relpath(frame_id: str, suffix: str = ".png") -> str:
    """``frames/ab/<frame_id><suffix>``: the two-character fan-out keeps folders small."""
    return f"frames/{frame_id[:2]}/{frame_id}{suffix}"


def boxes_to_json(boxes: Sequence[Box]) -> str | None:
    """Boxes as a JSON list of ``[x0, y0, x1, y1, label]`` (None when there are none)."""
    if not boxes:
        return None
    return json.dumps([[b.x0, b.y0, b.x1, b.y1, b.label] for b in boxes])


def boxes_from_json(text: str | None) -> tuple[Box, ...]:
    """Inverse of :func:`boxes_to_json`."""
    if not text:
        return ()
    return tuple(Box(int(a), int(b), int(c), int(d), str(e)) for a, b, c, d, e in json.loads(text))


@dataclass
class FrameRecord:
    """One row of the index.

    :param frame_id: the content hash.
    :param width: frame width in pixels.
    :param height: frame height in pixels.
    :param image_path: the PNG, relative to the store.
    :param mask_path: the mask PNG, relative to the store, or None.
    :param boxes: defect boxes.
    :param label: the label, or None when unlabelled.
    :param label_source: ``import``, ``station-verdict`` or ``operator``.
    :param split: ``train`` or ``heldout`` (by hash).
    :param source_file: the file it was imported from.
    :param source_format: the importer (``csv``, ``masks``, ``station``, ...).
    :param source_root: the folder or file given to the import.
    :param source_split: the split the source (e.g. a manifest) gave it: provenance only.
    :param imported_at: when it entered the store (seconds since the epoch).
    :param result: the station's Result JSON (station frames), or None.
    :param station_label: the class the station declared, or None.
    :param confidence: the station's confidence in that class, or None.
    """

    frame_id: str
    width: int
    height: int
    image_path: str
    mask_path: str | None = None
    boxes: tuple[Box, ...] = ()
    label: str | None = None
    label_source: str | None = None
    split: str = "train"
    source_file: str | None = None
    source_format: str | None = None
    source_root: str | None = None
    source_split: str | None = None
    imported_at: float = 0.0
    result: dict[str, Any] | None = None
    station_label: str | None = None
    confidence: float | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> FrameRecord:
        """Build from an index row."""
        return cls(
            frame_id=row["frame_id"],
            width=row["width"],
            height=row["height"],
            image_path=row["image_path"],
            mask_path=row["mask_path"],
            boxes=boxes_from_json(row["boxes"]),
            label=row["label"],
            label_source=row["label_source"],
            split=row["split"],
            source_file=row["source_file"],
            source_format=row["source_format"],
            source_root=row["source_root"],
            source_split=row["source_split"],
            imported_at=row["imported_at"],
            result=json.loads(row["result_json"]) if row["result_json"] else None,
            station_label=row["station_label"],
            confidence=row["confidence"],
        )


@dataclass
class AddOutcome:
    """What :meth:`FootageStore.add` did: ``new``, ``present`` (nothing changed) or ``updated``."""

    frame_id: str
    status: str
    changes: list[str] = field(default_factory=list)


def source_kind(source: str | None) -> str | None:
    """The kind of a label source: ``operator:alice`` -> ``operator``; others unchanged."""
    if source is None:
        return None
    return source.split(":", 1)[0]


def check_source(source: str) -> str:
    """``source`` when it is a label source (``import``, ``operator``, ``operator:<name>``...).

    :raises FootageError: unknown kind, or a bad operator name.
    """
    kind, sep, name = source.partition(":")
    if kind not in LABEL_SOURCES or (sep and (kind != "operator" or not OPERATOR_RE.match(name))):
        raise FootageError(
            f"label source must be one of {', '.join(LABEL_SOURCES)} or operator:<name> "
            f"(letters, digits, _ . @ -), got {source!r}"
        )
    return source


def stronger(new: str | None, old: str | None) -> bool:
    """Whether a label from ``new`` may replace one from ``old``."""
    if new is None:
        return False
    if old is None:
        return True
    rank = LABEL_SOURCES.index
    return rank(source_kind(new) or "") > rank(source_kind(old) or "")


def binary_mask(mask: np.ndarray) -> np.ndarray:
    m = mask if mask.ndim == 2 else mask[:, :, 0]
    return np.where(m > 0, np.uint8(255), np.uint8(0))
