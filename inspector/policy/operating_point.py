"""The operating point: how readily a model calls a part defective.

A trained model's verdict comes from its class probabilities through the profile's
outcome values (:func:`inspector.policy.base.decide_verdict`). Training with a
class-balanced verdict loss makes those probabilities as if every class were equally
common, so on a line where most parts are good the false-alarm rate can be higher than
the station can live with. The operating point is one number, ``ok_bias``: the log-odds
added to the ok class before the decision (``+1`` makes ok ``e`` times likelier).
``inspector calibrate`` chooses it on labelled footage (the validation split, never the
test split) for one of three objectives and stores it with the model:

* ``balanced``: the best balanced accuracy (ties: the bias closest to 0);
* ``max_false_alarms``: the most sensitive bias whose false-alarm rate is at most the
  target (the highest defect recall such a bias gives);
* ``min_recall``: the least sensitive bias whose defect recall is at least the target
  (the fewest false alarms such a bias gives).

With the bias, calibration may choose a search depth (``max_zoom``: the deepest zoom
level the agent looks at, :func:`inspector.train.calibration.choose_operating_point`);
it is stored and carried the same way (``inspector.max_zoom``).

A run directory keeps it in ``operating_point.json`` beside ``model.zip`` (with the
model's sha256: a model retrained in place drops a stale one with a warning); export
copies it into the ONNX metadata (``inspector.ok_bias``) and from there into TensorRT
sidecars, so a station runs the model at the point it was calibrated for.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import InspectorError, ModelError
from inspector.files import write_atomic

log = logging.getLogger(__name__)

FILE = "operating_point.json"
OBJECTIVES = ("balanced", "max_false_alarms", "min_recall")
#: The biases searched: wide enough to reach every verdict, fine enough that val frames
#: rarely fall between two steps.
GRID = np.round(np.arange(-20.0, 20.0 + 1e-9, 0.05), 2)


def shift_ok(probs: np.ndarray, ok_bias: float, ok: int = 0) -> np.ndarray:
    """Class probabilities with ``ok_bias`` added to the ok class's log-odds.

    Works on one vector or a batch (last axis: classes); rows stay normalised, and a
    zero probability stays zero.
    """
    p = np.asarray(probs, dtype=np.float64)
    if not ok_bias:
        return p
    scale = np.exp(float(ok_bias))
    q = p.copy()
    q[..., ok] = p[..., ok] * scale
    return q / q.sum(axis=-1, keepdims=True)


def defect_auroc(probs: np.ndarray, is_defect: Sequence[bool], ok: int = 0) -> float | None:
    """Area under the ROC curve of the defect score ``1 - p(ok)`` (ties count half).

    Threshold-free: the chance that a defective part scores above a good one.
    ``None`` without both kinds of part.
    """
    s = 1.0 - np.asarray(probs, dtype=np.float64)[:, ok]
    y = np.asarray(is_defect, dtype=bool)
    pos, neg = s[y], s[~y]
    if not len(pos) or not len(neg):
        return None
    # Mann-Whitney U through average ranks (tied scores share the mean of their ranks).
    _, inv, counts = np.unique(np.concatenate([pos, neg]), return_inverse=True, return_counts=True)
    last = np.cumsum(counts)
    r = (last - (counts - 1) / 2.0)[inv]
    u = r[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2.0
    return float(u / (len(pos) * len(neg)))


def verdicts_at(probs: np.ndarray, outcome_matrix: np.ndarray, biases: np.ndarray) -> np.ndarray:
    """Verdict indices [B, N] for every bias in ``biases`` (the profile's decision rule)."""
    p = np.asarray(probs, dtype=np.float64)
    m = np.asarray(outcome_matrix, dtype=np.float64)
    out = np.empty((len(biases), len(p)), dtype=np.int64)
    for k, b in enumerate(biases):
        q = shift_ok(p, float(b))
        # decide_verdict's rule, for all parts at once.
        out[k] = np.argmax(q @ m.T if np.any(m) else q, axis=1)
    return out


def rates(verdicts: np.ndarray, labels: np.ndarray, n_classes: int, ok: int = 0) -> dict:
    """Balanced accuracy, defect recall and false-alarm rate of each row of ``verdicts``.

    :param verdicts: [B, N] verdict indices; ``labels``: [N] true class indices.
    :returns: arrays of length B (``nan`` where a rate has no parts).
    """
    v = np.asarray(verdicts)
    y = np.asarray(labels)
    present = [c for c in range(n_classes) if (y == c).any()]
    per_class = np.stack([(v[:, y == c] == c).mean(axis=1) for c in present], axis=1)
    defect, good = y != ok, y == ok
    recall = (v[:, defect] != ok).mean(axis=1) if defect.any() else np.full(len(v), np.nan)
    fa = (v[:, good] != ok).mean(axis=1) if good.any() else np.full(len(v), np.nan)
    balanced = per_class.mean(axis=1)
    return {"balanced_accuracy": balanced, "defect_recall": recall, "false_alarm_rate": fa}


def rates_at(
    probs: np.ndarray, labels: np.ndarray, outcome_matrix: np.ndarray, ok_bias: float
) -> dict[str, float]:
    """:func:`rates` of the verdicts at one ok bias."""
    v = verdicts_at(probs, outcome_matrix, np.array([ok_bias]))
    return {k: float(x[0]) for k, x in rates(v, labels, np.shape(probs)[1]).items()}


def choose_bias(
    probs: np.ndarray,
    labels: Sequence[int],
    outcome_matrix: np.ndarray,
    objective: str = "balanced",
    target: float | None = None,
    ok: int = 0,
) -> tuple[float, dict[str, float]]:
    """The ok bias that best meets ``objective`` on these parts, and its rates there.

    :param probs: [N, C] class probabilities at each part's decision.
    :param labels: [N] true class indices.
    :param objective: one of :data:`OBJECTIVES`.
    :param target: the false-alarm ceiling or recall floor (0..1) of the constrained ones.
    :raises InspectorError: an unknown objective, a missing/odd target, no parts of the
        kind the objective needs, or a target no bias reaches on these parts.
    """
    if objective not in OBJECTIVES:
        raise InspectorError(f"unknown objective {objective!r}; expected {', '.join(OBJECTIVES)}")
    constrained = objective != "balanced"
    if constrained and (target is None or not 0.0 <= target <= 1.0):
        raise InspectorError(f"objective {objective} needs a target between 0 and 1")
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim != 2 or len(p) != len(y) or not len(y):
        raise InspectorError("calibration needs one probability row per labelled part")
    if objective == "max_false_alarms" and not (y == ok).any():
        raise InspectorError("no good parts among the calibration frames: no false-alarm rate")
    if objective == "min_recall" and not (y != ok).any():
        raise InspectorError("no defective parts among the calibration frames: no recall")
    r = rates(verdicts_at(p, outcome_matrix, GRID), y, p.shape[1], ok)
    if objective == "balanced":
        score = r["balanced_accuracy"]
        best = np.flatnonzero(score == score.max())
        k = int(best[np.argmin(np.abs(GRID[best]))])
    elif objective == "max_false_alarms":
        feasible = np.flatnonzero(r["false_alarm_rate"] <= target + 1e-12)
        if not len(feasible):
            raise InspectorError(
                f"no ok bias up to {GRID[-1]:g} keeps false alarms at or below {target:g}"
            )
        # The most sensitive feasible bias; among equal recalls the one closest to 0.
        rec = r["defect_recall"][feasible]
        cands = feasible[rec == rec.max()] if not np.isnan(rec).all() else feasible
        k = int(cands[np.argmin(np.abs(GRID[cands]))])
    else:
        feasible = np.flatnonzero(r["defect_recall"] >= target - 1e-12)
        if not len(feasible):
            raise InspectorError(f"no ok bias down to {GRID[0]:g} reaches defect recall {target:g}")
        fa = r["false_alarm_rate"][feasible]
        cands = feasible[fa == fa.min()] if not np.isnan(fa).all() else feasible
        k = int(cands[np.argmin(np.abs(GRID[cands]))])
    return float(GRID[k]), {name: float(v[k]) for name, v in r.items()}


@dataclass(frozen=True)
class OperatingPoint:
    """A calibrated operating point, as stored in ``operating_point.json``.

    :param ok_bias: log-odds added to the ok class before the verdict.
    :param objective: how it was chosen (:data:`OBJECTIVES`).
    :param target: the objective's target (``None`` for ``balanced``).
    :param model_sha256: the model it was calibrated for.
    :param frames: how many labelled parts it was chosen on.
    :param source: where those parts came from (camera and parameters, in words).
    :param at_bias: balanced accuracy, defect recall and false alarms there.
    :param at_zero: the same at ``ok_bias`` 0, for comparison.
    :param max_zoom: the search depth chosen with it (the deepest zoom level the search
        may look at; None: every level, as trained).
    :param depths: each search depth tried, with its bias and rates there (empty: only
        the model's full search was tried).
    """

    ok_bias: float
    objective: str
    target: float | None
    model_sha256: str
    frames: int
    source: str
    at_bias: dict[str, float] = field(default_factory=dict)
    at_zero: dict[str, float] = field(default_factory=dict)
    created_at: str = ""
    max_zoom: int | None = None
    depths: list[dict[str, Any]] = field(default_factory=list)

    def write(self, run_dir: str | Path) -> Path:
        """Write ``operating_point.json`` into ``run_dir`` (atomically)."""
        path = Path(run_dir) / FILE
        doc = asdict(self)
        doc["created_at"] = doc["created_at"] or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return write_atomic(path, json.dumps(doc, indent=1) + "\n")


def read_ok_bias(model_path: str | Path, model_sha256: str) -> float:
    """The calibrated ok bias of a run directory (or its ``model.zip``); 0 without one
    (:func:`read_calibrated`)."""
    return read_calibrated(model_path, model_sha256)["ok_bias"]


def read_calibrated(model_path: str | Path, model_sha256: str) -> dict[str, Any]:
    """What calibration set for a run directory (or its ``model.zip``): ``ok_bias`` (0
    without a calibration) and ``max_zoom`` (the search depth, None: every level), as
    :class:`inspector.policy.base.ModelMeta` takes them.

    A calibration made for another model file (the run was trained on since) is
    ignored with a warning: calibrate again.

    :raises ModelError: the file is there but unreadable.
    """
    p = Path(model_path)
    path = (p if p.is_dir() else p.parent) / FILE
    none: dict[str, Any] = {"ok_bias": 0.0, "max_zoom": None}
    if not path.is_file():
        return none
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
        bias = float(doc["ok_bias"])
        depth = doc.get("max_zoom")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(
            f"{path}: broken operating point ({exc}); delete it or calibrate again"
        ) from None
    if not np.isfinite(bias):
        raise ModelError(f"{path}: ok_bias must be a finite number, got {bias}")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ModelError(f"{path}: max_zoom must be a zoom level (0, 1, ...) or null: {depth!r}")
    if doc.get("model_sha256") and model_sha256 and doc["model_sha256"] != model_sha256:
        log.warning(
            "%s was calibrated for another model file (sha256 %s...); ignoring it: "
            "run inspector calibrate again",
            path,
            str(doc["model_sha256"])[:12],
        )
        return none
    return {"ok_bias": bias, "max_zoom": depth}
