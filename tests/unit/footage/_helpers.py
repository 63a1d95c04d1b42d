"""Helpers of the footage tests: the ``store`` driver, synthetic footage on disk."""

from __future__ import annotations

import csv
from pathlib import Path

import cv2
import numpy as np


def ensure_store_driver() -> None:
    """Register the ``store`` driver in the process-wide plugins when the built-ins lack it.

    ``camera_drivers.footage_store`` belongs in ``inspector.plugins.DEFAULT_PLUGINS``; until
    it is listed there, the tests add it to the cached registry (in-process only).
    """
    from inspector.plugins import get_plugins

    reg = get_plugins().camera_drivers
    if "store" not in reg.names():
        from camera_drivers.footage_store import StoreCamera

        reg.add("store", StoreCamera, "camera_drivers.footage_store")


def write_synthetic_manifest(
    folder: Path, n: int, *, size: int = 128, seed: int = 7, start: int = 0
) -> Path:
    """``n`` synthetic panels as PNG image + mask pairs and a manifest.csv (image,mask,label)."""
    from inspector.camera import open_camera

    folder.mkdir(parents=True, exist_ok=True)
    cam = open_camera("synthetic", {"size": size, "seed": seed})
    rows = []
    for i in range(start, start + n):
        f = cam.load(i)
        img_name, mask_name = f"p{i:05d}.png", f"p{i:05d}_m.png"
        cv2.imwrite(str(folder / img_name), f.gray)
        mask = f.truth.defect_mask(f.shape)
        m = np.zeros(f.shape, np.uint8) if mask is None else mask.astype(np.uint8) * 255
        cv2.imwrite(str(folder / mask_name), m)
        rows.append([img_name, mask_name, f.truth.label, "train"])
    path = folder / "manifest.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "mask", "label", "split"])
        w.writerows(rows)
    return path
