"""What every annotation reader shares: the record, path confinement, bounds, boxes.

See :mod:`inspector.annotations` for the rules annotation files are read under.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from inspector.errors import FootageError
from inspector.frames import Box
from inspector.imageio import IMAGE_SUFFIXES

#: The label of an image without defects when the labels come from boxes.
OK_CLASS = "ok"

#: Sub-folder names that hold masks rather than images.
MASK_DIRS: tuple[str, ...] = ("masks", "mask", "Masks", "ground_truth", "gt")

#: Layout names understood by :func:`discover`.
LAYOUTS: tuple[str, ...] = ("auto", "flat", "classes", "masks", "manifest", "voc", "coco")

#: The largest annotation file (CSV, XML, JSON) read, in bytes.
MAX_ANNOTATION_BYTES = 256 * 1024 * 1024

#: The longest path an annotation may name (characters).
MAX_PATH_CHARS = 4096

#: The largest CSV field (characters); csv's own default limit is 128 KiB.
MAX_CSV_FIELD = 64 * 1024

#: ``(where, reason)`` of each thing skipped while reading annotations.
Skips = list[tuple[str, str]]

log = logging.getLogger("inspector.annotations")


@dataclass(frozen=True)
class Record:
    """One annotated image.

    :param image: the image file.
    :param label: its class, or None when the footage is unlabelled.
    :param mask: the mask file (255 on defects), or None.
    :param boxes: defect boxes in image pixels.
    :param split: ``train``/``val``/``test`` when the manifest says so.
    :param size: (width, height) the annotation file states, when it states one.
    :param dropped_boxes: annotated boxes dropped because nothing of them was left
        inside the image (degenerate or outside).
    """

    image: Path
    label: str | None = None
    mask: Path | None = None
    boxes: tuple[Box, ...] = ()
    split: str | None = None
    size: tuple[int, int] | None = None
    dropped_boxes: int = 0


def note(skips: Skips | None, where: str, reason: str) -> None:
    """Record a skip (or log it when the caller keeps no list)."""
    if skips is None:
        log.warning("skipped %s: %s", where, reason)
    else:
        skips.append((where, reason))


def confine(base: str | Path, name: str) -> tuple[Path | None, str | None]:
    """``base / name`` when it stays inside ``base``, else the reason it does not.

    Refused: empty names, names with control characters or over
    :data:`MAX_PATH_CHARS`, absolute paths (POSIX or Windows style), and names that
    climb out of ``base`` with ``..`` or through a symlink (the target is resolved).

    :param base: the folder the name is relative to.
    :param name: the path as the annotation file gives it.
    :returns: ``(path, None)`` or ``(None, reason)``.
    """
    if not isinstance(name, str) or not name:
        return None, "empty path"
    if len(name) > MAX_PATH_CHARS:
        return None, f"path of {len(name):,} characters (limit {MAX_PATH_CHARS})"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return None, f"path with control characters refused: {name[:80]!r}"
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).anchor:
        return None, f"absolute path refused (paths are relative to the footage folder): {name!r}"
    base = Path(base)
    path = base / name
    try:
        real_base = os.path.realpath(base)
        real = os.path.realpath(path)
    except (OSError, ValueError) as exc:
        return None, f"cannot resolve path {name!r} ({exc})"
    if os.path.commonpath([real_base, real]) != real_base:
        return None, f"path leaves the footage folder: {name!r}"
    return path, None


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (symlinks resolved) lies inside ``root``.

    :param root: the folder.
    :param path: the path to test.
    """
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def clip_boxes(boxes: Iterable[Box], width: int, height: int) -> tuple[tuple[Box, ...], int]:
    """Boxes clipped to a ``width`` x ``height`` image; those left without area are dropped.

    :param boxes: boxes in image pixels.
    :param width: image width.
    :param height: image height.
    :returns: the kept boxes and how many were dropped.
    """
    boxes = tuple(boxes)
    kept = []
    for b in boxes:
        c = Box(
            min(max(b.x0, 0), width),
            min(max(b.y0, 0), height),
            min(max(b.x1, 0), width),
            min(max(b.y1, 0), height),
            b.label,
        )
        if c.x1 > c.x0 and c.y1 > c.y0:
            kept.append(c)
    return tuple(kept), len(boxes) - len(kept)


def int_box(x0: float, y0: float, x1: float, y1: float, label: str) -> Box | None:
    """The integer box enclosing the float one, clipped at 0; None when nothing is left."""
    b = Box(max(0, math.floor(x0)), max(0, math.floor(y0)), math.ceil(x1), math.ceil(y1), label)
    return b if b.x1 > b.x0 and b.y1 > b.y0 else None


def finite(value: Any) -> float | None:
    """``value`` as a finite float when it is a JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return f if math.isfinite(f) else None


def read_bounded(path: Path, what: str) -> bytes:
    """The bytes of an annotation file (a regular file of at most MAX_ANNOTATION_BYTES)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FootageError(f"{what} {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise FootageError(f"{what} {path}: cannot read ({exc})") from None
    if not path.is_file():
        raise FootageError(f"{what} {path} is not a regular file")
    if st.st_size > MAX_ANNOTATION_BYTES:
        raise FootageError(
            f"{what} {path} is {st.st_size:,} bytes, over the limit of {MAX_ANNOTATION_BYTES:,}"
        )
    try:
        with open(path, "rb") as f:
            return f.read(MAX_ANNOTATION_BYTES + 1)
    except OSError as exc:
        raise FootageError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None


def label_from_boxes(boxes: Iterable[Box], ok_class: str = OK_CLASS) -> str:
    """The image's class from its boxes: ``ok_class`` when none, else the class with most area.

    Ties go to the class named first, so the answer does not depend on dict order.

    :param boxes: the image's defect boxes.
    :param ok_class: the label of an image without boxes.
    """
    area: dict[str, int] = {}
    for b in boxes:
        area[b.label] = area.get(b.label, 0) + max(1, b.area)
    if not area:
        return ok_class
    return max(area, key=lambda k: area[k])


def apply_label_map(records: list[Record], label_map: Mapping[str, str] | None) -> list[Record]:
    """Rename labels (image labels and box labels) through ``label_map``; others stay.

    :param records: records to relabel.
    :param label_map: old name -> new name.
    """
    if not label_map:
        return records
    out = []
    for r in records:
        boxes = tuple(replace(b, label=label_map.get(b.label, b.label)) for b in r.boxes)
        label = label_map.get(r.label, r.label) if r.label is not None else None
        out.append(replace(r, label=label, boxes=boxes))
    return out


#: Extensions tried, in this order, for an annotation's image name that has none.
TRY_SUFFIXES: tuple[str, ...] = (".jpg", ".png", ".jpeg", ".bmp", ".tif", ".tiff", ".webp",
                                 ".pgm", ".ppm")  # fmt: skip


def _name_forms(name: str) -> list[str]:
    """The spellings an annotation's image name is looked up under, most literal first.

    As written; with Windows separators turned into ``/``; the bare file name (tools
    export ``images/x.jpg`` or ``JPEGImages/x.jpg`` while the images sit in one folder);
    and, for a name without an image extension (VOC sets ship ``<filename>patches_104``),
    each of those with every :data:`TRY_SUFFIXES` extension, lower and upper case.
    """
    forms = [name, name.replace("\\", "/")]
    forms.append(forms[-1].rsplit("/", 1)[-1])
    if Path(forms[-1]).suffix.lower() not in IMAGE_SUFFIXES:
        forms += [f + s for f in forms[:3] for s in TRY_SUFFIXES]
        forms += [f + s.upper() for f in forms[:3] for s in TRY_SUFFIXES]
    return list(dict.fromkeys(forms))


def find_image(bases: Sequence[Path], name: str) -> tuple[Path | None, str | None]:
    """The image an annotation names: the first existing file under one of ``bases``.

    Each base is tried with each form of the name (:func:`_name_forms`); every
    candidate must stay inside its base (:func:`confine`). A name refused outright
    (absolute, climbing out with ``..``) is still looked up by its bare file name,
    which cannot leave the base.

    :param bases: the folders to look in, in order.
    :param name: the name as the annotation gives it.
    :returns: ``(path, None)``, or ``(None, reason)`` naming what was tried.
    """
    refused = None
    tried: list[str] = []
    for form in _name_forms(name):
        for base in bases:
            path, why = confine(base, form)
            if why:
                refused = refused or why
                continue
            if path.is_file():
                return path, None
            tried.append(str(path))
    if not tried:
        return None, refused
    shown = ", ".join(tried[:6]) + (f" and {len(tried) - 6} more" if len(tried) > 6 else "")
    head = f"{refused}; " if refused else ""
    return None, f"{head}no such image {name!r} (tried {shown})"
