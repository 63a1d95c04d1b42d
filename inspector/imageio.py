"""Robust image and mask reading for footage: a bad file is a reason, never an exception.

Collected footage contains zero-byte files, images cut short by a full disk or
a dropped network copy, and files that are not images at all. The readers here
return ``(array, None)`` or ``(None, reason)`` so that a driver can skip the
file, count it and carry on. OpenCV decodes a truncated JPEG without complaint
(the missing rows come out grey), so the container's end marker is checked
before decoding.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: File suffixes (lower case) that the footage readers treat as images.
IMAGE_SUFFIXES: frozenset[str] = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm"}
)

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"IEND"


def is_image_file(path: str | Path) -> bool:
    """Whether ``path`` has an image suffix (the file itself is not opened).

    :param path: a file path.
    """
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def check_container(data: bytes) -> str | None:
    """Say why ``data`` cannot be a complete image, or None when it looks whole.

    Checks what decoders let pass: an empty file, a JPEG without its end-of-image
    marker, a PNG without its ``IEND`` chunk.

    :param data: the file's bytes.
    :returns: a short reason, or None.
    """
    if not data:
        return "empty file (0 bytes)"
    if data[:2] == _JPEG_SOI:
        # Encoders may pad after EOI; look for the marker near the end only, because
        # a truncated file can still hold an EOI inside an embedded thumbnail.
        if _JPEG_EOI not in data[-64:]:
            return "truncated JPEG (no end-of-image marker)"
    elif data[:8] == _PNG_MAGIC:
        if _PNG_IEND not in data[-32:]:
            return "truncated PNG (no IEND chunk)"
    return None


def decode_image(data: bytes, *, grayscale: bool = True) -> tuple[np.ndarray | None, str | None]:
    """Decode image bytes.

    :param data: the encoded image.
    :param grayscale: decode to one channel (else BGR, three channels).
    :returns: ``(image, None)`` with a uint8 array, or ``(None, reason)``.
    """
    import cv2

    reason = check_container(data)
    if reason:
        return None, reason
    flag = cv2.IMREAD_GRAYSCALE if grayscale else cv2.IMREAD_COLOR
    try:
        img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flag)
    except cv2.error as exc:  # some codecs raise instead of returning None
        return None, f"cannot decode ({str(exc).strip().splitlines()[-1]})"
    if img is None or img.size == 0:
        return None, "not a readable image"
    if img.dtype != np.uint8:
        # 16-bit PNG/TIFF: scale to 8 bits rather than wrap around.
        img = (img.astype(np.float32) * (255.0 / max(1.0, float(np.iinfo(img.dtype).max)))).round()
        img = img.astype(np.uint8)
    return np.ascontiguousarray(img), None


def read_image(path: str | Path, *, grayscale: bool = True) -> tuple[np.ndarray | None, str | None]:
    """Read an image file without raising for bad files.

    Reads the bytes with Python (so non-ASCII paths work) and decodes them with
    OpenCV.

    :param path: the image file.
    :param grayscale: return a 2-D array (else BGR).
    :returns: ``(image, None)`` or ``(None, reason)``; the reason is one short phrase
        such as ``empty file (0 bytes)``, ``truncated JPEG (no end-of-image marker)``,
        ``not a readable image`` or ``missing file``.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None, "missing file"
    except IsADirectoryError:
        return None, "is a folder, not an image"
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    return decode_image(data, grayscale=grayscale)


def read_mask(path: str | Path) -> tuple[np.ndarray | None, str | None]:
    """Read a defect mask: uint8, 255 where the defect is, 0 elsewhere.

    Any non-zero pixel counts as defect, so masks stored as 0/1 label images and
    0/255 images read the same.

    :param path: the mask file (usually PNG).
    :returns: ``(mask, None)`` or ``(None, reason)`` as :func:`read_image`.
    """
    mask, reason = read_image(path, grayscale=True)
    if mask is None:
        return None, reason
    return np.where(mask > 0, np.uint8(255), np.uint8(0)), None
