"""Figures: confusion matrices, glimpse paths, reward traces (matplotlib, Agg)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_path(ax: Any, image: np.ndarray, path: list, levels: int, glimpse: int) -> None:
    """Draw the frame and the glimpse rectangles of ``path`` (later glimpses brighter)."""
    h, w = image.shape[:2]
    ax.imshow(image, cmap="gray", vmin=0, vmax=255)
    n = max(1, len(path))
    for k, p in enumerate(path):
        t = p.zoom / max(1, levels - 1)
        cw = w * (min(glimpse, w) / w) ** t
        ch = h * (min(glimpse, h) / h) ** t
        x0, y0 = p.x * w - cw / 2, p.y * h - ch / 2
        color = (1.0, 0.2 + 0.8 * k / n, 0.0)
        ax.add_patch(pyplot().Rectangle((x0, y0), cw, ch, fill=False, color=color, lw=1))
    ax.set_xticks([])
    ax.set_yticks([])


def plot_eval(result: Mapping[str, Any], kept: list, out: Path) -> None:
    """Confusion matrix plus up to 6 parts with their glimpse paths and verdicts."""
    plt = pyplot()
    classes = result["classes"]
    conf = np.asarray(result["confusion"])
    n_ex = min(6, len(kept))
    fig = plt.figure(figsize=(4 + 2.2 * max(1, (n_ex + 1) // 2), 4.5))
    ax = fig.add_subplot(1, 1 + max(1, (n_ex + 1) // 2), 1)
    ax.imshow(conf, cmap="Blues")
    ax.set_xticks(range(len(classes)), classes, rotation=45, ha="right")
    ax.set_yticks(range(len(classes)), classes)
    ax.set_xlabel("verdict")
    ax.set_ylabel("truth")
    for i in range(conf.shape[0]):
        for j in range(conf.shape[1]):
            ax.text(j, i, str(conf[i, j]), ha="center", va="center", fontsize=8)
    ax.set_title(f"acc {result['accuracy']:.2f}, bal {result['balanced_accuracy']:.2f}")
    frames = result.get("eval_frames") or result.get("frames")
    if frames:  # a figure names its frames: source, split, count, what they are to the model
        fig.suptitle(textwrap.fill(frames["about"], 110), fontsize=8)
    cols = max(1, (n_ex + 1) // 2)
    scan = result.get("scan") or {}
    levels, glimpse = int(scan.get("zoom_levels", 3)), int(scan.get("glimpse", 32))
    for k, (frame, d) in enumerate(kept[:n_ex]):
        r, c = divmod(k, cols)
        axk = fig.add_subplot(2, 1 + cols, r * (1 + cols) + c + 2)
        draw_path(axk, frame.gray, d.path, levels=levels, glimpse=glimpse)
        truth = frame.truth.label if frame.truth else "?"
        axk.set_title(f"{truth} -> {d.verdict} ({d.steps})", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
