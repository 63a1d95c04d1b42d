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

A rate measured on a few dozen labelled parts is itself uncertain: a bias with 4 false
alarms in 90 good val parts (4.4 %) raises more than 5 % on the next 202 good parts one
time in three (33-49 %, for scores exchangeable between the val parts and new ones; 2 %
with 1 false alarm in 90). With a ``confidence`` (``calibrate`` and ``train``: 0.8,
:data:`DEFAULT_CONFIDENCE`, four times in five) the constrained objectives hold the
rate's one-sided Clopper-Pearson bound (:func:`upper_bound`), not the rate seen, to the
target: the false-alarm rate is at most the ceiling, or the recall at least the floor,
with that confidence, on parts like these. Fewer labelled parts need a wider margin;
too few for the target at all is an error that says how many it needs.

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
import math
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
#: The confidence at which ``calibrate`` and ``train`` hold a false-alarm ceiling or a
#: recall floor unless told otherwise (docs/benchmarks.md, operating_margin: on the
#: magnetic tiles it cut the share of re-splits whose new parts broke a 5 % ceiling from
#: 34 % to 13 % and kept the share that met #26's whole goal; 0.9 cost recall).
DEFAULT_CONFIDENCE = 0.8
#: The biases searched: wide enough to reach every verdict, fine enough that val frames
#: rarely fall between two steps.
GRID = np.round(np.arange(-20.0, 20.0 + 1e-9, 0.05), 2)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (exact for any n)."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    i = np.arange(k + 1, dtype=np.float64)
    lg = np.vectorize(math.lgamma)
    logpmf = (
        lg(n + 1.0) - lg(i + 1.0) - lg(n - i + 1.0) + i * math.log(p) + (n - i) * math.log1p(-p)
    )
    top = float(logpmf.max())
    return float(min(1.0, math.exp(top) * np.exp(logpmf - top).sum()))


def upper_bound(k: int, n: int, confidence: float) -> float:
    """The one-sided Clopper-Pearson upper bound on a rate seen ``k`` times in ``n``.

    The rate ``p`` for which seeing ``k`` or fewer events in ``n`` has chance
    ``1 - confidence``: with that confidence the true rate is at most this. ``k = 0``
    gives ``1 - (1 - confidence) ** (1 / n)`` (the "rule of three" at 95 %); ``n = 0``
    gives 1 (nothing seen, nothing known).

    :raises InspectorError: ``confidence`` not strictly between 0 and 1, or ``k``
        outside ``0..n``.
    """
    check_confidence(confidence)
    if not 0 <= k <= n:
        raise InspectorError(f"a rate of {k} in {n} parts is not a rate")
    if k >= n:
        return 1.0
    lo, hi, alpha = k / n, 1.0, 1.0 - confidence
    for _ in range(60):  # bisection: the CDF falls as p rises
        mid = 0.5 * (lo + hi)
        if binomial_cdf(k, n, mid) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


def holds(k: int, n: int, ceiling: float, confidence: float | None) -> bool:
    """Whether a rate seen ``k`` times in ``n`` is at most ``ceiling``: the rate itself
    (``confidence`` None), else its :func:`upper_bound` at that confidence."""
    if n == 0:
        return False
    if confidence is None:
        return k / n <= ceiling + 1e-12
    if k >= n:
        return ceiling >= 1.0
    # upper_bound(k, n, c) <= ceiling  <=>  P(X <= k | n, ceiling) <= 1 - c (no bisection)
    return binomial_cdf(k, n, ceiling) <= 1.0 - confidence + 1e-12


def parts_needed(ceiling: float, confidence: float) -> int | None:
    """The fewest parts in which a rate seen 0 times has its bound at ``ceiling`` or
    below (None: no count does, a ceiling of 0)."""
    if ceiling <= 0.0:
        return None
    if ceiling >= 1.0:
        return 1
    return int(math.ceil(math.log(1.0 - confidence) / math.log1p(-ceiling) - 1e-9))


def check_confidence(confidence: float | None) -> None:
    """:raises InspectorError: a confidence that is not None and not strictly in (0, 1)."""
    if confidence is None:
        return
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise InspectorError(f"confidence must be a number between 0 and 1, got {confidence!r}")
    if not 0.0 < float(confidence) < 1.0 or confidence != confidence:
        raise InspectorError(
            f"confidence must be strictly between 0 and 1 (e.g. 0.9), got {confidence!r}"
        )


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
    confidence: float | None = None,
) -> tuple[float, dict[str, float]]:
    """The ok bias that best meets ``objective`` on these parts, and its rates there.

    :param probs: [N, C] class probabilities at each part's decision.
    :param labels: [N] true class indices.
    :param objective: one of :data:`OBJECTIVES`.
    :param target: the false-alarm ceiling or recall floor (0..1) of the constrained ones.
    :param confidence: with a constrained objective, hold the rate's one-sided bound at
        this confidence to the target instead of the rate seen (:func:`holds`); None:
        the rate seen.
    :raises InspectorError: an unknown objective, a missing/odd target, no parts of the
        kind the objective needs, a confidence with ``balanced`` or outside (0, 1), too
        few parts for the target at that confidence, or a target no bias reaches.
    """
    if objective not in OBJECTIVES:
        raise InspectorError(f"unknown objective {objective!r}; expected {', '.join(OBJECTIVES)}")
    constrained = objective != "balanced"
    if constrained and (target is None or not 0.0 <= target <= 1.0):
        raise InspectorError(f"objective {objective} needs a target between 0 and 1")
    check_confidence(confidence)
    if confidence is not None and not constrained:
        raise InspectorError(
            "a confidence goes with a false-alarm ceiling or a recall floor, not with balanced"
        )
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim != 2 or len(p) != len(y) or not len(y):
        raise InspectorError("calibration needs one probability row per labelled part")
    if objective == "max_false_alarms" and not (y == ok).any():
        raise InspectorError("no good parts among the calibration frames: no false-alarm rate")
    if objective == "min_recall" and not (y != ok).any():
        raise InspectorError("no defective parts among the calibration frames: no recall")
    verdicts = verdicts_at(p, outcome_matrix, GRID)
    r = rates(verdicts, y, p.shape[1], ok)
    if constrained:
        _enough_parts(objective, target, confidence, int((y == ok).sum()), int((y != ok).sum()))
    if objective == "balanced":
        score = r["balanced_accuracy"]
        best = np.flatnonzero(score == score.max())
        k = int(best[np.argmin(np.abs(GRID[best]))])
    elif objective == "max_false_alarms":
        good = y == ok
        alarms = (verdicts[:, good] != ok).sum(axis=1)
        n = int(good.sum())
        ok_at = {int(a): holds(int(a), n, target, confidence) for a in np.unique(alarms)}
        feasible = np.flatnonzero([ok_at[int(a)] for a in alarms])
        if not len(feasible):
            raise InspectorError(
                f"no ok bias up to {GRID[-1]:g} keeps false alarms at or below {target:g}"
            )
        # The most sensitive feasible bias; among equal recalls the one closest to 0.
        rec = r["defect_recall"][feasible]
        cands = feasible[rec == rec.max()] if not np.isnan(rec).all() else feasible
        k = int(cands[np.argmin(np.abs(GRID[cands]))])
    else:
        defect = y != ok
        misses = (verdicts[:, defect] == ok).sum(axis=1)
        n = int(defect.sum())
        # recall >= floor  <=>  miss rate <= 1 - floor (the bound of the misses)
        ok_at = {int(m): holds(int(m), n, 1.0 - target, confidence) for m in np.unique(misses)}
        feasible = np.flatnonzero([ok_at[int(m)] for m in misses])
        if not len(feasible):
            raise InspectorError(f"no ok bias down to {GRID[0]:g} reaches defect recall {target:g}")
        fa = r["false_alarm_rate"][feasible]
        cands = feasible[fa == fa.min()] if not np.isnan(fa).all() else feasible
        k = int(cands[np.argmin(np.abs(GRID[cands]))])
    return float(GRID[k]), {name: float(v[k]) for name, v in r.items()}


def _enough_parts(
    objective: str, target: float, confidence: float | None, good: int, defective: int
) -> None:
    """:raises InspectorError: too few parts of the kind ``objective`` counts for its
    target to hold at ``confidence`` even with no false alarm (no miss) among them."""
    if confidence is None:
        return
    ceiling, n, kind = (
        (target, good, "good")
        if objective == "max_false_alarms"
        else (1 - target, defective, "defective")
    )
    if holds(0, n, ceiling, confidence):
        return
    need = parts_needed(ceiling, confidence)
    what = (
        f"false alarms <= {target:g}"
        if objective == "max_false_alarms"
        else f"recall >= {target:g}"
    )
    raise InspectorError(
        f"{n} {kind} part{'' if n == 1 else 's'} cannot show {what} at {confidence:g} "
        "confidence, even with "
        + ("no false alarm" if objective == "max_false_alarms" else "no miss")
        + (
            f": that needs at least {need} {kind} parts; calibrate on more labelled parts, "
            "or lower the confidence (--confidence 0.5, or --confidence none: the rate these "
            "parts show)"
            if need is not None
            else ": no number of parts can; loosen the target"
        )
    )


def bound_words(
    at: dict[str, float], objective: str, confidence: float | None, good: int, defective: int
) -> str:
    """`` (false alarms <= 0.043 at 90 % confidence, 90 good parts)``: the bound a
    constrained choice held to its target, for calibrate's and train's lines; empty
    without a confidence."""
    if confidence is None or objective not in ("max_false_alarms", "min_recall"):
        return ""
    if objective == "max_false_alarms":
        rate, n = at.get("false_alarm_rate", float("nan")), good
        if rate != rate or not n:
            return ""
        b = upper_bound(int(round(rate * n)), n, confidence)
        return f" (false alarms <= {b:.3f} at {confidence * 100:g} % confidence, {n} good parts)"
    rate, n = at.get("defect_recall", float("nan")), defective
    if rate != rate or not n:
        return ""
    b = 1.0 - upper_bound(int(round((1.0 - rate) * n)), n, confidence)
    return f" (defect recall >= {b:.3f} at {confidence * 100:g} % confidence, {n} defective parts)"


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
    :param confidence: the confidence at which the target held (None: the rate seen on
        the frames was held to it).
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
    confidence: float | None = None

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
