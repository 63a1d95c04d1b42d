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
Progressive JPEGs are not walked; a truncated one with an appended marker passes.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import MissingDependencyError

#: File suffixes (lower case) that the footage readers treat as images.
IMAGE_SUFFIXES: frozenset[str] = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm"}
)

#: Default pixel limit (width x height) of one image; ``INSPECTOR_MAX_IMAGE_PIXELS``
#: overrides it. 100 megapixels is well above industrial area-scan cameras.
MAX_IMAGE_PIXELS = 100_000_000

#: The largest image file read (bytes).
MAX_IMAGE_BYTES = 512 * 1024 * 1024

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"IEND"
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


# -- sizes from headers (nothing decoded) ----------------------------------------------
def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers
            i += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2:
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > n:
                return None
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return (w, h) if w and h else None  # height 0 (DNL) is not supported
        i += 2 + length
    return None


def _pnm_size(data: bytes) -> tuple[int, int] | None:
    tokens: list[bytes] = []
    i, n = 2, min(len(data), 4096)
    while len(tokens) < 2 and i < n:
        c = data[i : i + 1]
        if c == b"#":
            while i < n and data[i : i + 1] not in (b"\n", b"\r"):
                i += 1
        elif c.isspace():
            i += 1
        else:
            j = i
            while j < n and not data[j : j + 1].isspace() and data[j : j + 1] != b"#":
                j += 1
            tokens.append(data[i:j])
            i = j
    if len(tokens) < 2 or not all(t.isdigit() and len(t) < 10 for t in tokens):
        return None
    return int(tokens[0]), int(tokens[1])


def _tiff_size(data: bytes) -> tuple[int, int] | None:
    order = {b"II": "<", b"MM": ">"}.get(data[:2])
    if order is None or len(data) < 8:
        return None
    magic, ifd = struct.unpack(order + "HI", data[2:8])
    if magic != 42 or ifd + 2 > len(data):
        return None
    (count,) = struct.unpack(order + "H", data[ifd : ifd + 2])
    found: dict[int, int] = {}
    for k in range(min(count, 4096)):
        at = ifd + 2 + 12 * k
        if at + 12 > len(data):
            return None
        tag, typ, num = struct.unpack(order + "HHI", data[at : at + 8])
        if tag in (256, 257) and num == 1 and typ in (3, 4):
            fmt = order + ("H" if typ == 3 else "I")
            found[tag] = struct.unpack(fmt, data[at + 8 : at + 8 + struct.calcsize(fmt)])[0]
    if 256 in found and 257 in found:
        return found[256], found[257]
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    if len(data) < 30 or data[8:12] != b"WEBP":
        return None
    chunk = data[12:16]
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L":
        (bits,) = struct.unpack("<I", data[21:25])
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) as the image's header states them, without decoding anything.

    Understands PNG, JPEG, BMP, TIFF, WebP and PGM/PPM (the :data:`IMAGE_SUFFIXES`).

    :param data: the file's bytes.
    :returns: the size, or None when the header is not one of these or is damaged.
    """
    try:
        if data[:8] == _PNG_MAGIC and data[12:16] == b"IHDR":
            return struct.unpack(">II", data[16:24])
        if data[:2] == _JPEG_SOI:
            return _jpeg_size(data)
        if data[:2] == b"BM" and len(data) >= 26:
            (dib,) = struct.unpack("<I", data[14:18])
            if dib == 12:
                return struct.unpack("<HH", data[18:22])
            w, h = struct.unpack("<ii", data[18:26])
            return abs(w), abs(h)
        if data[:2] in (b"II", b"MM"):
            return _tiff_size(data)
        if data[:4] == b"RIFF":
            return _webp_size(data)
        if data[:1] == b"P" and data[1:2] in b"123456":
            return _pnm_size(data)
    except struct.error:
        return None
    return None


def _jpeg_grey_fill(img: np.ndarray) -> bool:
    """Whether the last 8 x 8 block of a decoded JPEG is exactly the decoder's grey fill."""
    h, w = img.shape[:2]
    block = img[((h - 1) // 8) * 8 :, ((w - 1) // 8) * 8 :]
    return bool(block.size) and bool((block == _JPEG_FILL).all())


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
    flag = cv2.IMREAD_GRAYSCALE if grayscale else cv2.IMREAD_COLOR
    try:
        img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flag)
    except cv2.error as exc:  # some codecs raise instead of returning None
        return None, f"cannot decode ({str(exc).strip().splitlines()[-1]})"
    if img is None or img.size == 0:
        return None, "not a readable image"
    if img.shape[1] != w or img.shape[0] != h:
        return None, f"header says {w}x{h}, decoded {img.shape[1]}x{img.shape[0]}"
    if data[:2] == _JPEG_SOI and _jpeg_grey_fill(img) and jpeg_scan_complete(data) is False:
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


# -- a truncated JPEG given its end marker again -----------------------------------------
def _huffman_table(counts: bytes, symbols: bytes) -> list[tuple[int, int]] | None:
    """A 16-bit lookup table: peek -> (symbol, code length); (0, 0) for no code."""
    table = [(0, 0)] * 65536
    code, k = 0, 0
    for length in range(1, 17):
        for _ in range(counts[length - 1]):
            if k >= len(symbols) or code >= (1 << length):
                return None
            shift = 16 - length
            lo = code << shift
            entry = (symbols[k], length)
            for j in range(lo, lo + (1 << shift)):
                table[j] = entry
            code += 1
            k += 1
        code <<= 1
    return table


def _jpeg_segments(data: bytes):
    """(marker, payload start, payload end) of each marker segment up to and with SOS."""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2 or i + 2 + length > n:
            return
        yield marker, i + 4, i + 2 + length
        if marker == 0xDA:
            return
        i += 2 + length


def jpeg_scan_complete(data: bytes) -> bool | None:
    """Whether a baseline JPEG's scan holds every block its frame header promises.

    Walks the Huffman-coded data symbol by symbol (no pixel maths) and counts the
    blocks it finds before the data runs out. A file that was cut short and given
    an end-of-image marker again decodes without complaint (the rest comes out
    grey); this tells the two apart.

    :param data: the file's bytes.
    :returns: True or False; None when the file is not a single-scan baseline JPEG
        this can walk (progressive, arithmetic-coded, damaged tables).
    """
    tables: dict[tuple[int, int], list[tuple[int, int]]] = {}
    comps: dict[int, tuple[int, int]] = {}
    width = height = restart = 0
    sos = None
    for marker, a, b in _jpeg_segments(data):
        seg = data[a:b]
        if marker in (0xC0, 0xC1):
            if len(seg) < 6:
                return None
            height, width = struct.unpack(">HH", seg[1:5])
            for c in range(seg[5]):
                cid, hv = seg[6 + 3 * c], seg[7 + 3 * c]
                comps[cid] = (hv >> 4, hv & 15)
        elif 0xC2 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return None  # progressive, lossless or arithmetic: not walked here
        elif marker == 0xC4:
            j = 0
            while j + 17 <= len(seg):
                tc_th = seg[j]
                counts = seg[j + 1 : j + 17]
                total = sum(counts)
                table = _huffman_table(counts, seg[j + 17 : j + 17 + total])
                if table is None:
                    return None
                tables[(tc_th >> 4, tc_th & 15)] = table
                j += 17 + total
        elif marker == 0xDD and len(seg) >= 2:
            (restart,) = struct.unpack(">H", seg[:2])
        elif marker == 0xDA:
            sos = (seg, b)
    if sos is None or not comps or not width or not height:
        return None
    seg, start = sos
    ns = seg[0]
    if ns != len(comps):
        return None  # one component per scan: a multi-scan file
    hmax = max(h for h, _ in comps.values())
    vmax = max(v for _, v in comps.values())
    plan = []
    for c in range(ns):
        cid, sel = seg[1 + 2 * c], seg[2 + 2 * c]
        if cid not in comps or (0, sel >> 4) not in tables or (1, sel & 15) not in tables:
            return None
        h, v = comps[cid] if ns > 1 else (1, 1)
        plan += [(tables[(0, sel >> 4)], tables[(1, sel & 15)])] * (h * v)
    if ns > 1:
        mcus = -(-width // (8 * hmax)) * -(-height // (8 * vmax))
    else:
        mcus = -(-width // 8) * -(-height // 8)
    end = data.rfind(b"\xff\xd9")
    body = data[start:end] if end > start else data[start:]
    intervals = _split_restarts(body)
    per = restart if restart else mcus
    done = 0
    for chunk in intervals:
        want = min(per, mcus - done)
        if want <= 0:
            break
        if not _walk(chunk.replace(b"\xff\x00", b"\xff"), plan, want):
            return False
        done += want
    return done >= mcus


def _split_restarts(body: bytes) -> list[bytes]:
    out, i, last = [], 0, 0
    while True:
        i = body.find(b"\xff", i)
        if i < 0 or i + 1 >= len(body):
            break
        if 0xD0 <= body[i + 1] <= 0xD7:
            out.append(body[last:i])
            last = i + 2
        i += 2 if body[i + 1] != 0xFF else 1
    out.append(body[last:])
    return out


def _walk(chunk: bytes, plan: list, mcus: int) -> bool:
    """Whether ``chunk`` holds ``mcus`` MCUs of Huffman-coded blocks (``plan``: dc, ac tables)."""
    bits = bin(int.from_bytes(b"\x01" + chunk, "big"))[3:] + "1" * 16
    limit = len(chunk) * 8
    pos = 0
    for _ in range(mcus):
        for dc, ac in plan:
            sym, length = dc[int(bits[pos : pos + 16], 2)]
            if not length:
                return False
            pos += length + sym
            k = 1
            while k < 64:
                sym, length = ac[int(bits[pos : pos + 16], 2)]
                if not length:
                    return False
                pos += length + (sym & 15)
                if pos > limit:
                    return False
                if sym & 15:
                    k += (sym >> 4) + 1
                elif sym == 0xF0:
                    k += 16
                else:
                    break
            if pos > limit:
                return False
    return pos <= limit


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
