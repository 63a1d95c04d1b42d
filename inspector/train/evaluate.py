"""Evaluation: run a policy on fixed parts and compute the inspection metrics."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inspector.camera import open_camera
from inspector.env import FrameSource
from inspector.errors import InspectorError
from inspector.files import write_atomic
from inspector.policy.agent import Decision, run_episode
from inspector.policy.base import Policy
from inspector.scan import Scanner

#: Offset of synthetic evaluation frame indices: training samples indices uniformly from
#: [0, 2**31), so a fixed block far from the start is what evaluation uses.
EVAL_INDEX_BASE = 2_000_000_000


def eval_indices(driver: Any, episodes: int) -> list[int] | None:
    """Fixed frame indices for evaluation: all frames of a finite source, or a block.

    A finite source with more frames than ``episodes`` gives evenly spaced frames, not
    its first ones: folders and manifests are often sorted by class.
    """
    try:
        n = len(driver)
    except TypeError:
        n = None
    if not hasattr(driver, "load"):
        return None
    if n is None:
        return list(range(EVAL_INDEX_BASE, EVAL_INDEX_BASE + episodes))
    if n <= episodes:
        return list(range(n))
    return sorted({int(round(i * (n - 1) / max(1, episodes - 1))) for i in range(episodes)})


def metrics(
    classes: Sequence[str],
    ok_class: str | None,
    labels: Sequence[str],
    decisions: Sequence[Decision],
) -> dict[str, Any]:
    """The metrics of ``eval``: accuracy, balanced accuracy, defect recall, false alarms...

    With no ok class (classification only: every part has a defect) there is no
    defect recall, false-alarm rate or defect AUROC (they are None); accuracy, balanced
    accuracy and the per-class recall are the figures.
    """
    idx = {c: i for i, c in enumerate(classes)}
    n = len(classes)
    conf = np.zeros((n, n), dtype=int)  # rows: truth, columns: verdict
    for y, d in zip(labels, decisions):
        conf[idx[y], idx[d.verdict]] += 1
    total = int(conf.sum())
    recall = {}
    for c, i in idx.items():
        row = conf[i].sum()
        recall[c] = float(conf[i, i] / row) if row else None
    present = [r for r in recall.values() if r is not None]
    two_class = _two_class(conf, idx, ok_class, labels, decisions)
    glimpses = sum(len(d.path) for d in decisions)
    native = sum(d.native_glimpses for d in decisions)
    return {
        "classes": list(classes),
        "episodes": total,
        "accuracy": float(np.trace(conf) / total) if total else 0.0,
        "balanced_accuracy": float(np.mean(present)) if present else 0.0,
        **two_class,
        "ok_class": ok_class,
        "confusion": conf.tolist(),
        "per_class_recall": recall,
        "mean_steps": float(np.mean([d.steps for d in decisions])) if decisions else 0.0,
        "mean_glimpses": float(glimpses / total) if total else 0.0,
        "native_share": float(native / glimpses) if glimpses else 0.0,
        "pixel_fraction": float(np.mean([d.pixel_fraction for d in decisions]))
        if decisions
        else 0.0,
        "stopped_share": float(np.mean([d.stopped for d in decisions])) if decisions else 0.0,
    }


def _two_class(
    conf: np.ndarray,
    idx: Mapping[str, int],
    ok_class: str | None,
    labels: Sequence[str],
    decisions: Sequence[Decision],
) -> dict[str, float | None]:
    """Defect recall, false-alarm rate and defect AUROC (None without an ok class)."""
    if ok_class is None:
        return {"defect_recall": None, "false_alarm_rate": None, "defect_auroc": None}
    n = len(idx)
    ok = idx[ok_class]
    defect_rows = [i for c, i in idx.items() if c != ok_class]
    defects = int(conf[defect_rows].sum())
    caught = int(conf[defect_rows][:, [j for j in range(n) if j != ok]].sum())
    oks = int(conf[ok].sum())
    false_alarms = int(oks - conf[ok, ok])
    auroc = None
    if decisions and all(len(d.probabilities) == n for d in decisions):
        from inspector.policy.operating_point import defect_auroc

        probs = np.stack([d.probabilities for d in decisions])
        auroc = defect_auroc(probs, [y != ok_class for y in labels], ok)
    return {
        "defect_recall": float(caught / defects) if defects else None,
        "false_alarm_rate": float(false_alarms / oks) if oks else None,
        "defect_auroc": auroc,
    }


def evaluate(
    policy: Policy,
    camera: str,
    camera_params: Mapping[str, Any] | None,
    episodes: int,
    *,
    ok_class: str | None = None,
    budget: int | None = None,
    keep: int = 0,
) -> tuple[dict[str, Any], list[tuple[Any, Decision]]]:
    """Evaluate ``policy`` on ``episodes`` fixed parts from the camera.

    :param policy: a backend behind :class:`Policy` (torch, ONNX Runtime, TensorRT).
    :param camera: driver name; ``camera_params`` its parameters.
    :param episodes: number of parts (finite sources: at most all their frames).
    :param ok_class: the ok class (default: the model's, :attr:`ModelMeta.ok_class`:
        its first class, or none for a classification-only model).
    :param budget: step budget (default: the model's).
    :param keep: how many (frame, decision) pairs to return for figures.
    :returns: (metrics, kept examples).
    """
    labels, decisions, kept = run_parts(policy, camera, camera_params, episodes, budget, keep)
    meta = policy.meta
    ok = ok_class if ok_class is not None else meta.ok_class
    return metrics(meta.classes, ok, labels, decisions), kept


def run_parts(
    policy: Policy,
    camera: str,
    camera_params: Mapping[str, Any] | None,
    episodes: int,
    budget: int | None = None,
    keep: int = 0,
) -> tuple[list[str], list[Decision], list[tuple[Any, Decision]]]:
    """One episode on each of ``episodes`` fixed labelled parts: (labels, decisions, kept).

    :raises InspectorError: a part without a label, or with a class the model lacks.
    """
    meta = policy.meta
    scanner = Scanner.from_metadata(meta, budget)
    budget = scanner.budget
    driver = open_camera(camera, camera_params or {})
    source = FrameSource(driver, eval_indices(driver, episodes))
    labels, decisions, kept = [], [], []
    rng = np.random.default_rng(0)
    try:
        n = episodes if source.length is None else min(episodes, source.length)
        for _ in range(n):
            frame = source.next(rng)
            if frame.truth is None:
                raise InspectorError(f"frame {frame.part_id} has no label; eval needs labels")
            if frame.truth.label not in meta.classes:
                raise InspectorError(
                    f"frame {frame.part_id} has label {frame.truth.label!r}, not one of the "
                    f"model's classes ({', '.join(meta.classes)})"
                )
            d = run_episode(policy, scanner, frame.image, budget)
            labels.append(frame.truth.label)
            decisions.append(d)
            if len(kept) < keep:
                kept.append((frame, d))
    finally:
        driver.close()
    return labels, decisions, kept


def part_probabilities(
    policy: Policy, camera: str, camera_params: Mapping[str, Any] | None, episodes: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`run_parts`, as the class probabilities at each part's decision [N, C] and
    the parts' true class indices [N] (what an operating point is chosen from)."""
    labels, decisions, _ = run_parts(policy, camera, camera_params, episodes)
    return decision_probabilities(policy.meta.classes, labels, decisions)


def decision_probabilities(
    classes: Sequence[str], labels: Sequence[str], decisions: Sequence[Decision]
) -> tuple[np.ndarray, np.ndarray]:
    """The class probabilities at each decision [N, C] and the true class indices [N]
    of :func:`run_parts`'s output."""
    idx = {c: i for i, c in enumerate(classes)}
    probs = np.stack([d.probabilities for d in decisions])
    return probs, np.asarray([idx[c] for c in labels])


def write_report(
    result: Mapping[str, Any], kept: list, out_json: Path, out_png: Path | None
) -> None:
    """report.json and a figure: confusion matrix and a few glimpse paths."""
    write_atomic(out_json, json.dumps(result, indent=2))
    if out_png is not None:
        from inspector.report import plot_eval

        plot_eval(result, kept, out_png)
