"""Annotation files as data sets ship them (issue #33 item 3): image names without an
extension, missing images named with what was tried, the frame-label rule, frames whose
boxes disagree, COCO file_name forms."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from inspector.annotations import LabelRule, read_coco, read_voc, read_voc_file
from inspector.cli import main
from inspector.errors import FootageError
from inspector.footage.store import FootageStore

OBJ = (
    "<object><name>{c}</name><bndbox><xmin>{x0}</xmin><ymin>1</ymin><xmax>{x1}</xmax>"
    "<ymax>{y1}</ymax></bndbox></object>"
)


def _voc(path, filename, objs=()):
    body = "".join(OBJ.format(c=c, x0=x0, x1=x1, y1=y1) for c, x0, x1, y1 in objs)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"<annotation><filename>{filename}</filename><size><width>40</width>"
        f"<height>30</height></size>{body}</annotation>"
    )


def _img(path, seed):
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.random.default_rng(seed).integers(0, 256, (30, 40), np.uint8))


def test_voc_filename_without_extension_tries_the_image_extensions(tmp_path):
    _img(tmp_path / "IMAGES" / "patches_104.jpg", 1)
    _voc(tmp_path / "ANNOTATIONS" / "patches_104.xml", "patches_104", [("patches", 2, 9, 9)])
    rec = read_voc_file(tmp_path / "ANNOTATIONS" / "patches_104.xml")
    assert rec.image == tmp_path / "IMAGES" / "patches_104.jpg"
    _voc(tmp_path / "ANNOTATIONS" / "gone_1.xml", "gone_1")
    skips = []
    recs = read_voc(tmp_path / "ANNOTATIONS", skips=skips)
    assert len(recs) == 1 and len(skips) == 1
    where, why = skips[0]
    assert where.endswith("gone_1.xml")
    assert why.startswith("<filename>: no such image 'gone_1' (tried ") and "gone_1.jpg" in why


def test_label_rules(tmp_path):
    img = tmp_path / "IMAGES" / "crazing" / "scratches_7.png"
    _img(img, 2)
    objs = [("inclusion", 1, 3, 3), ("scratches", 5, 30, 25)]  # the second is larger
    _voc(tmp_path / "a.xml", "crazing/scratches_7.png", objs)
    rec = read_voc_file(tmp_path / "a.xml", images_root=tmp_path / "IMAGES")
    assert LabelRule().label(rec) == ("scratches", None)
    assert LabelRule("first-object").label(rec) == ("inclusion", None)
    assert LabelRule("folder").label(rec) == ("crazing", None)
    assert LabelRule("filename-pattern").label(rec) == ("scratches", None)
    assert LabelRule("filename-pattern", r"^(?P<label>[a-z]{3})").label(rec) == ("scr", None)
    label, why = LabelRule("filename-pattern", r"^\d+$").label(rec)
    assert label is None and "does not match" in why
    assert "the class with the most box area" in LabelRule().describe()
    with pytest.raises(FootageError, match="unknown label rule"):
        LabelRule("biggest")
    with pytest.raises(FootageError, match="--label-pattern"):
        LabelRule("filename-pattern", "(")


def test_import_prints_the_rule_and_reports_frames_whose_boxes_disagree(tmp_path, capsys):
    voc = tmp_path / "voc"
    for i, objs in enumerate([[("a", 1, 20, 20)], [("a", 1, 4, 4), ("b", 5, 30, 25)]]):
        _img(voc / "JPEGImages" / f"a_{i}.png", i)
        _voc(voc / "Annotations" / f"a_{i}.xml", f"a_{i}.png", objs)
    report = tmp_path / "r.json"
    args = ["footage", "import", str(voc), "--format", "voc", "--json", str(report)]
    assert main([*args, "--store", str(tmp_path / "s1")]) == 0
    out = capsys.readouterr().out
    assert "frame labels by largest-area: the class with the most box area" in out
    assert "1 frames whose boxes disagree" in out
    assert "boxes disagree" in out and "a_1.png: boxes of 2 classes (a, b); labelled b" in out
    doc = json.loads(report.read_text())
    assert doc["label_rule"].startswith("largest-area") and len(doc["mixed"]) == 1
    rule = ["--label-rule", "filename-pattern"]
    assert main([*args, "--store", str(tmp_path / "s2"), *rule]) == 0
    capsys.readouterr()
    with FootageStore(tmp_path / "s2") as s:
        assert {r.label for r in s.records()} == {"a"}
    doc = json.loads(report.read_text())
    assert [m["boxes"] for m in doc["mixed"]] == ["boxes of 2 classes (a, b); labelled a"]
    assert main([*args, "--store", str(tmp_path / "s3"), "--label-pattern", "x"]) == 2
    assert "--label-pattern is for --label-rule filename-pattern" in capsys.readouterr().err


def test_coco_file_name_forms_and_missing_images(tmp_path):
    images = tmp_path / "images"
    for name in ("a.jpg", "b.png", "c.png", "d.bmp"):
        _img(images / name, len(name))
    entries = ["images/a.jpg", "images\\b.png", "c", "/somewhere/else/d.bmp", "e.png"]
    doc = {
        "images": [
            {"id": i, "file_name": f, "width": 40, "height": 30} for i, f in enumerate(entries)
        ],
        "annotations": [],
        "categories": [],
    }
    (tmp_path / "ann" / "instances.json").parent.mkdir()
    (tmp_path / "ann" / "instances.json").write_text(json.dumps(doc))
    skips = []
    recs = read_coco(tmp_path / "ann" / "instances.json", skips=skips)
    assert [r.image.name for r in recs] == ["a.jpg", "b.png", "c.png", "d.bmp"]
    assert all(r.image.parent == images for r in recs)
    ((where, why),) = skips
    assert where.endswith("instances.json:images[4]")
    assert why.startswith("file_name: no such image 'e.png' (tried ")


def test_the_folder_camera_labels_voc_frames_by_the_same_rule_as_the_import(tmp_path):
    from inspector.camera import open_camera
    from inspector.errors import CameraError

    voc = tmp_path / "voc"
    objs = [("inclusion", 1, 3, 3), ("scratches", 5, 30, 25)]  # the second is larger
    _img(voc / "JPEGImages" / "crazing_1.png", 1)
    _voc(voc / "Annotations" / "crazing_1.xml", "crazing_1.png", objs)

    def labels(**rule):
        cam = open_camera("folder", {"path": str(voc), "layout": "voc", **rule})
        try:
            return [f.truth.label for f in cam.frames()]
        finally:
            cam.close()

    assert labels() == labels(label_rule="largest-area") == ["scratches"]
    assert labels(label_rule="first-object") == ["inclusion"]
    assert labels(label_rule="folder") == ["JPEGImages"]
    assert labels(label_rule="filename-pattern") == ["crazing"]
    assert labels(label_rule="filename-pattern", label_pattern=r"^(?P<label>[a-z]{3})") == ["cra"]
    with pytest.raises(CameraError, match="unknown label rule"):
        labels(label_rule="biggest")
    with pytest.raises(CameraError, match="is for label rule filename-pattern"):
        labels(label_pattern="x")
    _img(tmp_path / "classes" / "dent" / "a.png", 2)
    with pytest.raises(CameraError, match="label_rule is for layout voc or coco; classes"):
        open_camera("folder", {"path": str(tmp_path / "classes"), "label_rule": "folder"})
