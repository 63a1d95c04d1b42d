"""Camera benchmark: synthetic frames/s at 512x512 on one core, against a baseline.

The baseline, measured in the same run, is the bare cost of allocating and
copying a 512x512 uint8 frame: the least any driver that hands out fresh
frames must pay. The synthetic camera's figure is reported as frames/s and as
a ratio to that baseline. With the magnetic-tile footage present it also
reports the folder camera's decode rate on the test split.

Run from the repository root::

    python -m benchmarks.speed.camera [--quick]

Writes the ``camera`` section of docs/benchmarks.md.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from benchmarks.harness import magnetic_tile_root, one_core, parser, table, write_section
from camera_drivers.folder import FolderCamera
from camera_drivers.synthetic import SyntheticCamera

GOAL_FPS = 500.0


def time_per_item(fn, n: int, repeats: int) -> float:
    """Median over ``repeats`` of the seconds per call of ``fn(k)`` for k in range(n)."""
    results = []
    for r in range(repeats):
        t0 = time.perf_counter()
        for k in range(n):
            fn(r * n + k)
        results.append((time.perf_counter() - t0) / n)
    return statistics.median(results)


def baseline(size: int, n: int, repeats: int) -> float:
    """Seconds to allocate and copy one size x size uint8 frame."""
    src = np.random.default_rng(0).integers(0, 256, size=(size, size), dtype=np.uint8)

    def step(_k: int) -> None:
        dst = np.empty_like(src)
        np.copyto(dst, src)

    return time_per_item(step, n, repeats)


def synthetic(size: int, n: int, repeats: int, **params) -> tuple[float, float]:
    """(seconds per frame, seconds to build the banks) of the synthetic camera."""
    t0 = time.perf_counter()
    cam = SyntheticCamera(size=size, seed=0, **params)
    build = time.perf_counter() - t0
    for i in range(20):  # warm caches and allocator
        cam.load(10**6 + i)
    return time_per_item(cam.load, n, repeats), build


def folder_rate(n_max: int) -> tuple[int, float] | None:
    """(frames, seconds per frame) reading the magnetic-tile test split, or None."""
    root = magnetic_tile_root()
    if root is None:
        return None
    cam = FolderCamera(str(root), manifest="splits.csv", split="test")
    t0 = time.perf_counter()
    n = 0
    for _ in cam:
        n += 1
        if n >= n_max:
            break
    return n, (time.perf_counter() - t0) / max(1, n)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its section; return 0 (1 when the goal is missed)."""
    args = parser(__doc__, quick="fewer frames, 512 px only").parse_args(argv)
    threads = one_core()
    n, repeats = (300, 3) if args.quick else (2000, 5)
    base = baseline(512, n * 5, repeats)
    rows = []
    per, build = synthetic(512, n, repeats)
    fps512 = 1.0 / per
    rows.append(
        [
            "synthetic 512x512 (defaults)",
            f"{fps512:,.0f}",
            f"{per / base:,.1f}x",
            f"{build * 1e3:.0f} ms",
        ]
    )
    if not args.quick:
        for size in (256, 1024, 2048):
            p, b = synthetic(size, max(50, n * 512 * 512 // (size * size) // 4), repeats)
            rows.append([f"synthetic {size}x{size}", f"{1 / p:,.0f}", "-", f"{b * 1e3:.0f} ms"])
        p, b = synthetic(512, n, repeats, defect_rate=1.0, class_mix={"line": 1.0})
        rows.append(["synthetic 512x512, lines only", f"{1 / p:,.0f}", f"{p / base:,.1f}x", "-"])
        p, b = synthetic(512, n, repeats, defect_rate=1.0, class_mix={"point": 1.0})
        rows.append(["synthetic 512x512, points only", f"{1 / p:,.0f}", f"{p / base:,.1f}x", "-"])
    rows.append(["baseline: allocate + copy 512x512 uint8", f"{1 / base:,.0f}", "1.0x", "-"])
    fr = folder_rate(60 if args.quick else 263)
    if fr is not None:
        k, p = fr
        rows.append(
            [f"folder, magnetic-tile test split ({k} JPEG + PNG mask)", f"{1 / p:,.0f}", "-", "-"]
        )
    verdict = "meets" if fps512 >= GOAL_FPS else "MISSES"
    body = (
        table(["what", "frames/s", "time vs baseline", "bank build"], rows)
        + f"\nOne core ({threads}). Synthetic 512x512: **{fps512:,.0f} frames/s**, "
        f"{verdict} the goal of {GOAL_FPS:.0f} frames/s; "
        f"{per / base:.1f}x the cost of allocating and copying a frame. "
        f"Median of {repeats} runs of {n} frames each.\n"
    )
    cmd = "python -m benchmarks.speed.camera" + (" --quick" if args.quick else "")
    print(body)
    if not args.no_write:
        print(f"wrote {write_section('camera', 'Camera drivers', body, cmd, doc=args.doc)}")
    return 0 if fps512 >= GOAL_FPS else 1


if __name__ == "__main__":
    sys.exit(main())
