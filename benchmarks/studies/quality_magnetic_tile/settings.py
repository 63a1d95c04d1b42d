"""Settings of the quality study: paths, methods, sizes, goals, number format."""

from __future__ import annotations

from typing import Any

from benchmarks.harness import RESULTS as HARNESS_RESULTS
from benchmarks.harness import ROOT
from benchmarks.harness import RUNS as HARNESS_RUNS

STUDY = "quality_magnetic_tile"
PROFILE = str(ROOT / "reward_profiles" / "magnetic_tile.yaml")
RESULTS = HARNESS_RESULTS / STUDY
RUNS = HARNESS_RUNS / STUDY
METHODS = ("agent", "tiling", "fullframe")
TILE = 32
FULL_SIZE = 64
#: Mask pixels a tile must hold to carry its image's defect label (focus_defect's min_area).
MIN_OVERLAP = 4
#: Extra training tiles per defective frame, centred near random mask pixels.
JITTER = 16
GOALS = {"defect_recall": 0.95, "false_alarm_rate": 0.05, "balanced_accuracy": 0.85}
GOAL_PIXELS = 0.25
# -- report ---------------------------------------------------------------------------------


def fmt(v: Any, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def goals_met(m: dict[str, Any]) -> dict[str, bool]:
    """Which quality goals a test result meets."""
    recall, fa = m["defect_recall"], m["false_alarm_rate"]
    return {
        "defect_recall": recall is not None and recall >= GOALS["defect_recall"],
        "false_alarm_rate": fa is not None and fa <= GOALS["false_alarm_rate"],
        "balanced_accuracy": m["balanced_accuracy"] >= GOALS["balanced_accuracy"],
    }
