"""Parsers for annotated footage: folders, CSV manifests, Pascal VOC and COCO.

Shared by the ``folder`` camera driver and the footage importer. Each parser
turns one layout into a list of :class:`Record` (image path, label, mask path
or boxes, split) and reads nothing but the annotation files: images are
decoded later, one at a time, by whoever replays them.

Annotation files may come from anywhere, so they are read with bounds:

* every path they name must stay inside its folder (the footage folder, or the
  folder the caller names for images): absolute paths, ``..`` that climbs out,
  and symlinks that lead out are refused, and so are names with control
  characters;
* a file that cannot be parsed at all (not JSON, no ``image`` column, larger than
  :data:`MAX_ANNOTATION_BYTES`) raises :class:`inspector.errors.FootageError`
  naming it; one bad row, object or entry inside a readable file is a counted,
  named skip appended to the caller's ``skips`` list (``(where, reason)``);
* numbers must be finite numbers of the right JSON type; boxes are clipped to the
  image and a box left with no area is dropped (counted in
  :attr:`Record.dropped_boxes`); an image whose every box was dropped is skipped
  rather than imported as ``ok``.

Callers that present errors as camera errors convert them.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from inspector.errors import FootageError
from inspector.frames import Box
from inspector.imageio import IMAGE_SUFFIXES, is_image_file

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

log = logging.getLogger(__name__)


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


def _note(skips: Skips | None, where: str, reason: str) -> None:
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


def _box(x0: float, y0: float, x1: float, y1: float, label: str) -> Box | None:
    """The integer box enclosing the float one, clipped at 0; None when nothing is left."""
    b = Box(max(0, math.floor(x0)), max(0, math.floor(y0)), math.ceil(x1), math.ceil(y1), label)
    return b if b.x1 > b.x0 and b.y1 > b.y0 else None


def _finite(value: Any) -> float | None:
    """``value`` as a finite float when it is a JSON number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return f if math.isfinite(f) else None


def _read_bounded(path: Path, what: str) -> bytes:
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


def _images_in(folder: Path, *, recursive: bool, skips: Skips | None = None) -> list[Path]:
    """Image files in ``folder``; those whose symlink leads out of it are skipped."""
    it = folder.rglob("*") if recursive else folder.iterdir()
    out = []
    for p in sorted(it):
        if p.name.startswith(".") or not is_image_file(p):
            continue
        if p.is_symlink() and not is_inside(folder, p):
            _note(skips, str(p), "symlink leading out of the footage folder refused")
            continue
        if p.is_file():
            out.append(p)
    return out


def _pair_mask(image: Path, images: set[Path]) -> Path | None:
    """The mask beside ``image``: ``x.png`` for ``x.jpg`` (magnetic-tile style), or in masks/."""
    if image.suffix.lower() != ".png":
        beside = image.with_suffix(".png")
        if beside in images or (beside.is_file() and is_inside(image.parent, beside)):
            return beside
    for d in MASK_DIRS:
        for name in (image.stem + ".png", image.stem + "_mask.png", image.name):
            cand = image.parent / d / name
            if cand.is_file() and is_inside(image.parent, cand):
                return cand
    return None


def _mask_like(path: Path, all_images: set[Path]) -> bool:
    """Whether an image file is in fact somebody's mask."""
    if path.parent.name in MASK_DIRS:
        return True
    if path.stem.endswith("_mask"):
        return True
    if path.suffix.lower() == ".png":
        return any(path.with_suffix(s) in all_images for s in IMAGE_SUFFIXES if s != ".png")
    return False


def scan_flat(folder: str | Path, *, skips: Skips | None = None) -> list[Record]:
    """Every image directly in ``folder``, unlabelled (masks beside them are attached).

    :param folder: the folder to list.
    :param skips: where skipped files are recorded (default: logged).
    """
    folder = Path(folder)
    images = _images_in(folder, recursive=False, skips=skips)
    found = set(images)
    return [Record(image=p, mask=_pair_mask(p, found)) for p in images if not _mask_like(p, found)]


def scan_masks(
    folder: str | Path, *, label: str | None = None, skips: Skips | None = None
) -> list[Record]:
    """Image + mask pairs under ``folder`` (searched recursively).

    A pair is ``x.jpg`` with ``x.png`` beside it, or ``x.*`` with ``masks/x.png``
    (also ``x_mask.png``). Images without a mask are kept with ``mask=None``.

    :param folder: where the pairs are.
    :param label: the label to give every record (e.g. the class folder's name).
    :param skips: where skipped files are recorded (default: logged).
    """
    folder = Path(folder)
    images = _images_in(folder, recursive=True, skips=skips)
    found = set(images)
    return [
        Record(image=p, label=label, mask=_pair_mask(p, found))
        for p in images
        if not _mask_like(p, found)
    ]


def scan_classes(folder: str | Path, *, skips: Skips | None = None) -> list[Record]:
    """Class sub-folders: ``folder/<class>/**/image``; the sub-folder's name is the label.

    Masks beside the images (or in ``masks/``) are attached as in :func:`scan_masks`.

    :param folder: the folder holding one sub-folder per class.
    :param skips: where skipped files are recorded (default: logged).
    """
    folder = Path(folder)
    out: list[Record] = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if sub.name in MASK_DIRS:
            continue
        if not is_inside(folder, sub):
            _note(skips, str(sub), "symlink leading out of the footage folder refused")
            continue
        out.extend(scan_masks(sub, label=sub.name, skips=skips))
    return out


def _csv_rows(text: str, where: Path, skips: Skips | None) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each CSV row; a row csv cannot parse is skipped."""
    lines = text.splitlines()
    reader = csv.reader(lines)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            _note(skips, f"{where}:{reader.line_num}", f"unreadable CSV row ({exc})")
            continue
        yield reader.line_num, row


def read_manifest(
    csv_path: str | Path,
    *,
    root: str | Path | None = None,
    split: str | None = None,
    skips: Skips | None = None,
) -> list[Record]:
    """Read a CSV manifest with columns ``image`` and optionally ``mask``, ``label``, ``split``.

    Paths are relative to ``root`` (default: the manifest's folder) and must stay
    inside it. A row that cannot be used (an empty, absolute or escaping path,
    bytes that are not UTF-8, a field over :data:`MAX_CSV_FIELD` characters) is
    skipped and recorded in ``skips`` as ``(file:line, reason)``.

    :param csv_path: the manifest file.
    :param root: the folder relative paths start from.
    :param split: keep only rows of this split.
    :param skips: where skipped rows are recorded (default: logged).
    :raises FootageError: the file is missing, has no ``image`` column, or names an
        unknown split.
    """
    csv_path = Path(csv_path)
    root = Path(root) if root is not None else csv_path.parent
    data = _read_bounded(csv_path, "manifest")
    # Undecodable bytes survive as lone surrogates, so only their rows are skipped.
    text = data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_FIELD * 4))
    rows = _csv_rows(text, csv_path, skips)
    header = next(rows, None)
    fields = [f.strip() for f in (header[1] if header else [])]
    if "image" not in fields or any(_bad_text(f) for f in fields):
        shown = ",".join(fields)[:200].encode("utf-8", "replace").decode() or "nothing"
        raise FootageError(
            f"manifest {csv_path}: expected a header with columns image,mask,label,split; "
            f"got {shown}"
        )
    out: list[Record] = []
    splits: set[str] = set()
    for n, values in rows:
        where = f"{csv_path}:{n}"
        if not any(v.strip() for v in values):
            continue  # a blank line
        why = _row_problem(values)
        if why:
            _note(skips, where, why)
            continue
        row = {k: v.strip() for k, v in zip(fields, values)}
        if not row.get("image"):
            _note(skips, where, "empty image path")
            continue
        row_split = row.get("split") or None
        if row_split:
            splits.add(row_split)
        if split is not None and row_split != split:
            continue
        image, why = confine(root, row["image"])
        mask = None
        if image is not None and row.get("mask"):
            mask, why = confine(root, row["mask"])
            why = why and f"mask: {why}"
        if why:
            _note(skips, where, why)
            continue
        out.append(Record(image=image, label=row.get("label") or None, mask=mask, split=row_split))
    if split is not None and not out:
        known = ", ".join(sorted(splits)) or "none (the manifest has no split column)"
        raise FootageError(f"manifest {csv_path} has no rows of split {split!r}; splits: {known}")
    return out


def _bad_text(value: str) -> bool:
    """Whether a CSV value holds bytes that were not UTF-8 (decoded as lone surrogates)."""
    return any("\udc80" <= c <= "\udcff" for c in value)


def _row_problem(values: list[str]) -> str | None:
    for v in values:
        if len(v) > MAX_CSV_FIELD:
            return f"a field of {len(v):,} characters (limit {MAX_CSV_FIELD:,})"
        if _bad_text(v):
            return "bytes that are not UTF-8"
    return None


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


def _image_in(bases: Sequence[Path], name: str) -> tuple[Path | None, str | None]:
    """The first existing ``base / name`` that stays inside its base (else the first one)."""
    found: list[Path] = []
    for base in bases:
        path, why = confine(base, name)
        if why:
            return None, why
        found.append(path)
    return next((c for c in found if c.exists()), found[0]), None


def read_voc_file(xml_path: str | Path, *, images_root: str | Path | None = None) -> Record:
    """Read one Pascal VOC XML file.

    VOC pixel coordinates are 1-based and inclusive; the boxes returned are 0-based
    with exclusive right/bottom edges, like :class:`inspector.frames.Box`, clipped to
    the ``<size>`` the file states (a box left without area is dropped and counted).
    ``<path>`` is ignored; ``<filename>`` must stay inside the folder it is looked up in.
    Files that declare a DOCTYPE or entities are refused (entity expansion).

    :param xml_path: the annotation file.
    :param images_root: where to look for ``<filename>`` first (then beside the XML,
        then in a ``JPEGImages`` folder next to the XML's folder).
    :raises FootageError: malformed XML, a box that is not a box, a path that leaves
        its folder, or an image whose every box was dropped.
    """
    import xml.etree.ElementTree as ET

    xml_path = Path(xml_path)
    data = _read_bounded(xml_path, "VOC file")
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
        box = _box(xmin - 1, ymin - 1, xmax, ymax, label)
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
    bases += [xml_path.parent, xml_path.parent.parent / "JPEGImages"]
    image, why = _image_in(bases, name)
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
            _note(skips, str(f), str(exc).removeprefix(f"{f}: "))
    return out


def _coco_doc(json_path: Path) -> dict[str, Any]:
    data = _read_bounded(json_path, "COCO file")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise FootageError(f"{json_path}: not valid JSON ({str(exc)[:200]})") from None
    except RecursionError:
        raise FootageError(f"{json_path}: not valid JSON (nested too deeply)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
        raise FootageError(f"{json_path}: expected COCO JSON with an 'images' list")
    for key in ("annotations", "categories"):
        if doc.get(key) is not None and not isinstance(doc[key], list):
            raise FootageError(f"{json_path}: '{key}' must be a list")
    return doc


def _coco_id(value: Any) -> int | str | None:
    """A COCO id: an int (not a bool) or a non-empty string, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, str) and 0 < len(value) <= MAX_PATH_CHARS):
        return value
    return None


def _coco_box(a: Any, cats: Mapping[Any, str]) -> tuple[Any, Box | None, str | None]:
    """(image id, box or None when degenerate, reason when the annotation is unusable)."""
    if not isinstance(a, dict):
        return None, None, "not an object"
    image_id = _coco_id(a.get("image_id"))
    if image_id is None:
        return None, None, "needs an image_id (an integer or a string)"
    bbox = a.get("bbox")
    if not isinstance(bbox, list) or len(bbox) != 4:
        return image_id, None, "needs bbox [x, y, width, height]"
    nums = [_finite(v) for v in bbox]
    if any(v is None for v in nums):
        return image_id, None, f"bbox holds something that is not a finite number: {bbox!r:.80}"
    x, y, w, h = nums
    if w < 0 or h < 0:
        return image_id, None, "has a negative bbox size"
    cat = _coco_id(a.get("category_id"))
    if cat is None or cat not in cats:
        return image_id, None, f"has unknown category_id {a.get('category_id')!r:.80}"
    return image_id, _box(x, y, x + w, y + h, cats[cat]), None


def read_coco(
    json_path: str | Path,
    *,
    images_root: str | Path | None = None,
    skips: Skips | None = None,
) -> list[Record]:
    """Read a COCO detection JSON file: one record per entry of ``images``.

    ``bbox`` is ``[x, y, width, height]`` in pixels; it becomes the enclosing
    integer box, clipped to the image's stated size (a box left without area is
    dropped and counted). Segmentations are not rasterised (the boxes carry the
    defect). An annotation that is not usable (wrong types, NaN or infinite numbers,
    an unknown category) makes its image a counted skip, because importing the
    image without that box would call a defect ``ok``; a bad ``images`` entry is
    skipped the same way. ``file_name`` must stay inside the folder it is looked up in.

    :param json_path: the annotation file.
    :param images_root: the folder ``file_name`` is relative to (default: the JSON's
        folder, then its ``images/`` sub-folder).
    :param skips: where skipped images and annotations are recorded (default: logged).
    :raises FootageError: not JSON, or not the COCO shape.
    """
    json_path = Path(json_path)
    doc = _coco_doc(json_path)
    cats: dict[Any, str] = {}
    for n, c in enumerate(doc.get("categories") or []):
        cid = _coco_id(c.get("id")) if isinstance(c, dict) else None
        cname = c.get("name") if isinstance(c, dict) else None
        if cid is None or not isinstance(cname, str) or not cname or len(cname) > 200:
            raise FootageError(f"{json_path}: categories[{n}] needs 'id' and a 'name' string")
        cats[cid] = cname
    per_image: dict[Any, list[Box]] = defaultdict(list)
    dropped: dict[Any, int] = defaultdict(int)
    damaged: dict[Any, str] = {}
    for n, a in enumerate(doc.get("annotations") or []):
        image_id, box, why = _coco_box(a, cats)
        if why:
            if image_id is None:
                _note(skips, f"{json_path}:annotations[{n}]", why)
            else:
                damaged.setdefault(image_id, f"annotations[{n}] {why}")
        elif box is None:
            dropped[image_id] += 1
        else:
            per_image[image_id].append(box)
    roots = [Path(images_root)] if images_root is not None else []
    roots += [json_path.parent, json_path.parent / "images"]
    out = []
    for n, im in enumerate(doc["images"]):
        where = f"{json_path}:images[{n}]"
        image_id = _coco_id(im.get("id")) if isinstance(im, dict) else None
        name = im.get("file_name") if isinstance(im, dict) else None
        if image_id is None or not isinstance(name, str):
            _note(skips, where, "needs an 'id' and a 'file_name' string")
            continue
        if image_id in damaged:
            _note(skips, where, damaged[image_id])
            continue
        image, why = _image_in(roots, name)
        if why:
            _note(skips, where, f"file_name: {why}")
            continue
        size = None
        if "width" in im or "height" in im:
            w, h = _finite(im.get("width")), _finite(im.get("height"))
            if w is None or h is None or w < 1 or h < 1 or w != int(w) or h != int(h):
                _note(skips, where, "width and height must be positive whole numbers")
                continue
            size = (int(w), int(h))
        boxes, lost = tuple(per_image.get(image_id, ())), dropped.get(image_id, 0)
        if size is not None:
            boxes, more = clip_boxes(boxes, *size)
            lost += more
        if lost and not boxes:
            _note(skips, where, f"every box ({lost}) lies outside the image or has no area")
            continue
        out.append(
            Record(
                image=image,
                label=label_from_boxes(boxes),
                boxes=boxes,
                size=size,
                dropped_boxes=lost,
            )
        )
    return out


def annotation_format(path: str | Path) -> str:
    """``voc`` or ``coco`` for an annotation file or folder (by looking inside).

    :param path: a ``.json`` file, a ``.xml`` file or a folder of XML files.
    :raises FootageError: neither.
    """
    path = Path(path)
    if path.is_dir():
        if any(path.glob("*.xml")):
            return "voc"
        if (path / "Annotations").is_dir():
            return "voc"
        raise FootageError(f"{path}: folder holds no VOC *.xml files")
    if not path.exists():
        raise FootageError(f"annotation file {path} does not exist")
    if not path.is_file():
        raise FootageError(f"annotation file {path} is not a regular file")
    try:
        with open(path, "rb") as f:
            head = f.read(512).lstrip()
    except OSError as exc:
        raise FootageError(f"annotation file {path}: cannot read ({exc.strerror})") from None
    if head.startswith(b"{"):
        return "coco"
    if head.startswith(b"<"):
        return "voc"
    raise FootageError(f"{path}: neither COCO JSON nor VOC XML")


def read_annotations(
    path: str | Path, *, images_root: str | Path | None = None, skips: Skips | None = None
) -> list[Record]:
    """Read VOC or COCO annotations, detecting which.

    :param path: a COCO JSON file, a VOC XML file, or a folder of VOC XML files
        (or a VOC tree with ``Annotations/``).
    :param images_root: where the images are (see the format readers).
    :param skips: where skipped entries are recorded (default: logged).
    """
    path = Path(path)
    if annotation_format(path) == "coco":
        return read_coco(path, images_root=images_root, skips=skips)
    if path.is_dir() and not any(path.glob("*.xml")) and (path / "Annotations").is_dir():
        root = images_root if images_root is not None else path / "JPEGImages"
        return read_voc(path / "Annotations", images_root=root, skips=skips)
    return read_voc(path, images_root=images_root, skips=skips)


def detect_layout(folder: str | Path) -> str:
    """Guess the layout of a footage folder (what ``layout=auto`` means).

    In order: a ``manifest.csv``/``splits.csv`` -> ``manifest``; an ``Annotations/``
    folder -> ``voc``; an ``annotations.json``/``instances*.json`` -> ``coco``;
    masks (a ``masks/`` folder or ``x.png`` beside ``x.jpg``) -> ``masks``;
    only sub-folders with images -> ``classes``; else ``flat``.

    :param folder: the footage folder.
    """
    folder = Path(folder)
    if manifest_in(folder) is not None:
        return "manifest"
    if (folder / "Annotations").is_dir():
        return "voc"
    if coco_in(folder) is not None:
        return "coco"
    if any((folder / d).is_dir() for d in MASK_DIRS):
        return "masks"
    direct = _images_in(folder, recursive=False)
    found = set(direct)
    if any(_mask_like(p, found) for p in direct):
        return "masks"
    if not direct:
        subs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
        if any(_images_in(s, recursive=True) for s in subs):
            return "classes"
    return "flat"


def manifest_in(folder: Path) -> Path | None:
    """The manifest a folder holds by convention (``manifest.csv`` or ``splits.csv``)."""
    for name in ("manifest.csv", "splits.csv"):
        if (folder / name).is_file():
            return folder / name
    return None


def coco_in(folder: Path) -> Path | None:
    """The COCO file a folder holds by convention (``annotations.json``, ``instances*.json``)."""
    if (folder / "annotations.json").is_file():
        return folder / "annotations.json"
    found = sorted(folder.glob("instances*.json"))
    return found[0] if found else None


def discover(
    folder: str | Path,
    *,
    layout: str = "auto",
    manifest: str | Path | None = None,
    annotations: str | Path | None = None,
    split: str | None = None,
    label_map: Mapping[str, str] | None = None,
    skips: Skips | None = None,
) -> tuple[str, list[Record]]:
    """List the annotated images of a footage folder.

    Rows, entries and files that cannot be used are skipped (see the module
    docstring) and recorded in ``skips``; paths the annotations name must stay
    inside ``folder``.

    :param folder: the footage folder.
    :param layout: one of :data:`LAYOUTS`; ``auto`` uses the given manifest or
        annotations, else :func:`detect_layout`.
    :param manifest: a CSV manifest, relative to ``folder`` or absolute.
    :param annotations: a VOC folder/XML or COCO JSON, relative to ``folder`` or absolute.
    :param split: keep only this split (needs a manifest).
    :param label_map: rename labels (see :func:`apply_label_map`).
    :param skips: where skipped things are recorded as ``(where, reason)`` (default: logged).
    :returns: the layout used and the records, in a stable order.
    :raises FootageError: a bad layout name, a missing folder or file, or a split
        filter without a manifest.
    """
    folder = Path(folder)
    if layout not in LAYOUTS:
        raise FootageError(f"unknown layout {layout!r}; expected one of: {', '.join(LAYOUTS)}")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise FootageError(f"footage folder {folder} {what}")
    man = folder / manifest if manifest is not None else None
    ann = folder / annotations if annotations is not None else None
    if layout == "auto":
        if man is not None:
            layout = "manifest"
        elif ann is not None:
            layout = annotation_format(ann)
        else:
            layout = detect_layout(folder)
    if split is not None and layout != "manifest":
        raise FootageError(
            f"split={split!r} needs a manifest (layout=manifest with a split column); "
            f"layout is {layout!r}"
        )
    if layout == "manifest":
        man = man or manifest_in(folder)
        if man is None:
            raise FootageError(
                f"layout=manifest: no manifest given and no manifest.csv/splits.csv in {folder}"
            )
        records = read_manifest(man, root=folder, split=split, skips=skips)
    elif layout in ("voc", "coco"):
        if ann is None:
            ann = folder if layout == "voc" else coco_in(folder)
            if ann is None:
                raise FootageError(f"layout=coco: no annotations given and none found in {folder}")
        if annotation_format(ann) != layout:
            raise FootageError(f"{ann} is not {layout.upper()} annotations")
        records = read_annotations(ann, images_root=folder, skips=skips)
    elif layout == "classes":
        records = scan_classes(folder, skips=skips)
    elif layout == "masks":
        records = scan_masks(folder, skips=skips)
    else:
        records = scan_flat(folder, skips=skips)
    return layout, apply_label_map(records, label_map)
