"""What an image file's bytes say before anything is decoded.

:func:`check_container` says whether a JPEG or PNG container is whole,
:func:`image_size` reads the size a header states (so an image that would decode
to gigabytes is refused unread), and :func:`jpeg_scan_complete` walks a baseline
JPEG's scan to tell a whole file from one cut short and given its end marker again;
:func:`jpeg_progression_complete` reads a progressive JPEG's scan headers to tell a
file cut between two scans.
:mod:`inspector.imageio` decodes footage with these checks in front.
"""

from __future__ import annotations

import struct

__all__ = [
    "check_container",
    "image_size",
    "is_jpeg",
    "jpeg_progression_complete",
    "jpeg_scan_complete",
]

_JPEG_SOI = b"\xff\xd8"
_JPEG_EOI = b"\xff\xd9"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"IEND"


def is_jpeg(data: bytes) -> bool:
    """Whether ``data`` starts like a JPEG (its start-of-image marker).

    :param data: the file's bytes.
    """
    return data[:2] == _JPEG_SOI


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


# -- a progressive JPEG whose scans stop early ----------------------------------------------
def _skip_entropy(data: bytes, i: int) -> int:
    """Where the marker after the entropy-coded data starting at ``i`` is; -1 when none."""
    n = len(data)
    while True:
        i = data.find(b"\xff", i)
        if i < 0 or i + 1 >= n:
            return -1
        nxt = data[i + 1]
        if nxt == 0x00 or 0xD0 <= nxt <= 0xD7:  # a stuffed 0xFF, a restart marker
            i += 2
        elif nxt == 0xFF:  # fill bytes before a marker
            i += 1
        else:
            return i


def jpeg_progression_complete(data: bytes) -> bool | None:
    """Whether a progressive JPEG's scans code every coefficient of every component to its
    last bit (and every segment up to the end-of-image marker is whole).

    A progressive file cut between two scans and given its end marker again is a valid
    JPEG to libjpeg (a coarser image); this tells it apart by the scan headers alone
    (nothing is decoded). Encoders (libjpeg, mozjpeg, OpenCV, Pillow) code every
    coefficient; a file that leaves one out is treated as cut short. A cut inside a
    scan is libjpeg's to notice (:func:`inspector.jpeg_libjpeg.libjpeg_warning`).

    :param data: the file's bytes.
    :returns: None when this is not a progressive JPEG; else True or False.
    """
    if data[:2] != _JPEG_SOI:
        return None
    low: dict[int, list[int]] | None = None  # component id -> lowest Al seen per coefficient
    i, n = 2, len(data)
    while True:
        if i + 2 > n or data[i] != 0xFF:
            return False if low is not None else None
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker == 0xD9:
            break
        if marker in (0x01, *range(0xD0, 0xD8)):
            i += 2
            continue
        if i + 4 > n:
            return False if low is not None else None
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2 or i + 2 + length > n:
            return False if low is not None else None
        seg = data[i + 4 : i + 2 + length]
        i += 2 + length
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if marker not in (0xC2, 0xC6, 0xCA, 0xCE) or len(seg) < 6:
                return None  # sequential or lossless: not progressive
            ids = [seg[6 + 3 * c] for c in range(seg[5]) if 6 + 3 * c < len(seg)]
            low = {cid: [99] * 64 for cid in ids}
        elif marker == 0xDA:
            if low is None or not seg or len(seg) < 1 + 2 * seg[0] + 3:
                return False if low is not None else None
            ns = seg[0]
            ss, se, a = seg[1 + 2 * ns], seg[2 + 2 * ns], seg[3 + 2 * ns]
            if not ss <= se <= 63:
                return False
            for c in range(ns):
                cov = low.get(seg[1 + 2 * c])
                if cov is None:
                    return False
                for k in range(ss, se + 1):
                    cov[k] = min(cov[k], a & 15)
            i = _skip_entropy(data, i)
            if i < 0:
                return False
    if low is None:
        return None
    return bool(low) and all(v == 0 for cov in low.values() for v in cov)
