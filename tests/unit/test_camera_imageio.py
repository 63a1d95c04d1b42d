"""Robust image reading: bad files give a reason, never an exception."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from inspector.imageio import check_container, is_image_file, read_image, read_mask


@pytest.fixture()
def jpeg_bytes() -> bytes:
    img = (np.arange(64 * 48, dtype=np.uint32).reshape(48, 64) % 251).astype(np.uint8)
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return buf.tobytes()


def test_reads_gray_and_color(tmp_path, jpeg_bytes):
    p = tmp_path / "a.jpg"
    p.write_bytes(jpeg_bytes)
    gray, why = read_image(p)
    assert why is None and gray.shape == (48, 64) and gray.dtype == np.uint8
    color, why = read_image(p, grayscale=False)
    assert why is None and color.shape == (48, 64, 3)


def test_non_ascii_path(tmp_path, jpeg_bytes):
    p = tmp_path / "fliese_ä_日本.jpg"
    p.write_bytes(jpeg_bytes)
    img, why = read_image(p)
    assert why is None and img.shape == (48, 64)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda jpg: b"", "empty file"),
        (lambda jpg: jpg[: len(jpg) // 2], "truncated JPEG"),
        (lambda jpg: b"this is not an image at all" * 10, "not a readable image"),
        (lambda jpg: jpg[:2] + b"\x00" * 200 + jpg[-2:], "not a readable image"),
    ],
    ids=["zero-byte", "truncated-jpeg", "garbage", "garbage-with-jpeg-markers"],
)
def test_bad_files_give_reasons(tmp_path, jpeg_bytes, make, reason):
    p = tmp_path / "bad.jpg"
    p.write_bytes(make(jpeg_bytes))
    img, why = read_image(p)
    assert img is None
    assert reason in why


def test_truncated_png(tmp_path):
    ok, buf = cv2.imencode(".png", np.zeros((20, 20), np.uint8))
    data = buf.tobytes()
    assert check_container(data) is None
    p = tmp_path / "cut.png"
    p.write_bytes(data[:-20])
    img, why = read_image(p)
    assert img is None and "truncated PNG" in why


def test_missing_and_folder(tmp_path):
    assert read_image(tmp_path / "nope.jpg") == (None, "missing file")
    img, why = read_image(tmp_path)
    assert img is None and "folder" in why


def test_mask_is_binarised(tmp_path):
    m = np.zeros((10, 12), np.uint8)
    m[2:4, 3:5] = 1  # a 0/1 label image
    m[6, 6] = 200
    p = tmp_path / "m.png"
    cv2.imwrite(str(p), m)
    mask, why = read_mask(p)
    assert why is None
    assert set(np.unique(mask)) == {0, 255}
    assert int((mask > 0).sum()) == 5


def test_is_image_file():
    assert is_image_file("x/y.JPG") and is_image_file("a.png") and not is_image_file("a.xml")
