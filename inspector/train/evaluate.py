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
from inspector.progress import track
from inspector.scan import Scanner

#: Offset of synthetic evaluation frame indices: training samples indices uniformly from
#: [0, 2**31), so a fixed block far from the start is what evaluation uses.
EVAL_INDEX_BASE = 2_000_000_000
#: Parts judged on an endless source (synthetic panels) when no count is given; a
#: finite source (a folder, a manifest split, a footage store) is judged whole, once.
ENDLESS_EPISODES = 100


def source_length(driver: Any) -> int | None:
    """Frames of a finite source, None for an endless one."""
    try:
        return len(driver)
    except TypeError:
        return None


def eval_indices(driver: Any, episodes: int | None) -> list[int] | None:
    """Fixed frame indices for evaluation: all frames of a finite source, or a block.

    A finite source with more frames than ``episodes`` gives evenly spaced frames, not
    its first ones: folders and manifests are often sorted by class.

    :param episodes: parts to judge; None: every frame of a finite source, once
        (:data:`ENDLESS_EPISODES` of an endless one).
    """
    n = source_length(driver)
    if not hasattr(driver, "load"):
        return None
    if n is None:
        return list(range(EVAL_INDEX_BASE, EVAL_INDEX_BASE + (episodes or ENDLESS_EPISODES)))
    if episodes is None or n <= episodes:
        return list(range(n))
    return sorted({int(round(i * (n - 1) / max(1, episodes - 1))) for i in range(episodes)})


#: Forced verdicts named by part id in a report (the count is always complete).
MAX_NAMED_PARTS = 50

#: What a split's frames are to the model that is judged on them.
SPLIT_ROLES = {
    "train": "training",
    "val": "validation",
    "validation": "validation",
    "test": "held-out (test)",
    "heldout": "held-out",
}


def trained_source(run_dir: str | Path) -> tuple[str, dict[str, Any]] | None:
    """(camera, parameters) a run was trained on, from its ``camera.json`` (None: unknown)."""
    try:
        doc = json.loads((Path(run_dir) / "camera.json").read_text())
        return str(doc["camera"]), dict(doc["params"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def judged_frames(
    camera: str,
    params: Mapping[str, Any],
    count: int,
    source_frames: int | None = None,
    trained_on: tuple[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Which frames a figure comes from: source (camera, parameters), split, count, role.

    ``role`` says what the frames are to the model: ``training`` (the frames it was
    trained on: never a held-out figure), ``training seed`` (synthetic panels of the
    training generator that were not drawn for training), ``validation`` (chosen on:
    optimistic), ``held-out (test)``/``held-out``, or ``unsplit`` (a source without a
    split: unknown). ``held_out`` is true for the held-out splits only.

    :param count: parts judged; ``source_frames`` the source's frames (None: endless).
    :param trained_on: (camera, parameters) of training, when known.
    """
    split = str(params["split"]).lower() if "split" in params else None
    text = {k: str(v) for k, v in params.items()}
    same = (
        trained_on is not None
        and trained_on[0] == camera
        and {k: str(v) for k, v in trained_on[1].items()} == text
    )
    if same and camera == "synthetic":
        role = "training seed"
    elif same or split == "train":
        role = "training"
    elif split in SPLIT_ROLES:
        role = SPLIT_ROLES[split]
    elif camera == "synthetic":
        role = "synthetic panels"
    else:
        role = "unsplit"
    doc = {
        "camera": camera,
        "params": text,
        "split": split,
        "count": int(count),
        "source_frames": source_frames,
        "role": role,
        "held_out": role.startswith("held-out"),
    }
    doc["about"] = frames_phrase(doc)
    return doc


def frames_phrase(doc: Mapping[str, Any]) -> str:
    """``263 held-out (test) frames from folder path=... split=test (all 263, once)``."""
    params = " ".join(f"{k}={v}" for k, v in doc.get("params", {}).items())
    source = f"{doc['camera']}" + (f" {params}" if params else "")
    total = doc.get("source_frames")
    if total is None:
        extent = "an endless source"
    elif doc["count"] >= total:
        extent = f"all {total:,}, once"
    else:
        extent = f"{doc['count']:,} of {total:,}, evenly spaced"
    role = doc.get("role", "unsplit")
    noun = {
        "training seed": "unseen panels of the training generator",
        "synthetic panels": "synthetic panels",
        "unsplit": "frames of a source without splits",
    }.get(role, f"{role} frames")
    text = f"{doc['count']:,} {noun} from {source} ({extent})"
    if role == "training":
        text += ": the frames it was trained on, not a held-out figure"
    elif role == "validation":
        text += ": chosen on, not a held-out figure"
    return text


def forced_line(result: Mapping[str, Any]) -> str | None:
    """``41% of parts (108 of 263) ran out of steps: verdict forced`` (None when none did)."""
    forced = result.get("forced_verdicts") or {}
    n, total = int(forced.get("count", 0)), int(result.get("episodes", 0))
    if not n or not total:
        return None
    return (
        f"{100.0 * n / total:.0f}% of parts ({n} of {total}) ran out of steps: verdict forced "
        "(taken at the step budget, not chosen by the agent)"
    )


def depth_line(result: Mapping[str, Any]) -> str | None:
    """``search depth: zoom level 1 at most (calibrated); 63% of parts stopped there``
    (None for a model that searches every level)."""
    depth = result.get("search_depth")
    if not depth:
        return None
    return (
        f"search depth: zoom level {depth['max_zoom']} at most (calibrated); "
        f"{100.0 * depth['capped_share']:.0f}% of parts declared there rather than look deeper"
    )


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
        "forced_verdicts": {
            "count": sum(not d.stopped for d in decisions),
            "share": float(np.mean([not d.stopped for d in decisions])) if decisions else 0.0,
        },
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
    episodes: int | None,
    *,
    ok_class: str | None = None,
    budget: int | None = None,
    keep: int = 0,
    trained_on: tuple[str, Mapping[str, Any]] | None = None,
) -> tuple[dict[str, Any], list[tuple[Any, Decision]]]:
    """Evaluate ``policy`` on ``episodes`` fixed parts from the camera.

    :param policy: a backend behind :class:`Policy` (torch, ONNX Runtime, TensorRT).
    :param camera: driver name; ``camera_params`` its parameters.
    :param episodes: number of parts (finite sources: at most all their frames; None:
        all of them, once; endless sources: :data:`ENDLESS_EPISODES`).
    :param ok_class: the ok class (default: the model's, :attr:`ModelMeta.ok_class`:
        its first class, or none for a classification-only model).
    :param budget: step budget (default: the model's).
    :param keep: how many (frame, decision) pairs to return for figures.
    :param trained_on: the training camera and parameters, when known: frames from
        them are called training frames (:func:`judged_frames`).
    :returns: (metrics with ``frames`` and the forced verdicts' part ids, kept examples).
    """
    seen: dict[str, Any] = {}
    labels, decisions, kept = run_parts(
        policy, camera, camera_params, episodes, budget, keep, seen=seen
    )
    meta = policy.meta
    ok = ok_class if ok_class is not None else meta.ok_class
    result = metrics(meta.classes, ok, labels, decisions)
    forced = [pid for pid, d in zip(seen["part_ids"], decisions) if not d.stopped]
    result["forced_verdicts"]["parts"] = forced[:MAX_NAMED_PARTS]
    if meta.max_zoom is not None:
        result["search_depth"] = {
            "max_zoom": int(meta.max_zoom),
            "capped_share": float(np.mean([d.capped for d in decisions])) if decisions else 0.0,
        }
    result["frames"] = judged_frames(
        camera, camera_params or {}, len(decisions), seen["source_frames"], trained_on
    )
    return result, kept


def run_parts(
    policy: Policy,
    camera: str,
    camera_params: Mapping[str, Any] | None,
    episodes: int | None,
    budget: int | None = None,
    keep: int = 0,
    *,
    seen: dict[str, Any] | None = None,
    max_zoom: int | None = None,
) -> tuple[list[str], list[Decision], list[tuple[Any, Decision]]]:
    """One episode on each of ``episodes`` fixed labelled parts: (labels, decisions, kept).

    :param episodes: parts to judge (None: every frame of a finite source, once).
    :param seen: filled with ``part_ids`` (in order) and ``source_frames`` (the
        source's frame count, None when endless).
    :param max_zoom: the search depth (None: the model's own, :func:`run_episode`).
    :raises InspectorError: a part without a label, or with a class the model lacks.
    """
    meta = policy.meta
    scanner = Scanner.from_metadata(meta, budget)
    budget = scanner.budget
    driver = open_camera(camera, camera_params or {})
    indices = eval_indices(driver, episodes)
    source = FrameSource(driver, indices)
    labels, decisions, kept = [], [], []
    ids = [] if seen is None else seen.setdefault("part_ids", [])
    if seen is not None:
        seen["source_frames"] = source_length(driver)
    rng = np.random.default_rng(0)
    try:
        if indices is not None:
            n = len(indices)
        else:  # a stream: its length when it has one
            n = episodes or source.length or ENDLESS_EPISODES
            n = min(n, source.length) if source.length is not None else n
        for _ in track(range(n), "eval", unit="parts", progress=False, min_items=50):
            frame = source.next(rng)
            if frame.truth is None:
                raise InspectorError(f"frame {frame.part_id} has no label; eval needs labels")
            if frame.truth.label not in meta.classes:
                raise InspectorError(
                    f"frame {frame.part_id} has label {frame.truth.label!r}, not one of the "
                    f"model's classes ({', '.join(meta.classes)})"
                )
            d = run_episode(policy, scanner, frame.image, budget, max_zoom=max_zoom)
            ids.append(str(frame.part_id))
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
