"""Annotation parsers shared by the folder camera and the footage importer."""

from __future__ import annotations

import json

import pytest

from inspector import Box, FootageError
from inspector.annotations import (
    Record,
    annotation_format,
    apply_label_map,
    detect_layout,
    discover,
    label_from_boxes,
    read_coco,
    read_manifest,
    read_voc_file,
)

VOC = """<annotation>
  <folder>imgs</folder>
  <filename>{name}</filename>
  <size><width>100</width><height>80</height><depth>1</depth></size>
  {objects}
</annotation>
"""
OBJ = (
    "<object><name>{label}</name><bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin>"
    "<xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
)


def touch(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_label_from_boxes_is_largest_area():
    assert label_from_boxes([]) == "ok"
    assert label_from_boxes([], ok_class="free") == "free"
    boxes = [Box(0, 0, 2, 2, "a"), Box(0, 0, 2, 2, "a"), Box(0, 0, 3, 3, "b")]
    assert label_from_boxes(boxes) == "b"  # a: 4 + 4 = 8 px, b: 9 px
    boxes.append(Box(0, 0, 1, 2, "a"))
    assert label_from_boxes(boxes) == "a"  # a: 10 px


def test_manifest_split_filter_and_paths(tmp_path):
    (tmp_path / "m.csv").write_text(
        "image,mask,label,split\n"
        "A/x.jpg,A/x.png,crack,test\n"
        "A/y.jpg,,free,train\n"
        "B/z.jpg,,free,test\n"
        "/abs/z.jpg,,free,test\n"
    )
    skips = []
    recs = read_manifest(tmp_path / "m.csv", split="test", skips=skips)
    assert [r.image for r in recs] == [tmp_path / "A/x.jpg", tmp_path / "B/z.jpg"]
    assert recs[0].mask == tmp_path / "A/x.png" and recs[0].label == "crack"
    assert recs[1].mask is None and recs[1].split == "test"
    # An absolute path is a counted, named skip (paths stay inside the footage folder).
    assert skips == [(f"{tmp_path / 'm.csv'}:5", skips[0][1])]
    assert "absolute path refused" in skips[0][1]
    assert len(read_manifest(tmp_path / "m.csv", skips=[])) == 3
    with pytest.raises(FootageError, match="no rows of split 'tset'; splits: test, train"):
        read_manifest(tmp_path / "m.csv", split="tset")


def test_manifest_without_image_column(tmp_path):
    (tmp_path / "m.csv").write_text("file,label\na.jpg,ok\n")
    with pytest.raises(FootageError, match="expected a header with columns image"):
        read_manifest(tmp_path / "m.csv")
    with pytest.raises(FootageError, match="does not exist"):
        read_manifest(tmp_path / "none.csv")


def test_voc_boxes_are_converted_to_zero_based_exclusive(tmp_path):
    objs = OBJ.format(label="line", x0=1, y0=1, x1=10, y1=4) + OBJ.format(
        label="point", x0=50, y0=50, x1=51, y1=51
    )
    xml = tmp_path / "a.xml"
    xml.write_text(VOC.format(name="a.jpg", objects=objs))
    touch(tmp_path / "a.jpg")
    rec = read_voc_file(xml)
    assert rec.image == tmp_path / "a.jpg" and rec.size == (100, 80)
    assert rec.boxes == (Box(0, 0, 10, 4, "line"), Box(49, 49, 51, 51, "point"))
    assert rec.label == "line"  # 40 px against 4 px


def test_voc_without_objects_is_ok_and_broken_xml_is_an_error(tmp_path):
    (tmp_path / "a.xml").write_text(VOC.format(name="a.jpg", objects=""))
    touch(tmp_path / "a.jpg")
    assert read_voc_file(tmp_path / "a.xml").label == "ok"
    (tmp_path / "b.xml").write_text("<annotation><filename>b.jpg</filename>")
    with pytest.raises(FootageError, match="b.xml: not valid VOC XML"):
        read_voc_file(tmp_path / "b.xml")
    (tmp_path / "c.xml").write_text(
        VOC.format(name="c.jpg", objects=OBJ.format(label="x", x0="a", y0=1, x1=2, y1=2))
    )
    with pytest.raises(FootageError, match="xmin> is not a number"):
        read_voc_file(tmp_path / "c.xml")


def test_coco(tmp_path):
    doc = {
        "images": [
            {"id": 1, "file_name": "a.png", "width": 40, "height": 30},
            {"id": 2, "file_name": "b.png", "width": 40, "height": 30},
        ],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 7, "bbox": [2.5, 3, 10, 1.2]},
            {"id": 2, "image_id": 1, "category_id": 8, "bbox": [0, 0, 2, 2]},
        ],
        "categories": [{"id": 7, "name": "line"}, {"id": 8, "name": "point"}],
    }
    (tmp_path / "ann.json").write_text(json.dumps(doc))
    touch(tmp_path / "a.png")
    touch(tmp_path / "b.png")
    recs = read_coco(tmp_path / "ann.json")
    assert recs[0].boxes == (Box(2, 3, 13, 5, "line"), Box(0, 0, 2, 2, "point"))
    assert recs[0].label == "line" and recs[1].label == "ok" and recs[1].boxes == ()
    assert annotation_format(tmp_path / "ann.json") == "coco"
    doc["annotations"][0]["category_id"] = 99
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    skips = []
    recs = read_coco(tmp_path / "bad.json", skips=skips)
    # The image with the unusable annotation is skipped: without its box it would pass as ok.
    assert [r.image.name for r in recs] == ["b.png"]
    assert skips == [(f"{tmp_path / 'bad.json'}:images[0]", skips[0][1])]
    assert "unknown category_id 99" in skips[0][1]
    (tmp_path / "notjson.json").write_text("{oops")
    with pytest.raises(FootageError, match="not valid JSON"):
        read_coco(tmp_path / "notjson.json")


def test_detect_layout(tmp_path):
    flat = tmp_path / "flat"
    touch(flat / "a.jpg")
    touch(flat / "b.png")
    assert detect_layout(flat) == "flat"
    pairs = tmp_path / "pairs"
    touch(pairs / "a.jpg")
    touch(pairs / "a.png")
    assert detect_layout(pairs) == "masks"
    classes = tmp_path / "classes"
    touch(classes / "ok" / "a.jpg")
    touch(classes / "crack" / "deep" / "b.jpg")
    assert detect_layout(classes) == "classes"
    layout, recs = discover(classes)
    assert layout == "classes"
    assert sorted((r.image.name, r.label) for r in recs) == [("a.jpg", "ok"), ("b.jpg", "crack")]
    voc = tmp_path / "voc"
    (voc / "Annotations").mkdir(parents=True)
    assert detect_layout(voc) == "voc"
    man = tmp_path / "man"
    man.mkdir()
    (man / "manifest.csv").write_text("image\na.jpg\n")
    assert detect_layout(man) == "manifest"


def test_pairs_attach_masks_and_masks_folder(tmp_path):
    touch(tmp_path / "a.jpg")
    touch(tmp_path / "a.png")
    touch(tmp_path / "b.bmp")
    touch(tmp_path / "masks" / "b.png")
    layout, recs = discover(tmp_path)
    assert layout == "masks"
    assert [(r.image.name, r.mask.name) for r in recs] == [("a.jpg", "a.png"), ("b.bmp", "b.png")]


def test_discover_errors(tmp_path):
    with pytest.raises(FootageError, match="does not exist"):
        discover(tmp_path / "missing")
    with pytest.raises(FootageError, match="unknown layout 'grid'"):
        discover(tmp_path, layout="grid")
    touch(tmp_path / "a.jpg")
    with pytest.raises(FootageError, match="needs a manifest"):
        discover(tmp_path, split="test")


def test_label_map():
    recs = [Record(image=None, label="free", boxes=(Box(0, 0, 1, 1, "crk"),))]
    out = apply_label_map(recs, {"free": "ok", "crk": "crack"})
    assert out[0].label == "ok" and out[0].boxes[0].label == "crack"
