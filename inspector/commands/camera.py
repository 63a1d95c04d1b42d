"""``inspector camera``: look at what a camera driver delivers.

``camera probe --camera NAME [--param KEY=VALUE ...] [--frames N] [--sheet OUT.png]``
reads N frames, prints frames read, frames skipped (with reasons) and
frames/s, and writes a contact sheet with the defect masks outlined.
``camera list`` names the registered drivers and their parameters.
"""

from __future__ import annotations

import argparse
import inspect
import math
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from inspector.commands._args import DeprecatedAlias, RepeatedParam, positive_int
from inspector.errors import CameraError, InspectorError
from inspector.frames import Frame

#: Side of one contact-sheet cell (the image part), in pixels.
CELL = 192
_BAND = 30  # room for two lines of text under each cell
_RED = (40, 40, 235)
_YELLOW = (0, 215, 255)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``camera`` verb with its ``probe`` and ``list`` sub-verbs.

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser(
        "camera",
        help="probe camera drivers (frames/s, skipped frames, contact sheet)",
        description="Look at what a camera driver delivers.",
    )
    sub = p.add_subparsers(dest="camera_command", metavar="SUBVERB")
    sub.required = True
    probe = sub.add_parser(
        "probe",
        help="read N frames: counts, frames/s and a contact sheet",
        description=(
            "Open a camera driver, read N frames, print frames read, frames skipped (and why) "
            "and frames/s, and optionally write a contact sheet PNG with masks outlined."
        ),
    )
    probe.add_argument(
        "--camera", dest="driver", metavar="NAME", help="camera driver (see 'camera list')"
    )
    probe.add_argument(  # the spelling before --camera; it still works, with a note
        "--driver", dest="driver", action=DeprecatedAlias, instead="--camera NAME",
        help=argparse.SUPPRESS,
    )  # fmt: skip
    probe.add_argument(
        "--param",
        action=RepeatedParam,
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="driver parameter; repeat the flag for each (--param size=512 --param seed=3)",
    )
    probe.add_argument(
        "--frames", type=positive_int, default=16, help="frames to read (default 16)"
    )
    probe.add_argument("--sheet", type=Path, help="write a contact sheet PNG here")
    probe.set_defaults(func=cmd_probe)
    lst = sub.add_parser(
        "list",
        help="list camera drivers and their parameters",
        description="List the registered camera drivers and their parameters with defaults.",
    )
    lst.set_defaults(func=cmd_list)
    return p


def _fmt_default(p: inspect.Parameter) -> str:
    return "required" if p.default is inspect.Parameter.empty else f"default {p.default!r}"


def cmd_list(args: argparse.Namespace) -> int:
    """Print each driver, the plugin that registered it and its parameters."""
    from inspector.camera import driver_params
    from inspector.plugins import get_plugins

    reg = get_plugins().camera_drivers
    for name in reg.names():
        factory = reg.get(name)
        print(f"{name}  ({reg.plugin_of(name)})")
        for pname, p in driver_params(factory).items():
            print(f"    {pname}: {_fmt_default(p)}")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    """Read ``--frames`` frames from ``--camera`` and report (see the module docstring)."""
    from inspector.camera import open_camera, parse_params

    if not args.driver:
        raise InspectorError("camera probe needs --camera NAME (see 'camera list')")
    params = parse_params(args.param)
    cam = open_camera(args.driver, params)
    frames: list[Frame] = []
    try:
        t0 = time.perf_counter()
        try:
            for frame in cam:
                frames.append(frame)
                if len(frames) >= args.frames:
                    break
        except OSError as exc:
            raise CameraError(f"camera {args.driver!r} failed while reading: {exc}") from None
        elapsed = time.perf_counter() - t0
    finally:
        cam.close()
    stats = cam.stats
    rate = len(frames) / elapsed if elapsed > 0 else float("inf")
    print(f"camera: {args.driver} ({cam.describe()})")
    print(f"frames read: {len(frames)}")
    print(f"frames skipped: {stats.frames_skipped}")
    for reason in stats.skipped[:5]:
        print(f"  skipped {reason}")
    if stats.frames_skipped > 5:
        print(f"  ... and {stats.frames_skipped - 5} more")
    print(f"frames/s: {rate:.1f}")
    if stats.reconnects:
        print(f"reconnects: {stats.reconnects}")
    labels = Counter(f.truth.label for f in frames if f.truth is not None)
    if labels:
        print("labels: " + ", ".join(f"{k} {v}" for k, v in sorted(labels.items())))
    if frames:
        h, w = frames[0].shape
        print(f"frame size: {w}x{h}")
    if not frames:
        raise CameraError(
            f"camera {args.driver!r} delivered no frames ({stats.frames_skipped} skipped)"
        )
    if args.sheet is not None:
        write_sheet(args.sheet, frames)
        print(f"sheet: {args.sheet}")
    return 0


def _cell(frame: Frame, cell: int) -> np.ndarray:
    """One frame as a BGR thumbnail with its truth drawn, plus a text band."""
    import cv2

    img = frame.image
    bgr = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR) if img.ndim == 2 else img.copy()
    h, w = bgr.shape[:2]
    scale = cell / max(h, w)
    tw, th = max(1, round(w * scale)), max(1, round(h * scale))
    thumb = cv2.resize(bgr, (tw, th), interpolation=cv2.INTER_AREA)
    truth = frame.truth
    if truth is not None and truth.mask is not None and truth.mask.any():
        # Contours at full resolution, then scaled: small defects keep their place.
        contours, _ = cv2.findContours(
            (truth.mask > 0).astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE
        )
        for c in contours:
            pts = np.round((c.astype(np.float64) + 0.5) * scale - 0.5).astype(np.int32)
            x, y, bw, bh = cv2.boundingRect(pts)
            if bw < 4 and bh < 4:
                # A point defect is sub-pixel in the thumbnail: circle it so it shows.
                cv2.circle(thumb, (x + bw // 2, y + bh // 2), 6, _RED, 1, cv2.LINE_AA)
            else:
                cv2.polylines(thumb, [pts], True, _RED, 1, cv2.LINE_AA)
    elif truth is not None:
        for b in truth.boxes:
            p0 = (int(b.x0 * scale), int(b.y0 * scale))
            p1 = (max(p0[0] + 1, int(b.x1 * scale)), max(p0[1] + 1, int(b.y1 * scale)))
            cv2.rectangle(thumb, p0, p1, _YELLOW, 1)
    out = np.full((cell + _BAND, cell, 3), 32, dtype=np.uint8)
    out[:th, :tw] = thumb
    label = truth.label if truth is not None else "(no truth)"
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(out, label[:24], (3, cell + 12), font, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
    pid = frame.part_id if len(frame.part_id) <= 30 else "..." + frame.part_id[-27:]
    cv2.putText(out, pid, (3, cell + 25), font, 0.33, (180, 180, 180), 1, cv2.LINE_AA)
    return out


def contact_sheet(frames: Sequence[Frame], *, cell: int = CELL, cols: int | None = None):
    """A BGR image tiling ``frames`` with masks outlined (red), boxes (yellow) and labels.

    :param frames: the frames to show.
    :param cell: side of each thumbnail in pixels.
    :param cols: columns (default: about square).
    :returns: uint8 array (H, W, 3).
    """
    if not frames:
        raise ValueError("contact_sheet needs at least one frame")
    cols = cols or math.ceil(math.sqrt(len(frames)))
    rows = math.ceil(len(frames) / cols)
    gap = 4
    ch, cw = cell + _BAND, cell
    sheet = np.full((rows * (ch + gap) + gap, cols * (cw + gap) + gap, 3), 16, dtype=np.uint8)
    for k, frame in enumerate(frames):
        r, c = divmod(k, cols)
        y, x = gap + r * (ch + gap), gap + c * (cw + gap)
        sheet[y : y + ch, x : x + cw] = _cell(frame, cell)
    return sheet


def write_sheet(path: Path, frames: Sequence[Frame], *, cell: int = CELL) -> Path:
    """Write :func:`contact_sheet` of ``frames`` as a PNG.

    :param path: the output file (its folder is created).
    :param frames: the frames to show.
    :param cell: side of each thumbnail.
    :raises InspectorError: the file cannot be written.
    """
    import cv2

    path = Path(path)
    if path.suffix.lower() != ".png":
        raise InspectorError(f"--sheet expects a .png file, got {path}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InspectorError(f"cannot create {path.parent}: {exc.strerror}") from None
    ok, buf = cv2.imencode(".png", contact_sheet(frames, cell=cell))
    try:
        if not ok:
            raise OSError("PNG encoding failed")
        path.write_bytes(buf.tobytes())
    except OSError as exc:
        raise InspectorError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path
