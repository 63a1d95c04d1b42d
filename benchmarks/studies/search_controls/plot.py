"""The study's plot: each driver's figures against mean glimpses (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.studies.search_controls import analysis
from benchmarks.studies.search_controls.report import DRIVER_WORDS


def plot_controls(mean_rows: list[dict], path: Path, title: str) -> None:
    """Recall at the operating point, AUROC and accuracy against mean glimpses."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    lines = {
        "raster": ("tab:blue", "-"),
        "raster max": ("tab:blue", ":"),
        "random": ("tab:orange", "-"),
        "random max": ("tab:orange", ":"),
        "walk": ("tab:brown", "-"),
        "walk max": ("tab:brown", ":"),
        "agent cap": ("tab:green", "--"),
    }
    marks = {
        "overview": ("k", "s"),
        "tiling": ("tab:purple", "D"),
        "tiling max": ("tab:purple", "d"),
        "tiling stop": ("tab:pink", "P"),
        "agent": ("tab:red", "*"),
    }
    keys = (
        ("recall", f"recall at <= {analysis.FA_CEILING:.0%} false alarms"),
        ("auroc", "defect AUROC"),
        ("accuracy", "accuracy"),
    )
    for ax, (key, label) in zip(axes, keys):
        for d, (c, ls) in lines.items():
            pts = sorted((r["glimpses"], r[key]) for r in mean_rows if r["driver"] == d)
            if pts:
                ax.plot(*zip(*pts), ls, color=c, marker=".", label=DRIVER_WORDS[d])
        for d, (c, m) in marks.items():
            for r in (r for r in mean_rows if r["driver"] == d):
                ax.plot(r["glimpses"], r[key], m, color=c, ms=12 if d == "agent" else 8,
                        label=DRIVER_WORDS[d])  # fmt: skip
        ax.set_xlabel("mean glimpses per part (overview included)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    fig.legend(seen.values(), seen.keys(), loc="lower center", ncol=5, fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
