"""COCO detection annotations: one JSON file for a set of images.

See :mod:`inspector.annotations` for the rules annotation files are read under.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inspector.annotations.common import (
    MAX_PATH_CHARS,
    Record,
    Skips,
    clip_boxes,
    find_image,
    finite,
    int_box,
    label_from_boxes,
    note,
    read_bounded,
)
from inspector.errors import FootageError
from inspector.frames import Box


def _coco_doc(json_path: Path) -> dict[str, Any]:
    data = read_bounded(json_path, "COCO file")
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
    nums = [finite(v) for v in bbox]
    if any(v is None for v in nums):
        return image_id, None, f"bbox holds something that is not a finite number: {bbox!r:.80}"
    x, y, w, h = nums
    if w < 0 or h < 0:
        return image_id, None, "has a negative bbox size"
    cat = _coco_id(a.get("category_id"))
    if cat is None or cat not in cats:
        return image_id, None, f"has unknown category_id {a.get('category_id')!r:.80}"
    return image_id, int_box(x, y, x + w, y + h, cats[cat]), None


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
    skipped the same way. ``file_name`` must stay inside the folder it is looked up
    in; it may carry folders (``images/x.jpg``), Windows separators or no extension
    (see :func:`inspector.annotations.common.find_image`); an image that is not there
    is a skip naming the entry and what was tried.

    :param json_path: the annotation file.
    :param images_root: the folder ``file_name`` is relative to (default: the JSON's
        folder, then its ``images/`` sub-folder, then the ``images/`` beside it).
    :param skips: where skipped images and annotations are recorded (default: logged).
    :raises FootageError: not JSON, or not the COCO shape.
    """
    json_path = Path(json_path)
    doc = _coco_doc(json_path)
    boxes = _Boxes(json_path, _categories(json_path, doc), doc, skips)
    roots = [Path(images_root)] if images_root is not None else []
    roots += [json_path.parent, json_path.parent / "images", json_path.parent.parent / "images"]
    out = []
    for n, im in enumerate(doc["images"]):
        rec, why = _image_record(im, roots, boxes)
        if rec is None:
            note(skips, f"{json_path}:images[{n}]", str(why))
        else:
            out.append(rec)
    return out


def _categories(json_path: Path, doc: Mapping[str, Any]) -> dict[Any, str]:
    """Category id -> name."""
    cats: dict[Any, str] = {}
    for n, c in enumerate(doc.get("categories") or []):
        cid = _coco_id(c.get("id")) if isinstance(c, dict) else None
        cname = c.get("name") if isinstance(c, dict) else None
        if cid is None or not isinstance(cname, str) or not cname or len(cname) > 200:
            raise FootageError(f"{json_path}: categories[{n}] needs 'id' and a 'name' string")
        cats[cid] = cname
    return cats


class _Boxes:
    """The annotations grouped by image: boxes (file order), dropped counts, damage."""

    def __init__(
        self, json_path: Path, cats: Mapping[Any, str], doc: Mapping[str, Any], skips: Skips | None
    ) -> None:
        self.per_image: dict[Any, list[Box]] = defaultdict(list)
        self.dropped: dict[Any, int] = defaultdict(int)
        self.damaged: dict[Any, str] = {}
        for n, a in enumerate(doc.get("annotations") or []):
            image_id, box, why = _coco_box(a, cats)
            if why:
                if image_id is None:
                    note(skips, f"{json_path}:annotations[{n}]", why)
                else:
                    self.damaged.setdefault(image_id, f"annotations[{n}] {why}")
            elif box is None:
                self.dropped[image_id] += 1
            else:
                self.per_image[image_id].append(box)


def _image_record(im: Any, roots: list[Path], boxes: _Boxes) -> tuple[Record | None, str | None]:
    """The record of one ``images`` entry, or ``(None, why it is skipped)``."""
    image_id = _coco_id(im.get("id")) if isinstance(im, dict) else None
    name = im.get("file_name") if isinstance(im, dict) else None
    if image_id is None or not isinstance(name, str):
        return None, "needs an 'id' and a 'file_name' string"
    if image_id in boxes.damaged:
        return None, boxes.damaged[image_id]
    size = None
    if "width" in im or "height" in im:
        w, h = finite(im.get("width")), finite(im.get("height"))
        if w is None or h is None or w < 1 or h < 1 or w != int(w) or h != int(h):
            return None, "width and height must be positive whole numbers"
        size = (int(w), int(h))
    image, why = find_image(roots, name)
    if why:
        return None, f"file_name: {why}"
    kept, lost = tuple(boxes.per_image.get(image_id, ())), boxes.dropped.get(image_id, 0)
    if size is not None:
        kept, more = clip_boxes(kept, *size)
        lost += more
    if lost and not kept:
        return None, f"every box ({lost}) lies outside the image or has no area"
    label = label_from_boxes(kept)
    return Record(image=image, label=label, boxes=kept, size=size, dropped_boxes=lost), None
