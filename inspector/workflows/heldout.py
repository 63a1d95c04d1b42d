"""Held-out evaluation of a policy on footage-store frames, and choosing frames to label.

Used by :mod:`inspector.workflows.retrain` (base vs candidate on the held-out split)
and ``inspector footage review --select uncertain``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.footage.store import FootageStore, FrameRecord

log = logging.getLogger("inspector.workflows.retrain")  # where these messages always went

#: The camera driver that replays a footage store.
STORE_DRIVER = "store"


def entropy(probs: Sequence[float]) -> float:
    """Shannon entropy (nats) of a probability vector."""
    p = np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1.0)
    return float(-(p * np.log(p)).sum())


def _scanner(policy: Any):
    from inspector.scan import Scanner

    scanner = Scanner.from_metadata(policy.meta)
    return scanner, scanner.budget


def evaluate_all(
    policy: Any,
    camera: str,
    camera_params: Mapping[str, Any],
    *,
    truth_ok_class: str | None,
) -> dict[str, Any]:
    """Run ``policy`` once on every frame of a finite camera and compute ``eval``'s metrics.

    :param policy: any :class:`inspector.policy.base.Policy`.
    :param camera: driver name (``store``, ``folder``).
    :param camera_params: its parameters.
    :param truth_ok_class: the label that means ok in the footage (None: none does).
    :returns: ``{"full": metrics or None, "binary": metrics, "frames": n, "judged": which
        frames (:func:`inspector.train.evaluate.judged_frames`), "forced_parts": part ids
        whose verdict was forced at the step budget}``; ``full`` is None when the footage
        has labels the model cannot declare.
    """
    from inspector.camera import open_camera
    from inspector.policy.agent import run_episode
    from inspector.progress import track
    from inspector.train.evaluate import MAX_NAMED_PARTS, judged_frames, metrics

    scanner, budget = _scanner(policy)
    labels, decisions, forced = [], [], []
    driver = open_camera(camera, dict(camera_params))
    try:
        for frame in track(driver, "held-out eval", unit="frames", progress=False):
            if frame.truth is None:
                continue
            labels.append(frame.truth.label)
            decisions.append(run_episode(policy, scanner, frame.image, budget))
            if not decisions[-1].stopped:
                forced.append(str(frame.part_id))
    finally:
        driver.close()
    if not labels:
        raise FootageError(f"camera {camera} {dict(camera_params)} gave no labelled frames")
    classes = tuple(policy.meta.classes)
    model_ok = policy.meta.ok_class  # None for a classification-only model
    full = None
    if set(labels) <= set(classes):
        full = metrics(classes, model_ok, labels, decisions)
    blabels = ["ok" if y == truth_ok_class else "defect" for y in labels]
    bdec = [replace(d, verdict="ok" if d.verdict == model_ok else "defect") for d in decisions]
    return {
        "full": full,
        "binary": metrics(("ok", "defect"), "ok", blabels, bdec),
        "frames": len(labels),
        "judged": judged_frames(camera, camera_params, len(labels), len(labels)),
        "forced_parts": forced[:MAX_NAMED_PARTS],
    }


def select_uncertain(
    policy: Any, store: FootageStore, records: Sequence[FrameRecord], n: int
) -> list[tuple[FrameRecord, float, float, str]]:
    """Active learning: the ``n`` frames the model is least sure of.

    Each frame is inspected as the station would (scan, focus, declare); frames are
    ranked by the entropy of the class probabilities at the decision, highest first
    (ties: lower max probability first).

    :param policy: the current model.
    :param store: the store the records belong to.
    :param records: candidate frames.
    :param n: how many to return.
    :returns: ``(record, entropy, max probability, verdict)`` tuples.
    """
    from inspector.policy.agent import run_episode

    scanner, budget = _scanner(policy)
    scored = []
    for rec in records:
        try:
            img = store.load_image(rec)
        except FootageError as exc:
            log.warning("skipped %s: %s", rec.frame_id, exc)
            continue
        d = run_episode(policy, scanner, img, budget)
        scored.append((rec, entropy(d.probabilities), float(np.max(d.probabilities)), d.verdict))
    scored.sort(key=lambda t: (-t[1], t[2], t[0].frame_id))
    return scored[:n]


# -- initialisation ----------------------------------------------------------------------
