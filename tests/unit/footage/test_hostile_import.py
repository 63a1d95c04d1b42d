"""Hostile and careless footage: every bad input is a counted, named skip or one FootageError.

Paths out of the footage folder, NaN and wrong JSON types, broken XML and CSV rows,
decompression bombs, truncated JPEGs with an end marker appended, boxes outside their
image. Property tests feed generated annotation files to the parsers.
"""

from __future__ import annotations

import csv
import json
import os
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspector import Box, FootageError
from inspector.annotations import (
    clip_boxes,
    confine,
    discover,
    read_coco,
    read_manifest,
    read_voc,
)
from inspector.footage.importers import import_footage
from inspector.footage.store import FootageStore
from inspector.imageio import decode_image, image_size, jpeg_scan_complete, read_image

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _panel(seed: int, shape=(40, 60)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _png(path: Path, seed: int = 0, shape=(40, 60)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), _panel(seed, shape))
    return path


def _import(store_dir: Path, src: Path, fmt: str, **kw):
    with FootageStore(store_dir, create=True) as store:
        report = import_footage(store, src, fmt, progress=False, **kw)
        sources = sorted(r.source_file for r in store.records())
    return report, sources


# -- paths that leave the footage folder -----------------------------------------------
@pytest.fixture
def outside(tmp_path):
    """An image outside the footage folder that nothing may read."""
    return _png(tmp_path / "secret" / "outside.png", seed=99)


ESCAPES = ["../secret/outside.png", "{outside}", "/dev/zero", "a/../../secret/outside.png"]


@pytest.mark.parametrize("name", ESCAPES)
def test_csv_paths_out_of_the_folder_are_skipped(tmp_path, outside, name):
    foot = tmp_path / "foot"
    _png(foot / "good.png")
    name = name.format(outside=outside)
    (foot / "manifest.csv").write_text(f"image,label\ngood.png,ok\n{name},ok\n")
    report, sources = _import(tmp_path / "s", foot, "csv")
    assert report.new == 1 and sources == ["good.png"]
    assert len(report.skipped) == 1
    where, why = report.skipped[0]
    assert where.endswith("manifest.csv:3") and ("leaves" in why or "absolute" in why)


@pytest.mark.parametrize("name", ESCAPES)
def test_coco_file_names_out_of_the_folder_are_skipped(tmp_path, outside, name):
    foot = tmp_path / "foot"
    _png(foot / "good.png")
    doc = {
        "images": [
            {"id": 1, "file_name": "good.png"},
            {"id": 2, "file_name": name.format(outside=outside)},
        ],
        "annotations": [],
        "categories": [],
    }
    (foot / "annotations.json").write_text(json.dumps(doc))
    report, sources = _import(tmp_path / "s", foot, "coco")
    assert report.new == 1 and sources == ["good.png"]
    assert [w.rsplit(":", 1)[1] for w, _ in report.skipped] == ["images[1]"]


@pytest.mark.parametrize("name", ESCAPES)
def test_voc_filenames_out_of_the_folder_are_skipped(tmp_path, outside, name):
    foot = tmp_path / "foot"
    _png(foot / "good.png")
    for stem, fname in (("good", "good.png"), ("evil", name.format(outside=outside))):
        (foot / f"{stem}.xml").write_text(
            f"<annotation><filename>{fname}</filename><path>{outside}</path></annotation>"
        )
    report, sources = _import(tmp_path / "s", foot, "voc")
    assert report.new == 1 and sources == ["good.png"]
    assert len(report.skipped) == 1 and report.skipped[0][0].endswith("evil.xml")


def test_symlinks_out_of_the_folder_are_refused(tmp_path, outside):
    foot = tmp_path / "foot"
    _png(foot / "ok" / "good.png")
    os.symlink(outside, foot / "ok" / "link.png")
    os.symlink("/dev/zero", foot / "ok" / "zero.png")
    os.symlink(outside.parent, foot / "leak")
    report, sources = _import(tmp_path / "s", foot, "folder")
    assert sources == ["ok/good.png"], report.skipped
    assert {Path(w).name for w, _ in report.skipped} == {"link.png", "zero.png", "leak"}
    # Named in a manifest, the same links are refused as leaving the folder.
    (foot / "manifest.csv").write_text("image\nok/good.png\nok/link.png\nleak/outside.png\n")
    skips = []
    recs = read_manifest(foot / "manifest.csv", skips=skips)
    assert [r.image.name for r in recs] == ["good.png"] and len(skips) == 2


def test_a_pipe_or_device_is_never_read(tmp_path):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    assert read_image(fifo) == (None, "not a regular file (a device, pipe or socket)")
    assert read_image("/dev/zero")[1] == "not a regular file (a device, pipe or socket)"


@given(
    name=st.lists(
        st.sampled_from([*"ab./\\\x00\n:~", "..", "../", "C:", "/dev/", "link"]), max_size=12
    ).map("".join)
)
@SETTINGS
def test_confine_never_gives_a_path_outside(tmp_path, name):
    base = tmp_path / "base"
    base.mkdir(exist_ok=True)
    if not (base / "link").is_symlink():
        os.symlink(tmp_path, base / "link")  # a way out through a symlink
    path, why = confine(base, name)
    assert (path is None) != (why is None)
    if path is not None:
        real = os.path.realpath(path)
        assert os.path.commonpath([os.path.realpath(base), real]) == os.path.realpath(base)


# -- COCO: NaN, Inf, wrong types --------------------------------------------------------
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


def _maybe(strategy):
    return st.one_of(strategy, JSON_VALUES)


COCO_DOCS = st.fixed_dictionaries(
    {
        "images": st.lists(
            _maybe(
                st.fixed_dictionaries(
                    {
                        "id": _maybe(st.integers(0, 3)),
                        "file_name": _maybe(st.sampled_from(["a.png", "../x.png", "/etc/x"])),
                        "width": _maybe(st.integers(0, 100)),
                        "height": _maybe(st.integers(0, 100)),
                    }
                )
            ),
            max_size=4,
        ),
        "annotations": st.lists(
            _maybe(
                st.fixed_dictionaries(
                    {
                        "image_id": _maybe(st.integers(0, 3)),
                        "category_id": _maybe(st.integers(0, 2)),
                        "bbox": _maybe(
                            st.lists(
                                st.floats(allow_nan=True, allow_infinity=True) | st.integers(),
                                min_size=4,
                                max_size=4,
                            )
                        ),
                    }
                )
            ),
            max_size=6,
        ),
        "categories": st.just([{"id": 1, "name": "dent"}, {"id": 2, "name": "scratch"}]),
    }
)


@given(doc=COCO_DOCS)
@SETTINGS
def test_generated_coco_files_give_records_or_counted_skips(tmp_path, doc):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))  # NaN and Infinity as JSON writes them
    skips = []
    try:
        recs = read_coco(path, skips=skips)
    except FootageError as exc:
        assert "\n" not in str(exc)
        return
    root = os.path.realpath(tmp_path)
    for r in recs:
        assert os.path.commonpath([root, os.path.realpath(r.image)]) == root
        for b in r.boxes:
            assert 0 <= b.x0 < b.x1 and 0 <= b.y0 < b.y1
            if r.size is not None:
                assert b.x1 <= r.size[0] and b.y1 <= r.size[1]
    assert len(recs) + sum(1 for w, _ in skips if ":images[" in w) <= len(doc["images"])


def test_coco_nan_inf_and_wrong_types_are_named_skips(tmp_path):
    doc = {
        "images": [
            {"id": 1, "file_name": "a.png"},
            {"id": 2, "file_name": "b.png"},
            {"id": [3], "file_name": "c.png"},
            {"id": 4, "file_name": "d.png", "width": float("inf"), "height": 3},
            {"id": 5, "file_name": "e.png"},
        ],
        "annotations": [
            {"image_id": 1, "category_id": 1, "bbox": [float("nan"), 0, 3, 3]},
            {"image_id": 2, "category_id": [1], "bbox": [0, 0, 3, 3]},
            {"image_id": {"x": 1}, "category_id": 1, "bbox": [0, 0, 3, 3]},
            {"image_id": 5, "category_id": 1, "bbox": [1, 1, "2", 2]},
        ],
        "categories": [{"id": 1, "name": "dent"}],
    }
    (tmp_path / "c.json").write_text(json.dumps(doc))
    skips = []
    assert read_coco(tmp_path / "c.json", skips=skips) == []
    reasons = dict(skips)
    assert "not a finite number" in reasons[f"{tmp_path / 'c.json'}:images[0]"]
    assert "unknown category_id [1]" in reasons[f"{tmp_path / 'c.json'}:images[1]"]
    assert "needs an 'id'" in reasons[f"{tmp_path / 'c.json'}:images[2]"]
    assert "positive whole numbers" in reasons[f"{tmp_path / 'c.json'}:images[3]"]
    assert "needs an image_id" in reasons[f"{tmp_path / 'c.json'}:annotations[2]"]
    assert "not a finite number" in reasons[f"{tmp_path / 'c.json'}:images[4]"]


def test_coco_nested_too_deeply_is_one_error(tmp_path):
    (tmp_path / "c.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FootageError, match="not valid JSON"):
        read_coco(tmp_path / "c.json")


# -- VOC: one bad file is a skip, entities refused ----------------------------------------
NUMBERS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e999", "", "x", "-5", "0", "1e308"]),
    st.integers(-50, 150).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@given(nums=st.lists(NUMBERS, min_size=6, max_size=6), name=st.sampled_from(["a.png", "../a"]))
@SETTINGS
def test_generated_voc_files_give_records_or_counted_skips(tmp_path, nums, name):
    folder = tmp_path / "voc"
    folder.mkdir(exist_ok=True)
    w, h, x0, y0, x1, y1 = nums
    (folder / "a.xml").write_text(
        f"<annotation><filename>{name}</filename><size><width>{w}</width>"
        f"<height>{h}</height></size><object><name>dent</name><bndbox><xmin>{x0}</xmin>"
        f"<ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object></annotation>"
    )
    (folder / "b.xml").write_text("<annotation><filename>b.png</filename></annotation>")
    for image in ("a.png", "b.png"):
        (folder / image).touch()
    skips = []
    recs = read_voc(folder, skips=skips)
    assert len(recs) + len(skips) == 2 and recs[-1].image.name == "b.png"
    for r in recs:
        for b in r.boxes:
            assert 0 <= b.x0 < b.x1 and 0 <= b.y0 < b.y1
        if r.boxes:
            assert r.label == "dent"


def test_voc_entity_bomb_and_bad_numbers_skip_only_their_file(tmp_path):
    foot = tmp_path / "voc"
    _png(foot / "good.png")
    (foot / "good.xml").write_text("<annotation><filename>good.png</filename></annotation>")
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(f'<!ENTITY lol{i} "{"&lol%s;" % (i - 1 or "") * 10}">' for i in range(1, 9))
        + "]><annotation><filename>&lol8;</filename></annotation>"
    )
    (foot / "bomb.xml").write_text(bomb)
    (foot / "nan.xml").write_text(
        "<annotation><filename>good.png</filename><object><name>d</name><bndbox>"
        "<xmin>nan</xmin><ymin>1</ymin><xmax>5</xmax><ymax>5</ymax></bndbox></object>"
        "</annotation>"
    )
    (foot / "inf.xml").write_text(
        "<annotation><filename>good.png</filename><size><width>inf</width>"
        "<height>1e999</height></size></annotation>"
    )
    report, sources = _import(tmp_path / "s", foot, "voc")
    assert sources == ["good.png"]
    why = {Path(w).name: r for w, r in report.skipped}
    assert "DOCTYPE or ENTITY declaration refused" in why["bomb.xml"]
    assert "not a finite number" in why["nan.xml"]
    assert report.present == 1  # inf.xml names the same image; its bad size is ignored


# -- CSV: non-UTF-8 bytes and huge fields skip their row ------------------------------------
def test_csv_non_utf8_and_huge_fields_skip_only_their_rows(tmp_path):
    foot = tmp_path / "foot"
    for i in range(3):
        _png(foot / f"im{i}.png", seed=i)
    body = (
        b"image,label\nim0.png,ok\nim\xff\xfe.png,ok\n"
        + b'"'
        + b"x" * 300_000
        + b'",ok\nim1.png,'
        + b"y" * 200_000
        + b"\nim2.png,dent\n"
    )
    (foot / "manifest.csv").write_bytes(body)
    report, sources = _import(tmp_path / "s", foot, "csv")
    assert sources == ["im0.png", "im2.png"], report.skipped
    reasons = [r for _, r in report.skipped]
    assert len(reasons) == 3 and "not UTF-8" in reasons[0]
    assert all("characters (limit" in r or "unreadable CSV row" in r for r in reasons[1:])


@given(
    body=st.binary(max_size=400)
    | st.lists(st.lists(st.text(max_size=12), min_size=1, max_size=4), min_size=1, max_size=6).map(
        lambda rows: "\n".join(",".join(r) for r in [["image", "label"], *rows]).encode()
    )
)
@SETTINGS
def test_generated_manifests_give_records_or_one_error(tmp_path, body):
    (tmp_path / "m.csv").write_bytes(body)
    skips = []
    try:
        recs = read_manifest(tmp_path / "m.csv", skips=skips)
    except FootageError as exc:
        assert "\n" not in str(exc)
        return
    root = os.path.realpath(tmp_path)
    for r in recs:
        assert os.path.commonpath([root, os.path.realpath(r.image)]) == root


# -- images: bombs and truncation ---------------------------------------------------------
def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _bomb_png(width: int, height: int) -> bytes:
    """A PNG header stating width x height (8-bit gray) with a little data; about 1 KB."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\0" * 100_000, 9)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", idat)
        + (_png_chunk(b"IEND", b""))
    )


def test_decompression_bomb_is_refused_from_its_header(tmp_path):
    data = _bomb_png(32000, 32000)
    assert len(data) < 2000 and image_size(data) == (32000, 32000)
    img, why = decode_image(data)
    assert img is None and "32000x32000" in why and "over the limit" in why
    foot = tmp_path / "foot"
    foot.mkdir()
    (foot / "bomb.png").write_bytes(data)
    _png(foot / "good.png")
    (foot / "manifest.csv").write_text("image\nbomb.png\ngood.png\n")
    report, sources = _import(tmp_path / "s", foot, "csv")
    assert sources == ["good.png"] and "over the limit" in report.skipped[0][1]


def test_pixel_limit_is_configurable(tmp_path, monkeypatch):
    ok, buf = cv2.imencode(".png", _panel(1, (100, 100)))
    data = buf.tobytes()
    assert decode_image(data, max_pixels=10_000)[0] is not None
    assert "over the limit of 9,999" in decode_image(data, max_pixels=9_999)[1]
    monkeypatch.setenv("INSPECTOR_MAX_IMAGE_PIXELS", "5000")
    assert "over the limit of 5,000" in decode_image(data)[1]
    foot = tmp_path / "foot"
    _png(foot / "a.png", shape=(100, 100))
    (foot / "manifest.csv").write_text("image\na.png\n")
    monkeypatch.delenv("INSPECTOR_MAX_IMAGE_PIXELS")
    report, _ = _import(tmp_path / "s", foot, "csv", max_pixels=9_999)
    assert report.new == 0 and "over the limit" in report.skipped[0][1]


@pytest.mark.parametrize("fmt", [".png", ".jpg", ".bmp", ".tiff", ".webp", ".pgm", ".ppm"])
def test_header_sizes_match_what_opencv_decodes(fmt):
    img = _panel(3, (37, 53))
    if fmt == ".ppm":
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    ok, buf = cv2.imencode(fmt, img)
    assert ok and image_size(buf.tobytes()) == (53, 37)


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.95])
def test_truncated_jpeg_with_an_appended_end_marker_is_refused(keep):
    img = cv2.GaussianBlur(_panel(4, (120, 160)), (0, 0), 2)
    ok, buf = cv2.imencode(".jpg", img)
    data = buf.tobytes()
    cut = data[: int(len(data) * keep)] + b"\xff\xd9"
    assert decode_image(data)[0] is not None and jpeg_scan_complete(data) is True
    assert jpeg_scan_complete(cut) is False
    img2, why = decode_image(cut)
    assert img2 is None and "truncated JPEG" in why


def test_flat_grey_jpeg_is_not_mistaken_for_a_truncated_one():
    ok, buf = cv2.imencode(".jpg", np.full((40, 60), 128, np.uint8))
    img, why = decode_image(buf.tobytes())
    assert why is None and (img == 128).all()


# -- boxes -----------------------------------------------------------------------------------
@given(
    coords=st.lists(st.integers(-300, 300), min_size=4, max_size=4),
    w=st.integers(1, 200),
    h=st.integers(1, 200),
)
@settings(max_examples=200, deadline=None)
def test_clipped_boxes_lie_inside_and_keep_their_overlap(coords, w, h):
    x0, y0, x1, y1 = coords
    kept, dropped = clip_boxes([Box(x0, y0, x1, y1, "d")], w, h)
    overlap_w = max(0, min(x1, w) - max(x0, 0))
    overlap_h = max(0, min(y1, h) - max(y0, 0))
    if overlap_w and overlap_h:
        (b,) = kept
        assert dropped == 0 and b.area == overlap_w * overlap_h
        assert 0 <= b.x0 < b.x1 <= w and 0 <= b.y0 < b.y1 <= h
    else:
        assert kept == () and dropped == 1


def test_boxes_are_clipped_and_an_image_of_only_outside_boxes_is_skipped(tmp_path):
    foot = tmp_path / "coco"
    for i in range(3):
        _png(foot / f"c{i}.png", seed=i, shape=(40, 60))
    doc = {
        "images": [
            {"id": 0, "file_name": "c0.png", "width": 60, "height": 40},
            {"id": 1, "file_name": "c1.png", "width": 60, "height": 40},
            {"id": 2, "file_name": "c2.png"},
        ],
        "annotations": [
            {"image_id": 0, "category_id": 1, "bbox": [50, 30, 40, 40]},  # clipped
            {"image_id": 0, "category_id": 1, "bbox": [-50, -50, 10, 10]},  # outside: dropped
            {"image_id": 1, "category_id": 1, "bbox": [-50, -50, 10, 10]},  # its only box
            {"image_id": 2, "category_id": 1, "bbox": [100, 100, 5, 5]},  # outside, no size
        ],
        "categories": [{"id": 1, "name": "dent"}],
    }
    (foot / "annotations.json").write_text(json.dumps(doc))
    report, sources = _import(tmp_path / "s", foot, "coco")
    assert sources == ["c0.png"]
    assert report.dropped_boxes == 1 and "1 boxes outside their image dropped" in report.line()
    why = {w.rsplit("/", 1)[-1]: r for w, r in report.skipped}
    assert "every box (1) lies outside the image" in why["annotations.json:images[1]"]
    assert "every box (1) lies outside the image" in why["c2.png"]
    with FootageStore(tmp_path / "s") as s:
        (rec,) = s.records()
        assert rec.label == "dent"
        assert [(b.x0, b.y0, b.x1, b.y1) for b in rec.boxes] == [(50, 30, 60, 40)]


def test_the_folder_camera_counts_what_discover_skipped(tmp_path, outside):
    from inspector.camera import open_camera

    foot = tmp_path / "foot"
    _png(foot / "good.png")
    (foot / "manifest.csv").write_bytes(
        f"image,label\ngood.png,ok\n{outside},ok\n".encode() + b"\xff.png,ok\n"
    )
    skips = []
    layout, recs = discover(foot, skips=skips)
    assert layout == "manifest" and len(recs) == 1 and len(skips) == 2
    cam = open_camera("folder", {"path": str(foot)})
    assert cam.stats.frames_skipped == 2 and [f.part_id for f in cam.frames()] == ["good"]


def test_csv_writer_round_trip_of_quoted_paths_stays_inside(tmp_path):
    """Commas and quotes in file names are fine; only where the path leads matters."""
    foot = tmp_path / "foot"
    _png(foot / 'a,"b".png')
    with open(foot / "manifest.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "label"])
        w.writerow(['a,"b".png', "ok"])
    report, sources = _import(tmp_path / "s", foot, "csv")
    assert sources == ['a,"b".png'] and not report.skipped
