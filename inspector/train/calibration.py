"""Choose and store a model's operating point: what ``inspector calibrate`` does and
what ``train`` does as its last step (on the val frames)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.policy.base import Policy
from inspector.policy.operating_point import OperatingPoint, choose_bias, rates_at


@dataclass
class Calibration:
    """An ok bias chosen on labelled parts.

    :param ok_bias: the chosen bias; ``objective``/``target`` how it was chosen.
    :param frames: how many parts; ``source`` where they came from, in words.
    :param at_bias: balanced accuracy, defect recall and false alarms at the bias.
    :param at_zero: the same at bias 0 (as trained).
    """

    ok_bias: float
    objective: str
    target: float | None
    frames: int
    source: str
    at_bias: dict[str, float]
    at_zero: dict[str, float]


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
) -> Calibration:
    """Run ``policy`` once on ``episodes`` labelled parts and choose its ok bias.

    ``episodes`` None: every frame of a finite source, once (100 synthetic panels).

    :raises InspectorError: the model has no ok class (classification only).
    """
    from inspector.train.evaluate import part_probabilities

    meta = policy.meta
    if meta.classification_only:
        raise InspectorError(
            f"calibrate: the model has no ok class (its profile says 'ok_class: none'), so "
            f"there is no ok-vs-defect operating point to choose; it declares the likeliest "
            f"of {', '.join(meta.classes)}. Judge it by accuracy and per-class recall "
            "('inspector eval' on the held-out frames)"
        )
    probs, y = part_probabilities(policy, camera, params, episodes)
    bias, at_bias = choose_bias(probs, y, meta.outcome_matrix, objective, target)
    at_zero = rates_at(probs, y, meta.outcome_matrix, 0.0)
    return Calibration(
        ok_bias=bias,
        objective=objective,
        target=target,
        frames=len(y),
        source=source_words(camera, params),
        at_bias=at_bias,
        at_zero=at_zero,
    )


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
) -> Calibration:
    """Choose the run's operating point on these parts and store it with the run."""
    from inspector.train.torch_policy import load_any_policy

    # The decisions' probabilities are the model's own (the bias moves only verdicts),
    # so an earlier operating point does not move the choice.
    policy = load_any_policy(run_dir)
    cal = choose_operating_point(policy, camera, params, episodes, objective, target)
    store_in_run(run_dir, cal)
    return cal
