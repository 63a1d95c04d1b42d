"""Pascal VOC annotations: one XML file per image.

See :mod:`inspector.annotations` for the rules annotation files are read under.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from inspector.annotations.common import (
    Record,
    Skips,
    clip_boxes,
    find_image,
    int_box,
    label_from_boxes,
    note,
    read_bounded,
)
from inspector.errors import FootageError


def _voc_number(obj: Any, tag: str, xml: Path) -> float:
    node = obj.find(tag)
    if node is None or node.text is None:
        raise FootageError(f"{xml}: <{tag}> missing in an <object>")
    try:
        value = float(node.text.strip())
    except ValueError:
        raise FootageError(f"{xml}: <{tag}> is not a number: {node.text.strip()[:40]!r}") from None
    if not math.isfinite(value):
        raise FootageError(f"{xml}: <{tag}> is not a finite number: {node.text.strip()[:40]!r}")
    return value


def _voc_size(root: Any) -> tuple[int, int] | None:
    sz = root.find("size")
    if sz is None or not sz.findtext("width") or not sz.findtext("height"):
        return None
    try:
        w, h = float(sz.findtext("width")), float(sz.findtext("height"))
    except ValueError:
        return None
    if not (math.isfinite(w) and math.isfinite(h)) or w < 1 or h < 1:
        return None
    return int(w), int(h)


def read_voc_file(xml_path: str | Path, *, images_root: str | Path | None = None) -> Record:
    """Read one Pascal VOC XML file.

    VOC pixel coordinates are 1-based and inclusive; the boxes returned are 0-based
    with exclusive right/bottom edges, like :class:`inspector.frames.Box`, clipped to
    the ``<size>`` the file states (a box left without area is dropped and counted).
    ``<path>`` is ignored; ``<filename>`` must stay inside the folder it is looked up in.
    Files that declare a DOCTYPE or entities are refused (entity expansion).

    :param xml_path: the annotation file.
    :param images_root: where to look for ``<filename>`` first (then beside the XML,
        then in a ``JPEGImages``, ``images`` or ``IMAGES`` folder next to the XML's
        folder). A name without an extension is tried with the image extensions
        (see :func:`inspector.annotations.common.find_image`).
    :raises FootageError: malformed XML, a box that is not a box, a path that leaves
        its folder, an image that is not there (the message says what was tried), or
        an image whose every box was dropped.
    """
    import xml.etree.ElementTree as ET

    xml_path = Path(xml_path)
    data = read_bounded(xml_path, "VOC file")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise FootageError(f"{xml_path}: XML with a DOCTYPE or ENTITY declaration refused")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise FootageError(f"{xml_path}: not valid VOC XML ({exc})") from None
    name = (root.findtext("filename") or "").strip()
    if not name:
        raise FootageError(f"{xml_path}: <filename> missing")
    size = _voc_size(root)
    boxes, dropped = [], 0
    for obj in root.iter("object"):
        label = (obj.findtext("name") or "").strip()
        if not label:
            raise FootageError(f"{xml_path}: an <object> has no <name>")
        bb = obj.find("bndbox")
        if bb is None:
            raise FootageError(f"{xml_path}: object {label!r} has no <bndbox>")
        xmin, ymin = _voc_number(bb, "xmin", xml_path), _voc_number(bb, "ymin", xml_path)
        xmax, ymax = _voc_number(bb, "xmax", xml_path), _voc_number(bb, "ymax", xml_path)
        if xmax < xmin or ymax < ymin:
            raise FootageError(f"{xml_path}: object {label!r} has xmax<xmin or ymax<ymin")
        box = int_box(xmin - 1, ymin - 1, xmax, ymax, label)
        if box is not None and size is not None:
            kept, _ = clip_boxes([box], *size)
            box = kept[0] if kept else None
        if box is None:
            dropped += 1
        else:
            boxes.append(box)
    if dropped and not boxes:
        raise FootageError(
            f"{xml_path}: every box ({dropped}) lies outside the image or has no area"
        )
    bases = [Path(images_root)] if images_root is not None else []
    up = xml_path.parent.parent
    bases += [xml_path.parent, up / "JPEGImages", up / "images", up / "IMAGES"]
    image, why = find_image(bases, name)
    if why:
        raise FootageError(f"{xml_path}: <filename>: {why}")
    return Record(
        image=image,
        label=label_from_boxes(boxes),
        boxes=tuple(boxes),
        size=size,
        dropped_boxes=dropped,
    )


def read_voc(
    path: str | Path, *, images_root: str | Path | None = None, skips: Skips | None = None
) -> list[Record]:
    """Read a VOC XML file or every ``*.xml`` in a folder (sorted by name).

    A file that cannot be read is skipped and recorded in ``skips`` (a single file
    given as ``path`` raises instead).

    :param path: an XML file or a folder of them.
    :param images_root: see :func:`read_voc_file`.
    :param skips: where skipped files are recorded (default: logged).
    """
    path = Path(path)
    if not path.is_dir():
        return [read_voc_file(path, images_root=images_root)]
    files = sorted(path.glob("*.xml"))
    if not files:
        raise FootageError(f"no VOC *.xml files in {path}")
    out = []
    for f in files:
        try:
            out.append(read_voc_file(f, images_root=images_root))
        except FootageError as exc:
            note(skips, str(f), str(exc).removeprefix(f"{f}: "))
    return out
