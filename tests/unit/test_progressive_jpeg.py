"""A progressive JPEG cut short and given its end marker again is refused, wherever the cut.

Cut between two scans, libjpeg decodes a coarser image without a warning: the scan
headers tell (:func:`jpeg_progression_complete`). Cut inside a scan, libjpeg warns
and fills zeros, and OpenCV says nothing: TurboJPEG passes the warning on
(:func:`libjpeg_warning`).
"""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector import jpeg_libjpeg
from inspector.errors import MissingDependencyError
from inspector.image_bytes import jpeg_progression_complete
from inspector.imageio import decode_image, read_image
from inspector.jpeg_libjpeg import libjpeg_warning

EOI = b"\xff\xd9"


def _progressive(img: np.ndarray, quality: int = 90) -> bytes:
    params = [cv2.IMWRITE_JPEG_PROGRESSIVE, 1, cv2.IMWRITE_JPEG_QUALITY, quality]
    ok, buf = cv2.imencode(".jpg", img, params)
    assert ok
    return buf.tobytes()


def _texture(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    noise = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    return cv2.GaussianBlur(noise, (0, 0), 1.5)


def _markers(data: bytes, marker: int) -> list[int]:
    return [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == marker]


@given(
    seed=st.integers(0, 2**16),
    colour=st.booleans(),
    h=st.integers(8, 72),
    w=st.integers(8, 72),
    quality=st.integers(5, 100),
    at=st.floats(0.0, 1.0),
)
@settings(max_examples=60, deadline=None)
def test_any_cut_with_an_end_marker_is_refused_or_loses_nothing(seed, colour, h, w, quality, at):
    img = _texture(seed, (h, w, 3) if colour else (h, w))
    data = _progressive(img, quality)
    whole, why = decode_image(data, grayscale=not colour)
    assert why is None and jpeg_progression_complete(data) is True
    cut = data[: 2 + int(at * (len(data) - 4))] + EOI
    got, why = decode_image(cut, grayscale=not colour)
    # Cutting only a stuffed byte or padding bits loses nothing: then it may pass.
    assert got is None or np.array_equal(got, whole), why


def test_a_cut_between_scans_is_refused_by_the_scan_headers():
    data = _progressive(_texture(1, (48, 64, 3)))
    scans = _markers(data, 0xDA)
    assert len(scans) > 5  # OpenCV's progression: DC, then AC bands and refinements
    tables = [i for i in _markers(data, 0xC4) if i > scans[0]]  # Huffman tables between scans
    assert tables
    for at in scans[1:] + tables:
        cut = data[:at] + EOI
        assert libjpeg_warning(cut) is None  # a valid, coarser JPEG to libjpeg
        assert jpeg_progression_complete(cut) is False
        img, why = decode_image(cut)
        assert img is None and why.startswith("truncated progressive JPEG"), at


def test_a_cut_inside_the_last_scan_is_refused_on_libjpegs_warning():
    data = _progressive(_texture(2, (48, 64)))
    last = _markers(data, 0xDA)[-1]
    cut = data[: (last + len(data)) // 2] + EOI
    assert jpeg_progression_complete(cut) is True  # every scan is there, the last one short
    img, why = decode_image(cut)
    assert img is None and "premature end of data segment" in why


def test_real_footage_saved_progressive_by_pillow(magnetic_tile: Path):
    from PIL import Image

    src = sorted(magnetic_tile.glob("MT_Crack/Imgs/*.jpg"))[0]
    img, why = read_image(src)
    assert why is None
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", progressive=True, quality=90)
    data = buf.getvalue()
    whole, why = decode_image(data)
    assert why is None
    assert np.array_equal(whole, cv2.imdecode(np.frombuffer(data, np.uint8), 0))
    scans = _markers(data, 0xDA)
    for at in (scans[len(scans) // 2], (scans[-1] + len(data)) // 2, len(data) - 40):
        got, why = decode_image(data[:at] + EOI)
        assert got is None and "progressive JPEG" in why, at


def test_sequential_jpegs_are_not_progressive_and_still_decode():
    ok, buf = cv2.imencode(".jpg", _texture(3, (40, 60)))
    data = buf.tobytes()
    assert jpeg_progression_complete(data) is None
    assert decode_image(data)[1] is None


def test_without_libturbojpeg_a_progressive_jpeg_is_refused_with_what_to_install(monkeypatch):
    def missing():
        raise MissingDependencyError("libturbojpeg", "checking progressive JPEGs", "apt-get x")

    monkeypatch.setattr(jpeg_libjpeg, "_turbojpeg", missing)
    img, why = decode_image(_progressive(_texture(4, (40, 60))))
    assert img is None and "libturbojpeg" in why and "apt-get" in why
    ok, buf = cv2.imencode(".jpg", _texture(4, (40, 60)))
    assert decode_image(buf.tobytes())[1] is None  # sequential ones need no library


@pytest.mark.parametrize("data", [b"", b"\xff\xd8", b"\xff\xd8\xff\xc2\x00", b"\xff\xd8\xff"])
def test_scraps_do_not_raise(data):
    assert jpeg_progression_complete(data) in (None, False)
    assert decode_image(data)[0] is None
