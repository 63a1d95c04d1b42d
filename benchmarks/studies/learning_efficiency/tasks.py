"""The two synthetic tasks, the one in use, and where its runs are saved."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmarks.harness import RESULTS as HARNESS_RESULTS

STUDY = "learning_efficiency"
RESULTS = HARNESS_RESULTS / STUDY


@dataclasses.dataclass(frozen=True)
class Task:
    """One synthetic inspection task: the camera and how the agent may look at it.

    Both tasks: 128x128 panels, 1-px points whose contrast is capped so that they are
    invisible in the 32-px overview (``invisible_at=32``): finding them needs a glimpse
    at native resolution, and a search, since the overview does not say where.
    """

    name: str
    camera: dict
    glimpse: int
    zoom_levels: int
    step_budget: int
    about: str


TASKS = {
    # The default since 2026-12-05. A shallow pixel grid (grid 0.25) lets the default
    # glimpse CNN tell a 1-px point from the texture at native resolution (supervised
    # probe: 0.99 held out, against 0.50-0.58 on the full grid); 64-px glimpses make the
    # native level 4 cells, so a complete search takes ~6 steps (teacher: 5.7, ceiling
    # 1.00) and the question is what the rewards teach, not whether 1-px points on an
    # LCD grid can be seen by a small CNN.
    "quadrants": Task(
        "quadrants",
        {"size": 128, "invisible_at": 32, "point_size": (1, 1), "grid": 0.25},
        glimpse=64,
        zoom_levels=2,
        step_budget=16,
        about="shallow pixel grid (`grid=0.25`), glimpse 64, 2 zoom levels: the native level"
        " is 4 cells of 64x64",
    ),
    # The first task (until 2026-12-05): full-depth grid, 32-px glimpses, 3 zoom levels.
    # A 1-px point is invisible at the first zoom level too (the searching teacher finds
    # 1 % of points there), so a part needs a search of 16 native cells: 12 steps cap any
    # search at ~0.82 accuracy, 24 allow ~0.93 (see `search_ceiling`).
    "grid16": Task(
        "grid16",
        {"size": 128, "invisible_at": 32, "point_size": (1, 1)},
        glimpse=32,
        zoom_levels=3,
        step_budget=24,
        about="full-depth pixel grid, glimpse 32, 3 zoom levels (reward_profiles/lcd_panel.yaml"
        " scan): the native level is 16 cells of 32x32",
    ),
}
DEFAULT_TASK = "quadrants"
#: Points of the synthetic panels' pixel grid (camera_drivers/synthetic.py draws its grid
#: at one of these pitches); :func:`grid_residual` tries each, knowing nothing else.
GRID_PITCHES = (3, 4, 5)


class _InUse:
    """The task every function of the study works on (:func:`use_task`)."""

    task = TASKS[DEFAULT_TASK]


def current() -> Task:
    """The task in use (:func:`use_task`; default :data:`DEFAULT_TASK`)."""
    return _InUse.task


def use_task(name: str) -> Task:
    """Make ``name`` the task every function of the study works on."""
    _InUse.task = TASKS[name]
    return _InUse.task


def results_dir(mode: str) -> Path:
    """Where the task's runs are saved (the first task kept the plain mode name)."""
    name = current().name
    return RESULTS / (mode if name == "grid16" else f"{mode}_{name}")
