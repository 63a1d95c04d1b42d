"""Giving up on a run that is not going to make it (TrainConfig ``give_up_*``).

``train --members`` sets these for every student but the last
(:func:`inspector.train.students.give_up`); any run may set them. At each val check
(:class:`inspector.train.select.BestOnVal`) from ``give_up_after`` steps on, the run
gives up when its best val figure so far (``select_metric``) is below ``give_up_below``
AND it has stopped improving: that best is less than :data:`GAIN` above the best of the
checks up to ``give_up_patience`` checks earlier (0: no such condition). A run that
gives up ends as any run does, with its best model.

Why both: a student learning slowly but steadily is no hopeless one. On the magnetic
tiles (seed 72) a separable student stood at 0.61 on val at half its 150,000 steps,
0.29 below its ensemble, and had gained 0.03-0.12 a round; the rule without the second
condition stopped it there. Seed 68's first student, which sat at 0.843-0.850 from
87,500 steps on, is the one it is for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inspector.train.config import TrainConfig

#: A rise of the best val figure smaller than this is no progress (on the 130 magnetic-tile
#: val tiles one tile more or less moves the figure by 0.01-0.05).
GAIN = 0.01


def _running_best(checks: Sequence[Mapping[str, Any]], metric: str) -> list[float | None]:
    best: float | None = None
    out = []
    for c in checks:
        v = c.get(metric)
        if isinstance(v, (int, float)) and (best is None or v > best):
            best = float(v)
        out.append(best)
    return out


def gives_up(cfg: TrainConfig, checks: Sequence[Mapping[str, Any]]) -> dict | None:
    """Whether a run gives up at its latest val check (``checks``, oldest first, each
    with ``steps`` and the ``select_metric`` figure): what select.json and the report
    keep of it, or None while it goes on."""
    below = cfg.give_up_below
    if below is None or not checks:
        return None
    steps = int(checks[-1]["steps"])
    if steps < cfg.give_up_after:
        return None
    bests = _running_best(checks, cfg.select_metric)
    value = bests[-1]
    if value is not None and value >= below:
        return None
    n = cfg.give_up_patience
    if n:
        if len(checks) <= n:
            return None  # too few checks to tell
        earlier = bests[-1 - n]
        if value is not None and (earlier is None or value - earlier >= GAIN - 1e-9):
            return None  # still improving
    return {"steps": steps, "best": value, "below": below, "after": cfg.give_up_after,
            "patience": n}  # fmt: skip


def give_up_words(gave_up: Mapping[str, Any], metric: str) -> str:
    """Why the run gave up, in words."""
    best = gave_up["best"]
    n = gave_up.get("patience") or 0
    still = f", and rose less than {GAIN:g} over its last {n} checks" if n else ""
    return (
        f"gave up at {gave_up['steps']:,} steps: its best val {metric.replace('_', ' ')}"
        f" so far ({'n/a' if best is None else f'{best:.3f}'}) was below"
        f" {gave_up['below']:.3f} (give_up_below, checked from {gave_up['after']:,} steps)"
        f"{still}"
    )
