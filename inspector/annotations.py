"""Parsers for annotated footage: folders, CSV manifests, Pascal VOC and COCO.

Shared by the ``folder`` camera driver and the footage importer. Each parser
turns one layout into a list of :class:`Record` (image path, label, mask path
or boxes, split) and reads nothing but the annotation files: images are
decoded later, one at a time, by whoever replays them.

Problems with the annotation files themselves (a missing column, broken XML,
a box outside its image) raise :class:`inspector.errors.FootageError` naming the
file; callers that present them as camera errors convert them.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
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


@dataclass(frozen=True)
class Record:
    """One annotated image.

    :param image: the image file.
    :param label: its class, or None when the footage is unlabelled.
    :param mask: the mask file (255 on defects), or None.
    :param boxes: defect boxes in image pixels.
    :param split: ``train``/``val``/``test`` when the manifest says so.
    :param size: (width, height) the annotation file states, when it states one.
    """

    image: Path
    label: str | None = None
    mask: Path | None = None
    boxes: tuple[Box, ...] = ()
    split: str | None = None
    size: tuple[int, int] | None = None


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


def _images_in(folder: Path, *, recursive: bool) -> list[Path]:
    it = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(p for p in it if p.is_file() and is_image_file(p) and not p.name.startswith("."))


def _pair_mask(image: Path, images: set[Path]) -> Path | None:
    """The mask beside ``image``: ``x.png`` for ``x.jpg`` (magnetic-tile style), or in masks/."""
    if image.suffix.lower() != ".png":
        beside = image.with_suffix(".png")
        if beside in images or beside.is_file():
            return beside
    for d in MASK_DIRS:
        for name in (image.stem + ".png", image.stem + "_mask.png", image.name):
            cand = image.parent / d / name
            if cand.is_file():
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


def scan_flat(folder: str | Path) -> list[Record]:
    """Every image directly in ``folder``, unlabelled (masks beside them are attached).

    :param folder: the folder to list.
    """
    folder = Path(folder)
    images = _images_in(folder, recursive=False)
    found = set(images)
    return [Record(image=p, mask=_pair_mask(p, found)) for p in images if not _mask_like(p, found)]


def scan_masks(folder: str | Path, *, label: str | None = None) -> list[Record]:
    """Image + mask pairs under ``folder`` (searched recursively).

    A pair is ``x.jpg`` with ``x.png`` beside it, or ``x.*`` with ``masks/x.png``
    (also ``x_mask.png``). Images without a mask are kept with ``mask=None``.

    :param folder: where the pairs are.
    :param label: the label to give every record (e.g. the class folder's name).
    """
    folder = Path(folder)
    images = _images_in(folder, recursive=True)
    found = set(images)
    return [
        Record(image=p, label=label, mask=_pair_mask(p, found))
        for p in images
        if not _mask_like(p, found)
    ]


def scan_classes(folder: str | Path) -> list[Record]:
    """Class sub-folders: ``folder/<class>/**/image``; the sub-folder's name is the label.

    Masks beside the images (or in ``masks/``) are attached as in :func:`scan_masks`.

    :param folder: the folder holding one sub-folder per class.
    """
    folder = Path(folder)
    out: list[Record] = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if sub.name in MASK_DIRS:
            continue
        out.extend(scan_masks(sub, label=sub.name))
    return out


def read_manifest(
    csv_path: str | Path, *, root: str | Path | None = None, split: str | None = None
) -> list[Record]:
    """Read a CSV manifest with columns ``image`` and optionally ``mask``, ``label``, ``split``.

    Paths are relative to ``root`` (default: the manifest's folder) unless absolute.

    :param csv_path: the manifest file.
    :param root: the folder relative paths start from.
    :param split: keep only rows of this split.
    :raises FootageError: the file is missing, has no ``image`` column, or names an
        unknown split.
    """
    csv_path = Path(csv_path)
    root = Path(root) if root is not None else csv_path.parent
    try:
        text = csv_path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FootageError(f"manifest {csv_path} does not exist") from None
    except OSError as exc:
        raise FootageError(f"manifest {csv_path}: cannot read ({exc.strerror})") from None
    reader = csv.DictReader(text.splitlines())
    fields = [f.strip() for f in (reader.fieldnames or [])]
    if "image" not in fields:
        raise FootageError(
            f"manifest {csv_path}: expected a header with columns image,mask,label,split; "
            f"got {','.join(fields) or 'nothing'}"
        )
    out: list[Record] = []
    splits: set[str] = set()
    for n, row in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        if not row.get("image"):
            raise FootageError(f"{csv_path}:{n}: empty image path")
        row_split = row.get("split") or None
        if row_split:
            splits.add(row_split)
        if split is not None and row_split != split:
            continue
        mask = row.get("mask") or None
        out.append(
            Record(
                image=root / row["image"],
                label=row.get("label") or None,
                mask=root / mask if mask else None,
                split=row_split,
            )
        )
    if split is not None and not out:
        known = ", ".join(sorted(splits)) or "none (the manifest has no split column)"
        raise FootageError(f"manifest {csv_path} has no rows of split {split!r}; splits: {known}")
    return out


def _voc_number(obj: Any, tag: str, xml: Path) -> float:
    node = obj.find(tag)
    if node is None or node.text is None:
        raise FootageError(f"{xml}: <{tag}> missing in an <object>")
    try:
        return float(node.text.strip())
    except ValueError:
        raise FootageError(f"{xml}: <{tag}> is not a number: {node.text.strip()!r}") from None


def read_voc_file(xml_path: str | Path, *, images_root: str | Path | None = None) -> Record:
    """Read one Pascal VOC XML file.

    VOC pixel coordinates are 1-based and inclusive; the boxes returned are 0-based
    with exclusive right/bottom edges, like :class:`inspector.frames.Box`.

    :param xml_path: the annotation file.
    :param images_root: where to look for ``<filename>`` first (then beside the XML,
        then in a ``JPEGImages`` folder next to the XML's folder).
    :raises FootageError: malformed XML or a box that is not a box.
    """
    import xml.etree.ElementTree as ET

    xml_path = Path(xml_path)
    try:
        root = ET.parse(xml_path).getroot()
    except ET.ParseError as exc:
        raise FootageError(f"{xml_path}: not valid VOC XML ({exc})") from None
    except OSError as exc:
        raise FootageError(f"{xml_path}: cannot read ({exc.strerror})") from None
    name = (root.findtext("filename") or "").strip()
    if not name:
        raise FootageError(f"{xml_path}: <filename> missing")
    size = None
    sz = root.find("size")
    if sz is not None and sz.findtext("width") and sz.findtext("height"):
        try:
            size = (int(float(sz.findtext("width"))), int(float(sz.findtext("height"))))
        except ValueError:
            size = None
    boxes = []
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
        x0, y0 = max(0, math.floor(xmin) - 1), max(0, math.floor(ymin) - 1)
        boxes.append(Box(x0, y0, max(x0 + 1, math.ceil(xmax)), max(y0 + 1, math.ceil(ymax)), label))
    candidates = []
    if images_root is not None:
        candidates.append(Path(images_root) / name)
    candidates += [xml_path.parent / name, xml_path.parent.parent / "JPEGImages" / name]
    image = next((c for c in candidates if c.exists()), candidates[0])
    return Record(image=image, label=label_from_boxes(boxes), boxes=tuple(boxes), size=size)


def read_voc(path: str | Path, *, images_root: str | Path | None = None) -> list[Record]:
    """Read a VOC XML file or every ``*.xml`` in a folder (sorted by name).

    :param path: an XML file or a folder of them.
    :param images_root: see :func:`read_voc_file`.
    """
    path = Path(path)
    files = sorted(path.glob("*.xml")) if path.is_dir() else [path]
    if not files:
        raise FootageError(f"no VOC *.xml files in {path}")
    return [read_voc_file(f, images_root=images_root) for f in files]


def read_coco(json_path: str | Path, *, images_root: str | Path | None = None) -> list[Record]:
    """Read a COCO detection JSON file: one record per entry of ``images``.

    ``bbox`` is ``[x, y, width, height]`` in pixels; it becomes the enclosing
    integer box. Segmentations are not rasterised (the boxes carry the defect).

    :param json_path: the annotation file.
    :param images_root: the folder ``file_name`` is relative to (default: the JSON's
        folder, then its ``images/`` sub-folder).
    :raises FootageError: not JSON, or not the COCO shape.
    """
    json_path = Path(json_path)
    try:
        doc = json.loads(json_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FootageError(f"COCO file {json_path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FootageError(f"{json_path}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
        raise FootageError(f"{json_path}: expected COCO JSON with an 'images' list")
    cats = {}
    for c in doc.get("categories") or []:
        try:
            cats[c["id"]] = str(c["name"])
        except (KeyError, TypeError):
            raise FootageError(f"{json_path}: a category needs 'id' and 'name'") from None
    per_image: dict[object, list[Box]] = defaultdict(list)
    for n, a in enumerate(doc.get("annotations") or []):
        try:
            x, y, w, h = (float(v) for v in a["bbox"])
            cat = a["category_id"]
            image_id = a["image_id"]
        except (KeyError, TypeError, ValueError):
            raise FootageError(
                f"{json_path}: annotations[{n}] needs image_id, category_id and bbox [x,y,w,h]"
            ) from None
        if cat not in cats:
            raise FootageError(f"{json_path}: annotations[{n}] has unknown category_id {cat!r}")
        if w < 0 or h < 0:
            raise FootageError(f"{json_path}: annotations[{n}] has a negative bbox size")
        x0, y0 = max(0, math.floor(x)), max(0, math.floor(y))
        box = Box(x0, y0, max(x0 + 1, math.ceil(x + w)), max(y0 + 1, math.ceil(y + h)), cats[cat])
        per_image[image_id].append(box)
    roots = [Path(images_root)] if images_root is not None else []
    roots += [json_path.parent, json_path.parent / "images"]
    out = []
    for n, im in enumerate(doc["images"]):
        try:
            image_id, name = im["id"], str(im["file_name"])
        except (KeyError, TypeError):
            raise FootageError(f"{json_path}: images[{n}] needs 'id' and 'file_name'") from None
        cands = [r / name for r in roots]
        image = next((c for c in cands if c.exists()), cands[0])
        boxes = tuple(per_image.get(image_id, ()))
        size = None
        if "width" in im and "height" in im:
            size = (int(im["width"]), int(im["height"]))
        out.append(Record(image=image, label=label_from_boxes(boxes), boxes=boxes, size=size))
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
    head = path.read_bytes()[:512].lstrip()
    if head.startswith(b"{"):
        return "coco"
    if head.startswith(b"<"):
        return "voc"
    raise FootageError(f"{path}: neither COCO JSON nor VOC XML")


def read_annotations(path: str | Path, *, images_root: str | Path | None = None) -> list[Record]:
    """Read VOC or COCO annotations, detecting which.

    :param path: a COCO JSON file, a VOC XML file, or a folder of VOC XML files
        (or a VOC tree with ``Annotations/``).
    :param images_root: where the images are (see the format readers).
    """
    path = Path(path)
    if annotation_format(path) == "coco":
        return read_coco(path, images_root=images_root)
    if path.is_dir() and not any(path.glob("*.xml")) and (path / "Annotations").is_dir():
        root = images_root if images_root is not None else path / "JPEGImages"
        return read_voc(path / "Annotations", images_root=root)
    return read_voc(path, images_root=images_root)


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
) -> tuple[str, list[Record]]:
    """List the annotated images of a footage folder.

    :param folder: the footage folder.
    :param layout: one of :data:`LAYOUTS`; ``auto`` uses the given manifest or
        annotations, else :func:`detect_layout`.
    :param manifest: a CSV manifest, relative to ``folder`` or absolute.
    :param annotations: a VOC folder/XML or COCO JSON, relative to ``folder`` or absolute.
    :param split: keep only this split (needs a manifest).
    :param label_map: rename labels (see :func:`apply_label_map`).
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
        records = read_manifest(man, root=folder, split=split)
    elif layout in ("voc", "coco"):
        if ann is None:
            ann = folder if layout == "voc" else coco_in(folder)
            if ann is None:
                raise FootageError(f"layout=coco: no annotations given and none found in {folder}")
        if annotation_format(ann) != layout:
            raise FootageError(f"{ann} is not {layout.upper()} annotations")
        records = read_annotations(ann, images_root=folder)
    elif layout == "classes":
        records = scan_classes(folder)
    elif layout == "masks":
        records = scan_masks(folder)
    else:
        records = scan_flat(folder)
    return layout, apply_label_map(records, label_map)
