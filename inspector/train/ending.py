"""The end of a run with val frames: keep the best checked model
(:class:`inspector.train.select.BestOnVal`) and choose its operating point there."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.train.config import TrainConfig
from inspector.train.select import BestOnVal, frames_doc, no_val_doc

log = logging.getLogger(__name__)


def end_of_training(
    out: Path,
    model: Any,
    sel: BestOnVal | None,
    camera: str,
    val: Mapping[str, Any] | None,
    val_source: str,
    cfg: TrainConfig,
) -> dict[str, Any]:
    """Keep the best model and choose its operating point on the val frames.

    :returns: report.json's ``kept`` and ``operating_point`` sections.
    """
    from inspector.train.calibration import calibrate_run, goal_of

    if sel is not None:
        kept = sel.finish(model)
    elif val is None:
        kept = no_val_doc(val_source)
    else:
        kept = {
            "checkpoint": "last",
            "why": "select_interval is 0: kept the last model without checking it",
            "frames": None,
        }
    doc: dict[str, Any] = {"kept": kept}
    if val is None or cfg.operating_point == "none":
        why = "operating_point: none" if val is not None else f"no val frames ({val_source})"
        doc["operating_point"] = {"ok_bias": 0.0, "why": f"not chosen: {why}", "frames": None}
        return doc
    try:
        cal = calibrate_run(out, camera, val, cfg.select_episodes, *goal_of(cfg))
    except InspectorError as exc:  # e.g. val frames of one kind only: train still ends
        if "has no ok class" not in str(exc):  # classification only: expected, not a warning
            log.warning("no operating point chosen: %s", exc)
        doc["operating_point"] = {"ok_bias": 0.0, "why": f"not chosen: {exc}", "frames": None}
        return doc
    doc["operating_point"] = cal.section(frames_doc(camera, val, cal.frames, val_source))
    return doc
