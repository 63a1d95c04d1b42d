"""Folder layouts and CSV manifests: class folders, image + mask pairs, flat folders.

See :mod:`inspector.annotations` for the rules annotation files are read under.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

from inspector.annotations.common import (
    MASK_DIRS,
    MAX_CSV_FIELD,
    Record,
    Skips,
    confine,
    is_inside,
    note,
    read_bounded,
)
from inspector.errors import FootageError
from inspector.imageio import IMAGE_SUFFIXES, is_image_file


def images_in(folder: Path, *, recursive: bool, skips: Skips | None = None) -> list[Path]:
    """Image files in ``folder``; those whose symlink leads out of it are skipped."""
    it = folder.rglob("*") if recursive else folder.iterdir()
    out = []
    for p in sorted(it):
        if p.name.startswith(".") or not is_image_file(p):
            continue
        if p.is_symlink() and not is_inside(folder, p):
            note(skips, str(p), "symlink leading out of the footage folder refused")
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


def mask_like(path: Path, all_images: set[Path]) -> bool:
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
    images = images_in(folder, recursive=False, skips=skips)
    found = set(images)
    return [Record(image=p, mask=_pair_mask(p, found)) for p in images if not mask_like(p, found)]


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
    images = images_in(folder, recursive=True, skips=skips)
    found = set(images)
    return [
        Record(image=p, label=label, mask=_pair_mask(p, found))
        for p in images
        if not mask_like(p, found)
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
            note(skips, str(sub), "symlink leading out of the footage folder refused")
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
            note(skips, f"{where}:{reader.line_num}", f"unreadable CSV row ({exc})")
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
    data = read_bounded(csv_path, "manifest")
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
            note(skips, where, why)
            continue
        row = {k: v.strip() for k, v in zip(fields, values)}
        if not row.get("image"):
            note(skips, where, "empty image path")
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
            note(skips, where, why)
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
