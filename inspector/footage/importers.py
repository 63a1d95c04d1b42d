"""Import footage into a store: station folders, class folders, mask pairs, CSV, VOC, COCO.

The layouts are parsed by :mod:`inspector.annotations` (shared with the
``folder`` camera); this module decodes each image, checks it against its
mask and annotation, and adds it to the store. A corrupt image, a missing or
mismatched mask, a damaged annotation file, a bad row or entry inside one, or a path
that leaves the footage folder is reported for that file and skipped; the
import carries on and ends with a summary. Boxes are clipped to the decoded
image; a box left without area is dropped and counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.annotations import (
    RULED_LAYOUTS,
    LabelRule,
    Record,
    annotation_format,
    apply_label_map,
    check_rule_applies,
    clip_boxes,
    disagreement,
    is_inside,
    manifest_in,
    read_coco,
    read_manifest,
    read_voc,
    read_voc_file,
    relabel,
    scan_classes,
    scan_masks,
)
from inspector.errors import FootageError
from inspector.footage.store import FootageStore, frame_hash
from inspector.footage.writer import KIND, MARKER, RESULT_SUFFIX
from inspector.imageio import read_image, read_mask, to_gray
from inspector.progress import track

#: Formats of ``footage import --format``.
FORMATS: tuple[str, ...] = ("station", "folder", "masks", "csv", "voc", "coco")


@dataclass
class ImportReport:
    """What an import did.

    :param new: frames added.
    :param present: frames already in the store, unchanged (also repeats within the import).
    :param updated: frames already present that gained a label, mask, boxes or result.
    :param skipped: ``(file, reason)`` for every file that was not imported.
    :param filtered: manifest rows outside the ``--split`` filter.
    :param dropped_boxes: annotated boxes dropped because nothing of them lay inside
        their image (the image itself was imported with its other boxes).
    :param label_rule: how VOC/COCO frames got their label (``LabelRule.describe``), or
        None for formats that carry frame labels.
    :param mixed: ``(file, what)`` for each VOC/COCO frame whose boxes name several
        classes or another class than its label (imported, with the rule's label).
    """

    new: int = 0
    present: int = 0
    updated: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    filtered: int = 0
    dropped_boxes: int = 0
    label_rule: str | None = None
    mixed: list[tuple[str, str]] = field(default_factory=list)

    def line(self) -> str:
        """``12 new, 3 already present, 1 updated, 2 skipped``."""
        s = f"{self.new} new, {self.present} already present"
        if self.updated:
            s += f", {self.updated} updated"
        s += f", {len(self.skipped)} skipped"
        if self.filtered:
            s += f" ({self.filtered} rows outside the --split filter)"
        if self.dropped_boxes:
            s += f", {self.dropped_boxes} boxes outside their image dropped"
        if self.mixed:
            s += f", {len(self.mixed)} frames whose boxes disagree"
        return s

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "new": self.new,
            "present": self.present,
            "updated": self.updated,
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "filtered": self.filtered,
            "dropped_boxes": self.dropped_boxes,
            "label_rule": self.label_rule,
            "mixed": [{"file": f, "boxes": r} for f, r in self.mixed],
        }


@dataclass
class _Item:
    """One thing to import: a parsed record, or a station frame with its result."""

    record: Record
    result: dict[str, Any] | None = None


def _records_for(
    src: Path,
    fmt: str,
    *,
    label: str | None,
    manifest: Path | None,
    split: str | None,
    images_root: Path | None,
    report: ImportReport,
    label_rule: LabelRule | None = None,
) -> list[_Item]:
    if fmt != "csv" and split is not None:
        raise FootageError("--split filters manifest rows; it needs --format csv")
    if label is not None and fmt != "masks":
        raise FootageError(f"--label is for --format masks; {fmt} brings its own labels")
    if fmt == "station":
        return _station_items(src, report)
    skips = report.skipped
    if fmt == "folder":
        _need_dir(src, fmt)
        recs = scan_classes(src, skips=skips)
    elif fmt == "masks":
        _need_dir(src, fmt)
        if manifest is not None:
            rows = read_manifest(manifest, root=src, skips=skips)
            by_image = {r.image.resolve(): r.label for r in rows}
            recs = [
                Record(image=r.image, label=by_image.get(r.image.resolve(), label), mask=r.mask)
                for r in scan_masks(src, skips=skips)
            ]
        else:
            recs = scan_masks(src, label=label, skips=skips)
    elif fmt == "csv":
        path = src
        if src.is_dir():
            found = manifest_in(src)
            if found is None:
                raise FootageError(f"--format csv: no manifest.csv or splits.csv in {src}")
            path = found
        root = images_root if images_root is not None else path.parent
        all_rows = read_manifest(path, root=root, skips=skips)
        recs = [r for r in all_rows if split is None or r.split == split]
        report.filtered = len(all_rows) - len(recs)
        if split is not None and not recs:
            known = ", ".join(sorted({r.split for r in all_rows if r.split})) or "none"
            raise FootageError(f"{path} has no rows of split {split!r}; splits: {known}")
    elif fmt == "voc":
        recs = _voc_records(src, images_root, report)
    elif fmt == "coco":
        path = src
        if src.is_dir():
            cands = [src / "annotations.json", *sorted(src.glob("instances*.json"))]
            path = next((c for c in cands if c.is_file()), src / "annotations.json")
        if path.exists() and annotation_format(path) != "coco":
            raise FootageError(f"{path} is not COCO JSON")
        recs = read_coco(path, images_root=images_root, skips=skips)
    else:
        raise FootageError(f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    if fmt in RULED_LAYOUTS:
        recs = _apply_rule(recs, label_rule or LabelRule(), report)
    else:
        check_rule_applies(fmt, label_rule)
    return [_Item(r) for r in recs]


def _apply_rule(recs: list[Record], rule: LabelRule, report: ImportReport) -> list[Record]:
    """Label VOC/COCO records by ``rule``; note the frames whose boxes disagree."""
    report.label_rule = rule.describe()
    out = relabel(recs, rule, report.skipped)
    for r in out:
        why = disagreement(r)
        if why:
            report.mixed.append((str(r.image), why))
    return out


def _need_dir(src: Path, fmt: str) -> None:
    if not src.is_dir():
        what = "is not a folder" if src.exists() else "does not exist"
        raise FootageError(f"--format {fmt}: {src} {what}")


def _voc_records(src: Path, images_root: Path | None, report: ImportReport) -> list[Record]:
    """VOC files one by one, so that one broken XML is reported and skipped, not fatal.

    A folder may hold the XML files or be a VOC dataset (``Annotations/`` beside
    ``JPEGImages/``).
    """
    if src.is_dir():
        ann = src / "Annotations"
        if not any(src.glob("*.xml")) and ann.is_dir():
            images_root = images_root if images_root is not None else src / "JPEGImages"
            src = ann
        return read_voc(src, images_root=images_root, skips=report.skipped)
    if not src.is_file():
        raise FootageError(f"--format voc: {src} does not exist")
    try:
        return [read_voc_file(src, images_root=images_root)]
    except FootageError as exc:
        report.skipped.append((str(src), str(exc).removeprefix(f"{src}: ")))
        return []


def _station_items(src: Path, report: ImportReport) -> list[_Item]:
    """A station folder written by :class:`inspector.footage.writer.FootageWriter`."""
    _need_dir(src, "station")
    marker = src / MARKER
    if marker.is_file():
        try:
            kind = json.loads(marker.read_text(encoding="utf-8")).get("kind")
        except (ValueError, AttributeError, OSError, RecursionError):
            kind = None
        if kind != KIND:
            raise FootageError(f"{marker}: not a station footage folder (kind {kind!r})")
    elif not (src / "frames").is_dir():
        raise FootageError(f"{src}: not a station footage folder (no {MARKER}, no frames/)")
    items = []
    frames = src / "frames"
    results = {p.name[: -len(RESULT_SUFFIX)]: p for p in frames.glob("*/*" + RESULT_SUFFIX)}
    for png in sorted(frames.glob("*/*.png")):
        if png.name.startswith("."):
            continue  # a temporary file of a write in progress
        if not is_inside(src, png):
            report.skipped.append((str(png), "symlink leading out of the footage folder refused"))
            results.pop(png.stem, None)
            continue
        fid = png.stem
        res = results.pop(fid, None)
        if res is None:
            report.skipped.append((str(png), f"no {RESULT_SUFFIX} beside it (unmatched frame)"))
            continue
        try:
            if not is_inside(src, res) or res.stat().st_size > 1024 * 1024:
                raise ValueError("outside the folder or over 1 MiB")
            doc = json.loads(res.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith(
                "inspector.result/"
            ):
                raise ValueError("not an inspector.result document")
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
            report.skipped.append((str(res), f"damaged result JSON ({str(exc)[:200]})"))
            continue
        items.append(_Item(Record(image=png), result=doc))
    for fid, res in sorted(results.items()):
        report.skipped.append((str(res), f"its frame {fid}.png is missing (unmatched result)"))
    return items


def import_footage(
    store: FootageStore,
    src: str | Path,
    fmt: str,
    *,
    label: str | None = None,
    manifest: str | Path | None = None,
    split: str | None = None,
    images_root: str | Path | None = None,
    label_map: Mapping[str, str] | None = None,
    progress: bool = True,
    max_pixels: int | None = None,
    label_rule: LabelRule | None = None,
) -> ImportReport:
    """Import ``src`` in format ``fmt`` into ``store``.

    :param store: the target store.
    :param src: the folder, manifest or annotation file.
    :param fmt: one of :data:`FORMATS`.
    :param label: the label of every image (``masks``; e.g. ``fray`` for ``MT_Fray/Imgs``).
    :param manifest: a CSV giving labels for ``masks`` pairs.
    :param split: import only manifest rows of this split (``csv``); the store's own
        held-out split is still by hash, the row's split is kept as provenance.
    :param images_root: where images are when not beside their annotations.
    :param label_map: rename labels (``free`` -> ``ok``).
    :param progress: False (``--no-progress``): progress lines in the log, never a bar.
    :param max_pixels: refuse images whose header states more pixels (default
        :func:`inspector.imageio.max_image_pixels`).
    :param label_rule: how a VOC/COCO frame's label is chosen (default: largest area,
        see :mod:`inspector.annotations.labels`).
    :raises FootageError: the source cannot be read at all (a missing folder, a manifest
        without an ``image`` column, a COCO file that is not COCO).
    """
    src = Path(src).expanduser()
    if fmt not in FORMATS:
        raise FootageError(f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    report = ImportReport()
    items = _records_for(
        src,
        fmt,
        label=label,
        manifest=Path(manifest) if manifest is not None else None,
        split=split,
        images_root=Path(images_root) if images_root is not None else None,
        report=report,
        label_rule=label_rule,
    )
    if label_map:
        mapped = apply_label_map([it.record for it in items], label_map)
        items = [_Item(r, it.result) for r, it in zip(mapped, items)]
    seen: set[str] = set()
    for n, item in enumerate(_progress(items, progress, fmt)):
        _import_one(store, item, fmt, src, report, seen, max_pixels)
        if n % 200 == 199:
            store.commit()
    store.commit()
    return report


def _progress(items: list[_Item], on: bool, fmt: str) -> Iterable[_Item]:
    """A bar on a terminal; progress lines without one or with ``--no-progress``."""
    return track(items, f"import {fmt}", unit="frames", progress=on, min_items=50)


def _import_one(
    store: FootageStore,
    item: _Item,
    fmt: str,
    src: Path,
    report: ImportReport,
    seen: set[str],
    max_pixels: int | None = None,
) -> None:
    rec = item.record
    where = str(rec.image)
    img, why = read_image(rec.image, grayscale=True, max_pixels=max_pixels)
    if img is None:
        report.skipped.append((where, why or "unreadable"))
        return
    h, w = img.shape[:2]
    if rec.size is not None and tuple(rec.size) != (w, h):
        report.skipped.append(
            (where, f"annotation says {rec.size[0]}x{rec.size[1]}, the image is {w}x{h}")
        )
        return
    mask = None
    if rec.mask is not None:
        mask, why = read_mask(rec.mask, max_pixels=max_pixels)
        if mask is None:
            report.skipped.append((where, f"its mask {rec.mask}: {why}"))
            return
        if mask.shape[:2] != (h, w):
            report.skipped.append(
                (where, f"its mask {rec.mask} is {mask.shape[1]}x{mask.shape[0]}, image {w}x{h}")
            )
            return
    boxes, dropped = clip_boxes(rec.boxes, w, h)
    dropped += rec.dropped_boxes
    if rec.boxes and not boxes:
        # Imported without them it would pass for an ok part.
        report.skipped.append((where, f"every box ({len(rec.boxes)}) lies outside the image"))
        return
    gray = to_gray(img, contiguous=True)
    fid = frame_hash(gray)
    if item.result is not None and fmt == "station" and Path(where).stem != fid:
        # The station names its frames by hash: a mismatch means the PNG was altered.
        report.skipped.append((where, "content does not match its frame id (altered file)"))
        return
    if fid in seen:
        report.present += 1
        return
    seen.add(fid)
    try:
        rel = rec.image.relative_to(src if src.is_dir() else src.parent).as_posix()
    except ValueError:
        rel = str(rec.image)
    outcome = store.add(
        gray,
        label=rec.label,
        label_source="import" if rec.label is not None else None,
        mask=mask,
        boxes=boxes,
        source_file=rel,
        source_format=fmt,
        source_root=str(src.resolve()),
        source_split=rec.split,
        result=item.result,
        frame_id=fid,
        commit=False,
    )
    report.dropped_boxes += dropped
    if outcome.status == "new":
        report.new += 1
    elif outcome.status == "updated":
        report.updated += 1
    else:
        report.present += 1
