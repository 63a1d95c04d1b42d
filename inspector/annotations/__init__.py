"""Parsers for annotated footage: folders, CSV manifests, Pascal VOC and COCO.

Shared by the ``folder`` camera driver and the footage importer. Each parser
turns one layout into a list of :class:`Record` (image path, label, mask path
or boxes, split) and reads nothing but the annotation files: images are
decoded later, one at a time, by whoever replays them.

Annotation files may come from anywhere, so they are read with bounds:

* every path they name must stay inside its folder (the footage folder, or the
  folder the caller names for images): absolute paths, ``..`` that climbs out,
  and symlinks that lead out are refused, and so are names with control
  characters; VOC and COCO image names are looked up in several spellings (no
  extension, folders, the bare file name: :func:`~inspector.annotations.common.find_image`),
  each confined the same way, and an image found nowhere is a skip naming the
  annotation and what was tried;
* a file that cannot be parsed at all (not JSON, no ``image`` column, larger than
  :data:`MAX_ANNOTATION_BYTES`) raises :class:`inspector.errors.FootageError`
  naming it; one bad row, object or entry inside a readable file is a counted,
  named skip appended to the caller's ``skips`` list (``(where, reason)``);
* numbers must be finite numbers of the right JSON type; boxes are clipped to the
  image and a box left with no area is dropped (counted in
  :attr:`Record.dropped_boxes`); an image whose every box was dropped is skipped
  rather than imported as ``ok``.

A VOC or COCO frame's label comes from its boxes; :mod:`inspector.annotations.labels`
holds the rules (``largest-area`` by default) and reports frames whose boxes disagree.
The readers live in ``common`` (records, bounds, confinement), ``folders`` (class
folders, mask pairs, CSV manifests), ``voc``, ``coco`` and ``labels``; every name
imports from here.

Callers that present errors as camera errors convert them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from inspector.annotations.coco import read_coco
from inspector.annotations.common import (
    LAYOUTS,
    MASK_DIRS,
    MAX_ANNOTATION_BYTES,
    MAX_CSV_FIELD,
    MAX_PATH_CHARS,
    OK_CLASS,
    Record,
    Skips,
    apply_label_map,
    clip_boxes,
    confine,
    find_image,
    is_inside,
    label_from_boxes,
)
from inspector.annotations.folders import (
    images_in,
    mask_like,
    read_manifest,
    scan_classes,
    scan_flat,
    scan_masks,
)
from inspector.annotations.labels import (
    DEFAULT_LABEL_PATTERN,
    DEFAULT_LABEL_RULE,
    LABEL_RULES,
    RULED_LAYOUTS,
    LabelRule,
    box_classes,
    check_rule_applies,
    disagreement,
    label_by_rule,
    relabel,
)
from inspector.annotations.voc import read_voc, read_voc_file
from inspector.errors import FootageError

__all__ = [
    "DEFAULT_LABEL_PATTERN",
    "DEFAULT_LABEL_RULE",
    "LABEL_RULES",
    "LAYOUTS",
    "MASK_DIRS",
    "MAX_ANNOTATION_BYTES",
    "MAX_CSV_FIELD",
    "MAX_PATH_CHARS",
    "OK_CLASS",
    "RULED_LAYOUTS",
    "LabelRule",
    "Record",
    "Skips",
    "annotation_format",
    "apply_label_map",
    "box_classes",
    "check_rule_applies",
    "clip_boxes",
    "coco_in",
    "confine",
    "detect_layout",
    "disagreement",
    "discover",
    "find_image",
    "is_inside",
    "label_by_rule",
    "label_from_boxes",
    "manifest_in",
    "read_annotations",
    "read_coco",
    "read_manifest",
    "read_voc",
    "read_voc_file",
    "relabel",
    "scan_classes",
    "scan_flat",
    "scan_masks",
]


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
    direct = images_in(folder, recursive=False)
    found = set(direct)
    if any(mask_like(p, found) for p in direct):
        return "masks"
    if not direct:
        subs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
        if any(images_in(s, recursive=True) for s in subs):
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
    label_rule: LabelRule | None = None,
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
    :param label_rule: how a VOC/COCO frame's label is chosen from its boxes (default
        ``largest-area``; :mod:`inspector.annotations.labels`), as ``footage import
        --label-rule`` does; an image the rule gives no label is a skip.
    :returns: the layout used and the records, in a stable order.
    :raises FootageError: a bad layout name, a missing folder or file, a split filter
        without a manifest, or a label rule for a layout that brings its labels.
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
    check_rule_applies(layout, label_rule, flag="label_rule", kind="layout")
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
        records = label_by_rule(read_annotations(ann, images_root=folder, skips=skips),
                                layout, label_rule, skips)  # fmt: skip
    elif layout == "classes":
        records = scan_classes(folder, skips=skips)
    elif layout == "masks":
        records = scan_masks(folder, skips=skips)
    else:
        records = scan_flat(folder, skips=skips)
    return layout, apply_label_map(records, label_map)
