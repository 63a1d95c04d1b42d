"""Robust image and mask reading for footage: a bad file is a reason, never an exception.

Collected footage contains zero-byte files, images cut short by a full disk or
a dropped network copy, and files that are not images at all; footage from
elsewhere may also be hostile. The readers here return ``(array, None)`` or
``(None, reason)`` so that a driver can skip the file, count it and carry on.

What is checked before anything is decoded:

* the file is a regular file (not a device such as ``/dev/zero``, a pipe or a
  folder) no larger than :data:`MAX_IMAGE_BYTES`;
* the container is whole: a JPEG ends with its end-of-image marker, a PNG with
  its ``IEND`` chunk (OpenCV decodes a truncated JPEG without complaint, the
  missing rows come out grey);
* the width and height stated in the header (read by :func:`image_size`, no
  decoding) multiply to at most the pixel limit (:func:`max_image_pixels`,
  ``INSPECTOR_MAX_IMAGE_PIXELS``): a 1 MB PNG can state 32000 x 32000 pixels and
  would decode to 3 GB.

After decoding, a JPEG whose last block is the decoder's flat grey fill has its
scan walked (:func:`jpeg_scan_complete`): a file cut short and given an end
marker again decodes without complaint, the missing blocks mid-grey (128).

A progressive JPEG cut short shows nothing in its pixels (a cut in a late scan only
loses detail), so before it is decoded its scan headers must code every coefficient
to its last bit (:func:`jpeg_progression_complete`: a cut between two scans), and
libjpeg must decode it without a warning (:func:`libjpeg_warning`, through
TurboJPEG: a cut inside a scan). Without libturbojpeg a progressive JPEG is refused,
with a reason that says what to install.

The checks on the bytes live in :mod:`inspector.image_bytes` (importable from here too).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import MissingDependencyError
from inspector.image_bytes import (
    check_container,
    image_size,
    is_jpeg,
    jpeg_progression_complete,
    jpeg_scan_complete,
)
from inspector.jpeg_libjpeg import libjpeg_warning

#: File suffixes (lower case) that the footage readers treat as images.
IMAGE_SUFFIXES: frozenset[str] = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm"}
)

#: Default pixel limit (width x height) of one image; ``INSPECTOR_MAX_IMAGE_PIXELS``
#: overrides it. 100 megapixels is well above industrial area-scan cameras.
MAX_IMAGE_PIXELS = 100_000_000

#: The largest image file read (bytes).
MAX_IMAGE_BYTES = 512 * 1024 * 1024

#: What libjpeg puts where the entropy-coded data ran out (level shift of a zero block).
_JPEG_FILL = 128


def max_image_pixels() -> int:
    """The pixel limit in force: ``INSPECTOR_MAX_IMAGE_PIXELS`` when set, else the default.

    An unparseable or non-positive value falls back to :data:`MAX_IMAGE_PIXELS`.
    """
    raw = os.environ.get("INSPECTOR_MAX_IMAGE_PIXELS", "").strip().replace("_", "")
    try:
        value = int(raw)
    except ValueError:
        return MAX_IMAGE_PIXELS
    return value if value > 0 else MAX_IMAGE_PIXELS


def is_image_file(path: str | Path) -> bool:
    """Whether ``path`` has an image suffix (the file itself is not opened).

    :param path: a file path.
    """
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def _jpeg_grey_fill(img: np.ndarray) -> bool:
    """Whether the last 8 x 8 block of a decoded JPEG is exactly the decoder's grey fill."""
    h, w = img.shape[:2]
    block = img[((h - 1) // 8) * 8 :, ((w - 1) // 8) * 8 :]
    return bool(block.size) and bool((block == _JPEG_FILL).all())


def _progressive_reason(data: bytes) -> str | None:
    """Why a progressive JPEG is refused (cut between scans, or libjpeg warned), or None.

    Sequential JPEGs are left to the grey-fill check after decoding (None here).
    """
    complete = jpeg_progression_complete(data)
    if complete is None:
        return None
    if not complete:
        return "truncated progressive JPEG (its scans stop before every coefficient is coded)"
    try:
        warning = libjpeg_warning(data)
    except MissingDependencyError as exc:
        return f"progressive JPEG not checked: {exc}"
    return f"damaged progressive JPEG (libjpeg: {warning})" if warning else None


def decode_image(
    data: bytes, *, grayscale: bool = True, max_pixels: int | None = None
) -> tuple[np.ndarray | None, str | None]:
    """Decode image bytes, after checking the container and the size its header states.

    :param data: the encoded image.
    :param grayscale: decode to one channel (else BGR, three channels).
    :param max_pixels: the pixel limit (default :func:`max_image_pixels`).
    :returns: ``(image, None)`` with a uint8 array, or ``(None, reason)``.
    """
    import cv2

    reason = check_container(data)
    if reason:
        return None, reason
    size = image_size(data)
    if size is None:
        return None, "not a readable image (unknown format or damaged header)"
    w, h = size
    limit = max_image_pixels() if max_pixels is None else int(max_pixels)
    if w <= 0 or h <= 0:
        return None, f"header states an empty image ({w}x{h})"
    if w * h > limit:
        return None, (
            f"image is {w}x{h} ({w * h:,} pixels), over the limit of {limit:,} "
            f"(INSPECTOR_MAX_IMAGE_PIXELS)"
        )
    if is_jpeg(data):
        reason = _progressive_reason(data)
        if reason:
            return None, reason
    flag = cv2.IMREAD_GRAYSCALE if grayscale else cv2.IMREAD_COLOR
    try:
        img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flag)
    except cv2.error as exc:  # some codecs raise instead of returning None
        return None, f"cannot decode ({str(exc).strip().splitlines()[-1]})"
    if img is None or img.size == 0:
        return None, "not a readable image"
    if img.shape[1] != w or img.shape[0] != h:
        return None, f"header says {w}x{h}, decoded {img.shape[1]}x{img.shape[0]}"
    if is_jpeg(data) and _jpeg_grey_fill(img) and jpeg_scan_complete(data) is False:
        # Only a grey last block makes the (slow, pure Python) walk of the scan worth it.
        return None, "truncated JPEG (the scan ends before the last block; end marker appended)"
    if img.dtype != np.uint8:
        # 16-bit PNG/TIFF: scale to 8 bits rather than wrap around.
        img = (img.astype(np.float32) * (255.0 / max(1.0, float(np.iinfo(img.dtype).max)))).round()
        img = img.astype(np.uint8)
    return np.ascontiguousarray(img), None


def read_image(
    path: str | Path, *, grayscale: bool = True, max_pixels: int | None = None
) -> tuple[np.ndarray | None, str | None]:
    """Read an image file without raising for bad files.

    Reads the bytes with Python (so non-ASCII paths work) and decodes them with
    OpenCV. Only regular files are opened: a device (``/dev/zero``), a pipe or a
    socket would never end.

    :param path: the image file.
    :param grayscale: return a 2-D array (else BGR).
    :param max_pixels: the pixel limit (default :func:`max_image_pixels`).
    :returns: ``(image, None)`` or ``(None, reason)``; the reason is one short phrase
        such as ``empty file (0 bytes)``, ``truncated JPEG (no end-of-image marker)``,
        ``not a readable image`` or ``missing file``.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return None, "missing file"
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        return None, f"cannot read ({getattr(exc, 'strerror', None) or exc})"
    if stat.S_ISDIR(st.st_mode):
        return None, "is a folder, not an image"
    if not stat.S_ISREG(st.st_mode):
        return None, "not a regular file (a device, pipe or socket)"
    if st.st_size > MAX_IMAGE_BYTES:
        return None, f"file is {st.st_size:,} bytes, over the limit of {MAX_IMAGE_BYTES:,}"
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_IMAGE_BYTES + 1)
    except FileNotFoundError:
        return None, "missing file"
    except IsADirectoryError:
        return None, "is a folder, not an image"
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    if len(data) > MAX_IMAGE_BYTES:
        return None, f"file is over the limit of {MAX_IMAGE_BYTES:,} bytes"
    return decode_image(data, grayscale=grayscale, max_pixels=max_pixels)


def read_mask(
    path: str | Path, *, max_pixels: int | None = None
) -> tuple[np.ndarray | None, str | None]:
    """Read a defect mask: uint8, 255 where the defect is, 0 elsewhere.

    Any non-zero pixel counts as defect, so masks stored as 0/1 label images and
    0/255 images read the same.

    :param path: the mask file (usually PNG).
    :param max_pixels: the pixel limit (default :func:`max_image_pixels`).
    :returns: ``(mask, None)`` or ``(None, reason)`` as :func:`read_image`.
    """
    mask, reason = read_image(path, grayscale=True, max_pixels=max_pixels)
    if mask is None:
        return None, reason
    return np.where(mask > 0, np.uint8(255), np.uint8(0)), None


def import_cv2(feature: str) -> Any:
    """Import OpenCV, or raise :class:`MissingDependencyError` saying how to install it.

    Drivers call it inside the functions that need OpenCV, so importing a driver
    module stays cheap.

    :param feature: what needs it, for the message (``"the video camera"``).
    """
    try:
        import cv2
    except ImportError:  # pragma: no cover - opencv is a hard dependency
        raise MissingDependencyError(
            "opencv-python-headless", feature, "pip install opencv-python-headless"
        ) from None
    return cv2


def to_gray(image: np.ndarray, *, contiguous: bool = False) -> np.ndarray:
    """A 2-D gray version of ``image`` (BGR converted; gray and one-channel kept).

    :param contiguous: return a C-contiguous ``uint8`` array (what the footage store
        encodes); by default a view where one suffices (what the scan reads).
    """
    if image.ndim == 3 and image.shape[2] != 1:
        cv2 = import_cv2("colour conversion")
        gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    else:
        gray = image if image.ndim == 2 else image[:, :, 0]
    return np.ascontiguousarray(gray, dtype=np.uint8) if contiguous else gray
