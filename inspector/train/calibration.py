"""Choose and store a model's operating point: what ``inspector calibrate`` does and
what ``train`` does as its last step (on the val frames)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import InspectorError
from inspector.policy.base import Policy
from inspector.policy.operating_point import (
    OperatingPoint,
    bound_words,
    choose_bias,
    rates_at,
)


@dataclass
class Calibration:
    """An ok bias chosen on labelled parts.

    :param ok_bias: the chosen bias; ``objective``/``target`` how it was chosen.
    :param frames: how many parts; ``source`` where they came from, in words.
    :param at_bias: balanced accuracy, defect recall and false alarms at the bias.
    :param at_zero: the same at bias 0 with the full search (as trained).
    :param max_zoom: the search depth chosen with the bias (None: every level).
    :param depths: each depth tried (deepest first): ``max_zoom``, ``ok_bias``, its rates
        there and ``mean_actions`` per part, or ``error`` where the objective could not
        be met at that depth.
    :param confidence: the confidence at which a constrained target held (None: the rate
        seen); ``good_parts`` and ``defective_parts``: how many of each the frames had.
    """

    ok_bias: float
    objective: str
    target: float | None
    frames: int
    source: str
    at_bias: dict[str, float]
    at_zero: dict[str, float]
    max_zoom: int | None = None
    depths: list[dict[str, Any]] = field(default_factory=list)
    confidence: float | None = None
    good_parts: int = 0
    defective_parts: int = 0

    def bound_words(self) -> str:
        """What the target held at, in words (empty without a confidence)."""
        return bound_words(
            self.at_bias, self.objective, self.confidence, self.good_parts, self.defective_parts
        )

    def section(self, frames: dict[str, Any]) -> dict[str, Any]:
        """report.json's ``operating_point`` section; ``frames``: which parts, in words
        (:func:`inspector.train.select.frames_doc`)."""
        return {
            "ok_bias": self.ok_bias,
            "objective": self.objective,
            "target": self.target,
            "at_bias": self.at_bias,
            "at_zero": self.at_zero,
            "max_zoom": self.max_zoom,
            "depths": self.depths,
            "confidence": self.confidence,
            "held_at": self.bound_words().strip(" ()") or None,
            "frames": frames,
        }

    def depth_words(self, levels: int | None = None) -> str:
        """The chosen search depth in words."""
        if self.max_zoom is None:
            return "every zoom level (as trained)"
        of = f" of 0..{levels - 1}" if levels else ""
        return f"zoom level {self.max_zoom}{of} at most (deeper glimpses cut)"


def source_words(camera: str, params: Mapping[str, Any]) -> str:
    """``camera k=v ...``: where labelled parts came from, as calibrate prints it."""
    return " ".join([camera, *(f"{k}={v}" for k, v in sorted(params.items()))])


def choose_operating_point(
    policy: Policy,
    camera: str,
    params: Mapping[str, Any],
    episodes: int | None,
    objective: str = "balanced",
    target: float | None = None,
    depth: str | int = "full",
    deepest: int | None = None,
    confidence: float | None = None,
) -> Calibration:
    """Run ``policy`` once on ``episodes`` labelled parts and choose its ok bias, and with
    ``depth`` ``auto`` its search depth too.

    ``episodes`` None: every frame of a finite source, once (100 synthetic panels).

    :param depth: ``full`` (every zoom level, as trained), a zoom level (the deepest the
        search may look at), or ``auto``: each level from the deepest up, keeping a
        shallower one only where it meets the objective strictly better on these parts
        (:func:`choose_depth`). One pass at full depth serves every depth
        (:func:`inspector.policy.agent.capped_at`).
    :param deepest: with ``auto``, the deepest level to try: the depth a model was trained
        at (``rollout_max_zoom``); deeper levels are views it never learned to read.
    :param confidence: hold a constrained target at this confidence
        (:func:`inspector.policy.operating_point.choose_bias`); None: the rate seen.
    :raises InspectorError: the model has no ok class (classification only), a depth
        outside the model's zoom levels, or an objective no depth meets.
    """
    from inspector.train.evaluate import decision_probabilities, run_parts

    meta = policy.meta
    if meta.classification_only:
        raise InspectorError(
            f"calibrate: the model has no ok class (its profile says 'ok_class: none'), so "
            f"there is no ok-vs-defect operating point to choose; it declares the likeliest "
            f"of {', '.join(meta.classes)}. Judge it by accuracy and per-class recall "
            "('inspector eval' on the held-out frames)"
        )
    levels = int(meta.scan.get("zoom_levels", 1))
    candidates = depth_candidates(depth, levels, deepest)
    labels, decisions, _ = run_parts(policy, camera, params, episodes, max_zoom=levels - 1)
    probs, y = decision_probabilities(meta.classes, labels, decisions)
    chosen, table = choose_depth(
        decisions, y, meta.outcome_matrix, candidates, objective, target, confidence
    )
    return Calibration(
        ok_bias=chosen["ok_bias"],
        objective=objective,
        target=target,
        frames=len(y),
        source=source_words(camera, params),
        at_bias=chosen["at_bias"],
        at_zero=rates_at(probs, y, meta.outcome_matrix, 0.0),
        max_zoom=None if chosen["max_zoom"] == levels - 1 else chosen["max_zoom"],
        depths=table if len(candidates) > 1 else [],
        confidence=confidence,
        good_parts=int((y == 0).sum()),
        defective_parts=int((y != 0).sum()),
    )


def goal_of(cfg: Any) -> tuple[str, float | None, str | int, int | None, float | None]:
    """(objective, target, search depth, deepest level to try: the depth training ran at,
    confidence) of a TrainConfig's closing calibration."""
    return (
        cfg.operating_point,
        cfg.operating_target,
        cfg.search_depth,
        cfg.rollout_max_zoom,
        held_confidence(cfg),
    )


def held_confidence(cfg: Any) -> float | None:
    """The confidence a TrainConfig's objective holds its target at (None: ``balanced``
    and ``none`` have no target; ``operating_confidence: null``: the rate seen)."""
    if cfg.operating_point in ("max_false_alarms", "min_recall"):
        return cfg.operating_confidence
    return None


def trained_depth(model: str | Path) -> int | None:
    """The deepest zoom level ``model`` was trained at (its run's ``rollout_max_zoom``),
    for ``calibrate --search-depth auto`` run on it later by hand.

    ``model``: a run directory or its ``model.zip`` (the run's ``config.yaml``), or an
    ensemble directory (the deepest of its members'). None: every level, or not known
    (an ONNX file, no config beside the model, a member without one, a value that is
    not a zoom level); calibration then tries every level, as before.
    """
    from inspector.train.distill import ensemble_members, is_ensemble_dir

    path = Path(model)
    if is_ensemble_dir(path):
        try:
            depths = [trained_depth(m) for m in ensemble_members(path)]
        except InspectorError:
            return None
        return None if any(d is None for d in depths) else max(depths)  # type: ignore[type-var]
    run = path if path.is_dir() else path.parent
    if path.is_file() and path.suffix.lower() != ".zip":
        return None
    try:
        import yaml

        doc = yaml.safe_load((run / "config.yaml").read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    depth = doc.get("rollout_max_zoom") if isinstance(doc, dict) else None
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        return None
    return depth


def depth_candidates(depth: str | int, levels: int, deepest: int | None = None) -> list[int]:
    """The search depths ``depth`` asks to try, deepest first (``auto``: none deeper than
    ``deepest``, the depth the model was trained at).

    :raises InspectorError: not ``auto``, ``full`` or a zoom level of the model.
    """
    if depth == "auto":
        top = levels - 1 if deepest is None else max(0, min(deepest, levels - 1))
        return list(range(top, -1, -1))
    if depth == "full":
        return [levels - 1]
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth < levels:
        raise InspectorError(
            f"search depth must be auto, full or a zoom level 0..{levels - 1} of the model,"
            f" got {depth!r}"
        )
    return [depth]


def choose_depth(
    decisions: list,
    labels: np.ndarray,
    outcome_matrix: np.ndarray,
    candidates: list[int],
    objective: str,
    target: float | None,
    confidence: float | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The search depth and ok bias that best meet ``objective`` on these parts.

    ``decisions`` are full-depth episodes; each candidate depth (deepest first) is read
    from them as if run at that depth. A shallower depth wins only by being strictly
    better (balanced accuracy; recall under the false-alarm ceiling, then fewer false
    alarms; fewer false alarms over the recall floor), so on a tie the search stays as
    trained.

    :returns: (the chosen entry, every entry) with ``max_zoom``, ``ok_bias``, ``at_bias``
        and ``mean_actions``.
    :raises InspectorError: no candidate depth meets the objective (the deepest's reason).
    """
    from inspector.policy.agent import capped_at

    by_depth = {}
    for d in candidates:
        capped = [capped_at(dec, d) for dec in decisions]
        by_depth[d] = (np.stack([c[0] for c in capped]), float(np.mean([c[1] for c in capped])))
    return choose_among_depths(by_depth, labels, outcome_matrix, objective, target, confidence)


def choose_among_depths(
    by_depth: Mapping[int, tuple[np.ndarray, float]],
    labels: np.ndarray,
    outcome_matrix: np.ndarray,
    objective: str,
    target: float | None,
    confidence: float | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`choose_depth` on the parts' probabilities already cut at each depth:
    ``{depth: (probabilities [N, C], mean actions per part)}``, deepest first."""
    table, best, first_error = [], None, None
    for d, (probs, actions) in by_depth.items():
        entry: dict[str, Any] = {"max_zoom": d, "mean_actions": round(actions, 3)}
        try:
            entry["ok_bias"], entry["at_bias"] = choose_bias(
                probs, labels, outcome_matrix, objective, target, confidence=confidence
            )
        except InspectorError as exc:
            first_error = first_error or exc
            table.append(entry | {"error": str(exc)})
            continue
        table.append(entry)
        if best is None or _score(entry, objective) > _score(best, objective):
            best = entry
    if best is None:
        raise first_error or InspectorError("no search depth to calibrate")
    return best, table


def pooled_depth(
    tables: list[list[dict[str, Any]]], objective: str
) -> tuple[int, dict[str, list[float]]]:
    """The depth whose objective figure, averaged over several models' depth tables
    (:attr:`Calibration.depths`), is best; ties and a depth some model could not
    calibrate at go to the deeper.

    Always a zoom level, never ``full``: the deepest level the tables tried is the
    profile's native level only for models trained over every level; for a model trained
    one level above native (``rollout_max_zoom``) it is that level, and ``full`` would
    send its search to native pixels it never learned to read.

    :returns: (the zoom level, each depth's mean score as [figure, tie-break]).
    """
    levels = sorted({int(e["max_zoom"]) for t in tables for e in t}, reverse=True)
    scores: dict[str, list[float]] = {}
    best, best_score = levels[0], None
    for d in levels:
        rows = [next((e for e in t if e["max_zoom"] == d), {"error": "absent"}) for t in tables]
        if any("error" in e for e in rows):
            continue
        mean = tuple(float(np.mean(x)) for x in zip(*(_score(e, objective) for e in rows)))
        scores[str(d)] = [round(x, 4) for x in mean]
        if best_score is None or mean > best_score:
            best, best_score = d, mean
    return best, scores


def _score(entry: dict[str, Any], objective: str) -> tuple[float, float]:
    """What ``objective`` maximises at an entry (nan counts as worst)."""

    def num(key: str, sign: float = 1.0) -> float:
        v = float(entry["at_bias"].get(key, float("nan")))
        return -np.inf if v != v else sign * v

    if objective == "balanced":
        return num("balanced_accuracy"), 0.0
    if objective == "max_false_alarms":
        return num("defect_recall"), num("false_alarm_rate", -1.0)
    return num("false_alarm_rate", -1.0), num("defect_recall")


def store_in_run(run_dir: str | Path, cal: Calibration) -> Path:
    """Write ``operating_point.json`` for the run's model.zip (as calibrate does); in an
    ensemble directory (``train --members``' ``RUN/ensemble``) for its members' files."""
    run_dir = Path(run_dir)
    point = OperatingPoint(
        ok_bias=cal.ok_bias,
        objective=cal.objective,
        target=cal.target,
        model_sha256=model_identity(run_dir),
        frames=cal.frames,
        source=cal.source,
        at_bias=cal.at_bias,
        at_zero=cal.at_zero,
        max_zoom=cal.max_zoom,
        depths=cal.depths,
        confidence=cal.confidence,
    )
    return point.write(run_dir)


def model_identity(run_dir: Path) -> str:
    """The sha256 an operating point of ``run_dir`` is chosen for: its model.zip's, or an
    ensemble directory's :func:`inspector.policy.ensemble.ensemble_sha256` of its members'."""
    from inspector.files import sha256_file
    from inspector.policy.ensemble import ensemble_sha256
    from inspector.train.distill import ensemble_members, is_ensemble_dir

    if is_ensemble_dir(run_dir):
        return ensemble_sha256([sha256_file(m / "model.zip") for m in ensemble_members(run_dir)])
    return sha256_file(run_dir / "model.zip")


def calibrate_run(
    run_dir: str | Path,
    camera: str,
    params: Mapping[str, Any],
    episodes: int,
    objective: str = "balanced",
    target: float | None = None,
    depth: str | int = "full",
    deepest: int | None = None,
    confidence: float | None = None,
) -> Calibration:
    """Choose the run's operating point (and search depth, :func:`choose_operating_point`;
    ``deepest``: the depth it was trained at) on these parts and store it with the run."""
    from inspector.train.torch_policy import load_any_policy

    # The decisions' probabilities are the model's own (the bias moves only verdicts),
    # so an earlier operating point does not move the choice.
    policy = load_any_policy(run_dir)
    cal = choose_operating_point(
        policy, camera, params, episodes, objective, target, depth, deepest, confidence
    )
    store_in_run(run_dir, cal)
    return cal
