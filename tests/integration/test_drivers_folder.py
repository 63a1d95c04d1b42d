"""The folder camera on real footage and on files the tests write."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import cv2
import numpy as np
import pytest

from camera_drivers.folder import FolderCamera
from inspector import CameraError
from inspector.camera import open_camera
from inspector.imageio import read_mask

# splits.csv of the magnetic-tile footage, test split: 263 images.
MT_TEST = {"free": 202, "blowhole": 20, "uneven": 14, "break": 10, "crack": 10, "fray": 7}


def test_magnetic_tile_manifest_test_split(magnetic_tile):
    cam = open_camera(
        "folder", {"path": str(magnetic_tile), "manifest": "splits.csv", "split": "test"}
    )
    assert len(cam) == 263
    frames = list(cam)
    assert len(frames) == 263
    assert cam.stats.frames_read == 263 and cam.stats.frames_skipped == 0
    assert Counter(f.truth.label for f in frames) == MT_TEST
    for f in frames:
        assert f.image.ndim == 2 and f.image.dtype == np.uint8
        assert f.meta["split"] == "test"
        mask = f.truth.mask
        assert mask is not None and mask.shape == f.image.shape
        # Defect images have defect pixels; free ones have none.
        assert bool(mask.any()) == (f.truth.label != "free"), f.part_id
    assert frames[0].part_id.startswith("MT_") and "/Imgs/" in frames[0].part_id


def test_magnetic_tile_random_access_and_label_map(magnetic_tile):
    cam = FolderCamera(
        str(magnetic_tile), manifest="splits.csv", split="val", label_map={"free": "ok"}
    )
    assert "ok" in cam.classes and "free" not in cam.classes
    f = cam.load(len(cam) - 1)
    assert f is not None and f.meta["index"] == len(cam) - 1


def test_magnetic_tile_image_mask_pairs(magnetic_tile):
    folder = magnetic_tile / "MT_Crack" / "Imgs"
    cam = open_camera("folder", {"path": str(folder), "layout": "masks", "label": "crack"})
    assert len(cam) == 57  # 57 crack photographs, each with its .png mask beside it
    frames = list(cam)
    assert len(frames) == 57
    for f in frames:
        assert f.truth.label == "crack"
        assert f.truth.mask.shape == f.image.shape and f.truth.mask.any()
        reread, _ = read_mask(folder / (f.part_id + ".png"))
        assert np.array_equal(reread, f.truth.mask)
    # Auto-detection finds the same pairs; without a label the mask decides it.
    auto = FolderCamera(str(folder))
    assert auto.layout == "masks" and {f.truth.label for f in auto} == {"defect"}


def test_magnetic_tile_class_folders_shuffle_loop(magnetic_tile, tmp_path):
    # A small copy: two class folders of three image + mask pairs each.
    for cls in ("MT_Crack", "MT_Free"):
        dst = tmp_path / cls
        dst.mkdir()
        for jpg in sorted((magnetic_tile / cls / "Imgs").glob("*.jpg"))[:3]:
            shutil.copy(jpg, dst / jpg.name)
            shutil.copy(jpg.with_suffix(".png"), dst / jpg.with_suffix(".png").name)
    cam = FolderCamera(str(tmp_path), layout="classes", loop=True, shuffle=True, seed=3)
    assert cam.layout == "classes" and len(cam) == 6
    it = iter(cam)
    first = [next(it).part_id for _ in range(6)]
    second = [next(it).part_id for _ in range(6)]
    assert sorted(first) == sorted(second)  # each pass visits everything once
    assert first != sorted(first) or second != sorted(second)  # and is shuffled
    again = FolderCamera(str(tmp_path), layout="classes", shuffle=True, seed=3)
    assert [f.part_id for f in again] == first  # same seed, same order
    assert {f.truth.label for f in again} == {"MT_Crack", "MT_Free"}


def write_gray(path, h=40, w=60, value=128):
    img = np.full((h, w), value, np.uint8)
    img[h // 3 :, w // 4] = 30  # some content
    assert cv2.imwrite(str(path), img)
    return img


def test_voc_folder(tmp_path):
    (tmp_path / "JPEGImages").mkdir()
    (tmp_path / "Annotations").mkdir()
    write_gray(tmp_path / "JPEGImages" / "p1.jpg")
    write_gray(tmp_path / "JPEGImages" / "p2.jpg")
    (tmp_path / "Annotations" / "p1.xml").write_text(
        "<annotation><filename>p1.jpg</filename><size><width>60</width><height>40</height>"
        "</size><object><name>scratch</name><bndbox><xmin>5</xmin><ymin>5</ymin><xmax>30</xmax>"
        "<ymax>8</ymax></bndbox></object><object><name>dent</name><bndbox><xmin>40</xmin>"
        "<ymin>20</ymin><xmax>42</xmax><ymax>22</ymax></bndbox></object></annotation>"
    )
    (tmp_path / "Annotations" / "p2.xml").write_text(
        "<annotation><filename>p2.jpg</filename></annotation>"
    )
    cam = open_camera("folder", {"path": str(tmp_path)})
    assert cam.layout == "voc"
    frames = list(cam)
    assert [f.truth.label for f in frames] == ["scratch", "ok"]
    t = frames[0].truth
    assert [(b.label, b.x0, b.y0, b.x1, b.y1) for b in t.boxes] == [
        ("scratch", 4, 4, 30, 8),
        ("dent", 39, 19, 42, 22),
    ]
    dm = t.defect_mask(frames[0].shape)
    assert dm.sum() == 26 * 4 + 3 * 3
    # The same annotations named explicitly.
    cam2 = open_camera(
        "folder", {"path": str(tmp_path), "annotations": "Annotations", "layout": "voc"}
    )
    assert len(list(cam2)) == 2


def test_coco_file(tmp_path):
    (tmp_path / "images").mkdir()
    write_gray(tmp_path / "images" / "a.png")
    write_gray(tmp_path / "images" / "b.png")
    doc = {
        "images": [{"id": 10, "file_name": "a.png"}, {"id": 11, "file_name": "b.png"}],
        "annotations": [{"image_id": 11, "category_id": 1, "bbox": [10, 10, 20, 5]}],
        "categories": [{"id": 1, "name": "line"}],
    }
    (tmp_path / "coco.json").write_text(json.dumps(doc))
    cam = open_camera("folder", {"path": str(tmp_path), "annotations": "coco.json"})
    assert cam.layout == "coco"
    frames = list(cam)
    assert [f.truth.label for f in frames] == ["ok", "line"]
    assert frames[1].truth.boxes[0].area == 100
    assert frames[1].part_id == "images/b"


def test_corrupt_files_are_skipped_and_counted(tmp_path):
    write_gray(tmp_path / "good1.jpg")
    write_gray(tmp_path / "good2.png")
    (tmp_path / "empty.jpg").write_bytes(b"")
    good = (tmp_path / "good1.jpg").read_bytes()
    (tmp_path / "half.jpg").write_bytes(good[: len(good) // 2])
    (tmp_path / "garbage.bmp").write_bytes(b"\x00garbage" * 50)
    cam = open_camera("folder", {"path": str(tmp_path), "layout": "flat"})
    assert len(cam) == 5
    frames = list(cam)
    assert sorted(f.part_id for f in frames) == ["good1", "good2"]
    assert all(f.truth is None for f in frames) and not cam.has_truth
    assert cam.stats.frames_skipped == 3
    reasons = " | ".join(cam.stats.skipped)
    assert "empty.jpg: empty file" in reasons
    assert "half.jpg: truncated JPEG" in reasons
    assert "garbage.bmp: not a readable image" in reasons
    assert cam.load(sorted(r.image.name for r in cam.records).index("empty.jpg")) is None


def test_mask_size_mismatch_names_the_file(tmp_path):
    write_gray(tmp_path / "a.jpg", h=40, w=60)
    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((20, 60), np.uint8))
    cam = open_camera("folder", {"path": str(tmp_path)})
    with pytest.raises(
        CameraError, match=r"mask .*a\.png is 60x20 but its image .*a\.jpg is 60x40"
    ):
        list(cam)


def test_folder_errors(tmp_path):
    with pytest.raises(CameraError, match="does not exist"):
        open_camera("folder", {"path": str(tmp_path / "nope")})
    with pytest.raises(CameraError, match="no images found"):
        open_camera("folder", {"path": str(tmp_path)})
    with pytest.raises(CameraError, match="needs parameter"):
        open_camera("folder", {})
    with pytest.raises(CameraError, match="unknown layout 'grid'"):
        open_camera("folder", {"path": str(tmp_path), "layout": "grid"})
    (tmp_path / "m.csv").write_text("image,label,split\nx.jpg,ok,train\n")
    with pytest.raises(CameraError, match="no rows of split 'test'"):
        open_camera("folder", {"path": str(tmp_path), "manifest": "m.csv", "split": "test"})
    with pytest.raises(CameraError, match="expected true/false"):
        open_camera("folder", {"path": str(tmp_path), "loop": "maybe"})


def test_unreadable_everything_does_not_spin_when_looping(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"")
    cam = FolderCamera(str(tmp_path), loop=True)
    assert list(cam) == [] and cam.stats.frames_skipped == 1


def test_decoded_frames_are_kept_and_a_changed_file_is_decoded_again(tmp_path, monkeypatch):
    """Training draws each frame many times: the decoded image and mask come from memory
    (read-only, so an episode cannot change them for the next), a file changed on disk
    is decoded again, the bound holds, and cache_mb=0 decodes every time."""
    import os

    from camera_drivers import folder as fmod

    monkeypatch.setattr(fmod, "DECODED", fmod.DecodedCache())
    (tmp_path / "masks").mkdir()
    for k in range(3):
        cv2.imwrite(str(tmp_path / f"p{k}.png"), np.full((40, 50), 10 * k, np.uint8))
        mask = np.zeros((40, 50), np.uint8)
        mask[5:9, 5:9] = 255
        cv2.imwrite(str(tmp_path / "masks" / f"p{k}.png"), mask)
    cam = FolderCamera(str(tmp_path), layout="masks", cache_mb=1)
    first = cam.load(0)
    again = cam.load(0)
    assert again.image is first.image and again.truth.mask is first.truth.mask
    assert fmod.DECODED.hits == 2 and fmod.DECODED.misses == 2
    with pytest.raises(ValueError, match="read-only"):
        again.image[0, 0] = 255
    # A file rewritten (another size or time) is decoded again.
    path = tmp_path / "p0.png"
    cv2.imwrite(str(path), np.full((40, 50), 99, np.uint8))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert int(cam.load(0).image[0, 0]) == 99
    # The bound: 3 frames of 2 x 2,000 bytes in a cache of 6,000 bytes keep the newest.
    fmod.DECODED.capacity = 6000
    for i in range(3):
        cam.load(i)
    assert fmod.DECODED.used <= 6000
    # Off: every load decodes (no hits counted), the arrays are the caller's own.
    off = FolderCamera(str(tmp_path), layout="masks", cache_mb=0)
    hits = fmod.DECODED.hits
    a, b = off.load(1), off.load(1)
    assert a.image is not b.image and fmod.DECODED.hits == hits
    a.image[0, 0] = 1  # writable
    for bad in (-1, True, 1.5):
        with pytest.raises(CameraError, match="cache_mb"):
            FolderCamera(str(tmp_path), layout="masks", cache_mb=bad)
    assert open_camera("folder", {"path": str(tmp_path), "cache_mb": "0"}).cache_mb == 0
