"""Label Studio round trip: export store frames as tasks with pre-annotations, import labels.

Export (``footage export --format label-studio``) writes Label Studio's JSON task list
(its "Basic Label Studio JSON format" with a ``predictions`` key, see
https://labelstud.io/guide/predictions): for each frame a task whose ``data.image``
points at the frame through Label Studio's local-files storage
(``/data/local-files/?d=frames/ab/<frame_id>.png``; start Label Studio with
``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true`` and
``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT`` at the store), ``data.frame_id`` (what the
import matches on), and, for station frames, one prediction: the model's class as a
``choices`` result (``from_name`` ``class``) and each glimpse as a ``rectanglelabels``
box labelled ``glimpse`` (percent of the image, as Label Studio expects), with the
model's sha256 as ``model_version`` and its confidence as ``score``. The labelling
configuration that matches (``<Choices name="class">``, ``<RectangleLabels
name="glimpse">``) is written beside it.

Import (``footage import EXPORT.json --format label-studio``) reads Label Studio's JSON
export (tasks with ``annotations``): the latest annotation that was not cancelled gives
the frame's class (its ``choices`` result); the label source is
``operator:<annotator>`` (the annotator's e-mail, or ``ls-<user id>``), and each
change is also a feedback row (``via`` ``label-studio``). Frames are matched by
``data.frame_id`` or by the image's file name; a frame not in the store is reported and
skipped. Importing the same export again changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from inspector.errors import FootageError
from inspector.footage.store import OPERATOR_RE, FootageStore, FrameRecord

#: Where Label Studio serves local files from (its local-files storage URL).
LOCAL_FILES = "/data/local-files/?d="
#: The control names the tasks and the labelling configuration use.
CLASS_CONTROL, GLIMPSE_CONTROL, IMAGE_OBJECT = "class", "glimpse", "image"
#: Largest export file read (Label Studio exports of a few hundred thousand tasks fit).
MAX_BYTES = 512 * 1024 * 1024
_LABEL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def label_config(classes: Iterable[str]) -> str:
    """The Label Studio labelling configuration (XML) that the exported tasks fit."""
    choices = "\n".join(f'    <Choice value="{c}"/>' for c in classes)
    return (
        "<View>\n"
        f'  <Image name="{IMAGE_OBJECT}" value="$image" zoom="true"/>\n'
        f'  <Choices name="{CLASS_CONTROL}" toName="{IMAGE_OBJECT}" choice="single" '
        'showInline="true">\n'
        f"{choices}\n"
        "  </Choices>\n"
        f'  <RectangleLabels name="{GLIMPSE_CONTROL}" toName="{IMAGE_OBJECT}">\n'
        '    <Label value="glimpse"/>\n'
        "  </RectangleLabels>\n"
        "</View>\n"
    )


def task_for(
    rec: FrameRecord, scan: Mapping[str, Any] | None, image_prefix: str = LOCAL_FILES
) -> dict[str, Any]:
    """One Label Studio task for a store frame (with the station's verdict as prediction).

    :param rec: the frame's record.
    :param scan: the model's scan settings (``glimpse``, ``zoom_levels``) for the glimpse
        boxes; None leaves the boxes out.
    :param image_prefix: what goes before the frame's path in ``data.image``.
    """
    data: dict[str, Any] = {
        "image": image_prefix + rec.image_path,
        "frame_id": rec.frame_id,
        "label": rec.label,
        "label_source": rec.label_source,
        "split": rec.split,
    }
    task: dict[str, Any] = {"data": data}
    res = rec.result
    if not res or not res.get("label"):
        return task
    data.update(station=res.get("station"), part_id=res.get("part_id"), result_id=res.get("id"))
    out: list[dict[str, Any]] = [
        {"id": "class", "from_name": CLASS_CONTROL, "to_name": IMAGE_OBJECT, "type": "choices",
         "value": {"choices": [res["label"]]}},
    ]  # fmt: skip
    if scan is not None:
        from inspector.geometry import glimpse_boxes

        w, h = rec.width, rec.height
        for i, (x0, y0, x1, y1) in enumerate(glimpse_boxes(res.get("glimpse_path"), w, h, scan)):
            out.append({
                "id": f"glimpse{i + 1}", "from_name": GLIMPSE_CONTROL, "to_name": IMAGE_OBJECT,
                "type": "rectanglelabels", "original_width": w, "original_height": h,
                "image_rotation": 0,
                "value": {"x": 100.0 * x0 / w, "y": 100.0 * y0 / h,
                          "width": 100.0 * (x1 - x0) / w, "height": 100.0 * (y1 - y0) / h,
                          "rotation": 0, "rectanglelabels": ["glimpse"]},
            })  # fmt: skip
    sha = (res.get("model") or {}).get("sha256") or "unknown"
    pred: dict[str, Any] = {"model_version": sha[:12], "result": out}
    if res.get("confidence") is not None:
        pred["score"] = float(res["confidence"])
    task["predictions"] = [pred]
    return task


def export_tasks(
    store: FootageStore,
    records: Iterable[FrameRecord],
    out: str | Path,
    *,
    scan: Mapping[str, Any] | None,
    classes: Iterable[str],
    image_prefix: str = LOCAL_FILES,
) -> tuple[Path, Path, int]:
    """Write the tasks JSON and the matching labelling configuration beside it.

    :returns: (tasks file, config file, number of tasks).
    """
    from inspector.files import write_atomic

    out = Path(out)
    tasks = [task_for(r, scan, image_prefix) for r in records]
    write_atomic(out, json.dumps(tasks, indent=1).encode())
    cfg = out.with_name(out.stem + ".label-config.xml")
    write_atomic(cfg, label_config(classes).encode())
    return out, cfg, len(tasks)


def _annotator(ann: Mapping[str, Any]) -> str:
    who = ann.get("completed_by")
    if isinstance(who, Mapping):
        email = who.get("email")
        if isinstance(email, str) and OPERATOR_RE.match(email):
            return email
        who = who.get("id")
    name = f"ls-{who}" if who is not None else "label-studio"
    return name if OPERATOR_RE.match(name) else "label-studio"


def _when(ann: Mapping[str, Any]) -> float | None:
    for key in ("updated_at", "created_at"):
        v = ann.get(key)
        if isinstance(v, str):
            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def _choice(ann: Mapping[str, Any]) -> str | None:
    for r in ann.get("result") or ():
        if isinstance(r, Mapping) and r.get("type") == "choices":
            got = (r.get("value") or {}).get("choices") or []
            if got and isinstance(got[0], str):
                return got[0]
    return None


def read_export(path: str | Path) -> list[dict[str, Any]]:
    """Label Studio's JSON export: a list of tasks.

    :raises FootageError: unreadable, too large, or not a list of task objects.
    """
    p = Path(path)
    try:
        if p.stat().st_size > MAX_BYTES:
            raise FootageError(f"{p}: larger than {MAX_BYTES // 2**20} MB")
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FootageError(f"{p} does not exist") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FootageError(f"{p}: not Label Studio JSON ({exc})") from None
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not all(isinstance(t, dict) for t in doc):
        raise FootageError(f"{p}: expected Label Studio's JSON export, a list of tasks")
    return doc


def import_annotations(store: FootageStore, src: str | Path) -> Any:
    """Apply a Label Studio export's annotations to the store's frames (idempotent).

    :returns: an :class:`~inspector.footage.importers.ImportReport` (``updated``: labels
        changed; ``present``: frames whose label already was the annotation's).
    :raises FootageError: the file is not a Label Studio export.
    """
    from inspector.footage.feedback import record_label
    from inspector.footage.importers import ImportReport

    report = ImportReport()
    for n, task in enumerate(read_export(src)):
        data = task.get("data") if isinstance(task.get("data"), Mapping) else {}
        where = f"{src}: task {task.get('id', n)}"
        fid = data.get("frame_id")
        if not (isinstance(fid, str) and _HEX64.fullmatch(fid)):
            found = _HEX64.search(str(data.get("image", "")))
            fid = found.group(0) if found else None
        if fid is None or fid not in store:
            report.skipped.append((where, "frame not in the store" if fid else "no frame id"))
            continue
        anns = [a for a in task.get("annotations") or () if isinstance(a, Mapping)]
        anns = [a for a in anns if not a.get("was_cancelled") and _choice(a)]
        if not anns:
            report.skipped.append((where, "no annotation with a class"))
            continue
        ann = max(anns, key=lambda a: _when(a) or 0.0)
        label = _choice(ann)
        if not _LABEL_RE.match(label or ""):
            report.skipped.append((where, f"bad class {label!r}"))
            continue
        changed = record_label(store, fid, label, _annotator(ann), via="label-studio",
                               at=_when(ann))  # fmt: skip
        if changed:
            report.updated += 1
        else:
            report.present += 1
    store.commit()
    return report
