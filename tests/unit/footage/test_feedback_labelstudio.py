"""Operator feedback in the footage store, and the Label Studio round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inspector.errors import FootageError
from inspector.footage.feedback import (
    feedback_counts,
    list_feedback,
    record_feedback,
    record_label,
)
from inspector.footage.labelstudio import export_tasks, import_annotations, read_export
from inspector.footage.store import FootageStore, frame_hash
from inspector.station.result import Result

CLASSES = ["ok", "line", "point"]
SCAN = {"glimpse": 32, "zoom_levels": 3}


def _result(i: int, label: str) -> dict:
    probs = {"ok": [0.8, 0.1, 0.1], "line": [0.3, 0.6, 0.1], "point": [0.2, 0.2, 0.6]}[label]
    return Result.decided(
        station="line7", part_id=f"p{i}", classes=CLASSES, probabilities=probs, label=label,
        glimpse_path=[(0.5, 0.5, 0), (0.25, 0.75, 1), (0.9, 0.1, 2)], steps=3,
        captured_at=1.7e9 + i, latency_ms=3.0, model_sha256="ab" * 32, profile_name="lcd",
        profile_sha256="cd" * 32, ok_class="ok",
    ).to_dict()  # fmt: skip


def _image(i: int) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 255, (96, 128), dtype=np.uint8)


def test_feedback_is_a_label_with_provenance_and_a_row(tmp_path):
    with FootageStore(tmp_path / "s", create=True) as store:
        fb, changed = record_feedback(store, _image(0), _result(0, "line"), "ok", "alice",
                                      ok_class="ok")  # fmt: skip
        assert changed and fb.action == "correct" and fb.outcome == "false alarm"
        rec = store.get(frame_hash(_image(0)))
        assert (rec.label, rec.label_source) == ("ok", "operator:alice")
        assert rec.result["part_id"] == "p0" and rec.station_label == "line"
        fb2, _ = record_feedback(store, _image(1), _result(1, "ok"), "point", "bob",
                                 ok_class="ok")  # fmt: skip
        assert fb2.outcome == "miss"
        record_feedback(store, _image(2), _result(2, "point"), "point", "bob", ok_class="ok")
        rows = list_feedback(store)
        assert [r.operator for r in rows] == ["bob", "bob", "alice"]  # newest first
        assert rows[-1].model_sha256 == "ab" * 32 and rows[-1].station == "line7"
        assert feedback_counts(store) == {"feedback": 3, "confirmed": 1, "corrected": 2,
                                          "false_alarms": 1, "misses": 1}  # fmt: skip
        # An operator's label settles the frame: never listed for review, never overridden
        # by an import.
        assert all(r.frame_id != rec.frame_id for r, _ in store.needs_review())
        out = store.add(_image(0), label="line", label_source="import")
        assert out.status == "present"
        with pytest.raises(FootageError, match="operator name"):
            record_feedback(store, _image(0), _result(0, "line"), "ok", "al ice", ok_class="ok")
        with pytest.raises(FootageError, match="label source"):
            store.set_label(rec.frame_id, "ok", "operator:bad name")


def test_store_camera_replays_operator_labelled_frames(tmp_path):
    from camera_drivers.footage_store import StoreCamera

    with FootageStore(tmp_path / "s", create=True) as store:
        for i in range(4):
            store.add(_image(i), result=_result(i, "line"))
        record_feedback(store, _image(1), _result(1, "line"), "ok", "alice", ok_class="ok")
    cam = StoreCamera(str(tmp_path / "s"), label_source="operator")
    assert [f.truth.label for f in cam.frames()] == ["ok"]
    assert len(StoreCamera(str(tmp_path / "s"), label_source="station-verdict")) == 3
    cam.close()


def test_label_studio_export_import_round_trip(tmp_path):
    with FootageStore(tmp_path / "s", create=True) as store:
        for i in range(3):
            store.add(_image(i), result=_result(i, ["ok", "line", "point"][i]))
        store.add(_image(9), label="ok")  # an imported frame: a task without prediction
        out, cfg, n = export_tasks(store, store.records(), tmp_path / "tasks.json", scan=SCAN,
                                   classes=CLASSES)  # fmt: skip
    assert n == 4 and '<Choices name="class" toName="image"' in cfg.read_text()
    tasks = json.loads(out.read_text())
    by_id = {t["data"]["frame_id"]: t for t in tasks}
    t = by_id[frame_hash(_image(1))]
    assert t["data"]["image"].startswith("/data/local-files/?d=frames/")
    (pred,) = t["predictions"]
    assert pred["model_version"] == ("ab" * 32)[:12] and pred["score"] == pytest.approx(0.6)
    kinds = [r["type"] for r in pred["result"]]
    assert kinds == ["choices", "rectanglelabels", "rectanglelabels", "rectanglelabels"]
    assert pred["result"][0]["value"] == {"choices": ["line"]}
    whole = pred["result"][1]
    assert whole["value"]["x"] == 0 and whole["value"]["width"] == 100.0  # zoom 0: the frame
    deep = pred["result"][3]["value"]  # zoom 2: native 32 px, clamped into the corner
    assert deep["width"] == pytest.approx(100 * 32 / 128) and deep["y"] == 0.0
    assert all(0 <= deep[k] <= 100 for k in ("x", "y", "width", "height"))
    assert "predictions" not in by_id[frame_hash(_image(9))]

    # What Label Studio exports after annotation (its documented shape): the tasks, each
    # with "annotations"; one cancelled, one task not in the store, one relabelled twice.
    exported = []
    for i, task in enumerate(tasks):
        task = {"id": i + 1, **task, "annotations": []}
        if task["data"]["frame_id"] == frame_hash(_image(1)):
            task["annotations"] = [
                {"id": 11, "completed_by": 7, "was_cancelled": False,
                 "created_at": "2026-01-01T10:00:00.000000Z", "updated_at": "2026-01-01T10:00:00Z",
                 "result": [{"from_name": "class", "to_name": "image", "type": "choices",
                             "value": {"choices": ["point"]}}]},
                {"id": 12, "completed_by": {"id": 8, "email": "eve@line.example"},
                 "was_cancelled": False, "created_at": "2026-01-02T10:00:00Z",
                 "result": [{"from_name": "class", "to_name": "image", "type": "choices",
                             "value": {"choices": ["ok"]}}]},
            ]  # fmt: skip
        elif task["data"]["frame_id"] == frame_hash(_image(2)):
            task["annotations"] = [
                {"id": 13, "completed_by": 7, "was_cancelled": True,
                 "result": [{"type": "choices", "value": {"choices": ["ok"]}}]}]  # fmt: skip
        exported.append(task)
    exported.append({"id": 99, "data": {"image": "/data/upload/1/other.png"},
                     "annotations": [{"result": [{"type": "choices",
                                                  "value": {"choices": ["ok"]}}]}]})  # fmt: skip
    src = tmp_path / "export.json"
    src.write_text(json.dumps(exported))
    with FootageStore(tmp_path / "s") as store:
        first = import_annotations(store, src)
        again = import_annotations(store, src)
        rec = store.get(frame_hash(_image(1)))
        rows = list_feedback(store)
    assert (first.updated, first.present) == (1, 0)
    assert len(first.skipped) == 4  # two without annotations, one cancelled, one unknown
    assert (again.updated, again.present) == (0, 1)  # nothing new the second time
    assert (rec.label, rec.label_source) == ("ok", "operator:eve@line.example")  # the latest
    assert len(rows) == 1 and rows[0].via == "label-studio" and rows[0].station == "line7"
    assert rows[0].outcome == "false alarm"  # the station said line; the ok class is first


def test_label_studio_import_refuses_what_is_not_an_export(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('"just a string"')
    with pytest.raises(FootageError, match="list of tasks"):
        read_export(bad)
    bad.write_text("{not json")
    with pytest.raises(FootageError, match="not Label Studio JSON"):
        read_export(bad)
    with FootageStore(tmp_path / "s", create=True) as store:
        store.add(_image(0), result=_result(0, "line"))
        fid = frame_hash(_image(0))
        # Confirming the station's class makes the label the operator's, once.
        assert record_label(store, fid, "line", "x", via="t")
        assert not record_label(store, fid, "line", "x", via="t")
        assert len(list_feedback(store)) == 1
