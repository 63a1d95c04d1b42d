"""Section 1b's plot: each driver's figures against mean glimpses and pixel fraction."""

from __future__ import annotations

from pathlib import Path

from benchmarks.studies.search_controls import analysis
from benchmarks.studies.search_controls.report import DRIVER_WORDS

LINES = {
    "raster": ("tab:blue", "-"),
    "raster max": ("tab:blue", ":"),
    "random": ("tab:orange", "-"),
    "random max": ("tab:orange", ":"),
    "agent cap": ("tab:green", "--"),
}
MARKS = {
    "overview": ("k", "s"),
    "tiling": ("tab:purple", "D"),
    "tiling max": ("tab:purple", "d"),
    "tiling stop": ("tab:pink", "P"),
    "agent": ("tab:red", "*"),
}
KEYS = (
    ("recall", f"recall at <= {analysis.FA_CEILING:.0%} false alarms"),
    ("auroc", "defect AUROC"),
    ("accuracy", "accuracy"),
)


def plot(mean_rows: list[dict], path: Path, title: str) -> None:
    """Two rows of three panels: against mean glimpses (log), against pixel fraction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.2))
    for row, (on, xlabel) in enumerate(
        (
            ("glimpses", "mean glimpses per frame (overview included, log scale)"),
            ("pixel_fraction", "native pixels examined / frame pixels (symlog)"),
        )
    ):
        for ax, (key, label) in zip(axes[row], KEYS):
            for d, (c, ls) in LINES.items():
                pts = sorted((r[on], r[key]) for r in mean_rows if r["driver"] == d)
                if pts:
                    ax.plot(*zip(*pts), ls, color=c, marker=".", ms=3, label=DRIVER_WORDS[d])
            for d, (c, m) in MARKS.items():
                for r in (r for r in mean_rows if r["driver"] == d):
                    size = 13 if d == "agent" else 8
                    ax.plot(r[on], r[key], m, color=c, ms=size, label=DRIVER_WORDS[d])
            if on == "glimpses":
                ax.set_xscale("log")
            else:
                ax.set_xscale("symlog", linthresh=0.01)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    fig.legend(seen.values(), seen.keys(), loc="lower center", ncol=5, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
