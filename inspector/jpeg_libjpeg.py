"""libjpeg's own verdict on a JPEG, warnings included, through TurboJPEG (ctypes).

OpenCV decodes a JPEG whose entropy-coded data stops early without a word to the
caller: libjpeg warns ("Corrupt JPEG data: premature end of data segment"), fills
the rest with zeros, and OpenCV returns the image. For a progressive JPEG nothing
in the pixels shows it either (a cut in a late scan only loses detail), so
:mod:`inspector.imageio` asks libjpeg itself: :func:`libjpeg_warning` decodes the
file with ``TJFLAG_STOPONWARNING`` and returns the first warning.

The decode runs at 1/8 scale: a progressive file is entropy-decoded in full before
any output (every scan, so every warning), and the 1/8 scale makes the inverse DCT
next to free. ``TJFLAG_LIMITSCANS`` refuses files with more than 500 scans (a
known way to make libjpeg spin). TurboJPEG comes with libjpeg-turbo
(``apt-get install libturbojpeg0``); it is loaded on first use.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

from inspector.errors import MissingDependencyError

__all__ = ["libjpeg_warning"]

_TJFLAG_FASTDCT = 2048
_TJFLAG_STOPONWARNING = 8192
_TJFLAG_LIMITSCANS = 32768
_TJPF_GRAY = 6
_TJPF_CMYK = 11
_TJCS_CMYK, _TJCS_YCCK = 3, 4
_TJERR_WARNING = 0


@functools.lru_cache(maxsize=1)
def _turbojpeg() -> Any:
    name = ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        raise MissingDependencyError(
            "libturbojpeg", "checking progressive JPEGs", "apt-get install libturbojpeg0"
        ) from None
    lib.tjInitDecompress.restype = ctypes.c_void_p
    lib.tjInitDecompress.argtypes = []
    lib.tjDestroy.argtypes = [ctypes.c_void_p]
    lib.tjGetErrorStr2.restype = ctypes.c_char_p
    lib.tjGetErrorStr2.argtypes = [ctypes.c_void_p]
    lib.tjGetErrorCode.argtypes = [ctypes.c_void_p]
    i = ctypes.POINTER(ctypes.c_int)
    lib.tjDecompressHeader3.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, i, i, i, i,
    ]  # fmt: skip
    lib.tjDecompress2.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p,
        ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
    ]  # fmt: skip
    return lib


def libjpeg_warning(data: bytes) -> str | None:
    """The first thing libjpeg says about ``data`` while decoding it, or None when nothing.

    :param data: a JPEG file's bytes (its size already checked by the caller: this
        allocates 1/64 of its pixels).
    :returns: libjpeg's message (a warning such as ``Corrupt JPEG data: premature end of
        data segment``, or the error that stopped it), None for a clean decode.
    :raises MissingDependencyError: libturbojpeg is not installed.
    """
    lib = _turbojpeg()
    handle = lib.tjInitDecompress()
    if not handle:
        return "libjpeg: cannot start a decoder"
    try:
        w, h, sub, cs = (ctypes.c_int() for _ in range(4))
        refs = (ctypes.byref(w), ctypes.byref(h), ctypes.byref(sub), ctypes.byref(cs))
        if lib.tjDecompressHeader3(handle, data, len(data), *refs) != 0:
            return _message(lib, handle)
        cmyk = cs.value in (_TJCS_CMYK, _TJCS_YCCK)  # libjpeg converts these to CMYK only
        sw, sh = -(-w.value // 8), -(-h.value // 8)
        channels = 4 if cmyk else 1
        out = ctypes.create_string_buffer(sw * sh * channels)
        flags = _TJFLAG_FASTDCT | _TJFLAG_STOPONWARNING | _TJFLAG_LIMITSCANS
        fmt = _TJPF_CMYK if cmyk else _TJPF_GRAY
        if lib.tjDecompress2(handle, data, len(data), out, sw, 0, sh, fmt, flags) != 0:
            return _message(lib, handle)
        return None
    finally:
        lib.tjDestroy(handle)


def _message(lib: Any, handle: int) -> str:
    raw = lib.tjGetErrorStr2(handle) or b"unknown error"
    return raw.decode("utf-8", "replace").strip() or "unknown error"
