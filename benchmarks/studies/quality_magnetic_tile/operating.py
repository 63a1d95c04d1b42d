"""The goal's operating point: AUROC and the figures at the val-chosen ok bias."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.quality_magnetic_tile.data import camera_params
from benchmarks.studies.quality_magnetic_tile.settings import GOALS


def val_summary(m: dict[str, Any]) -> dict[str, Any]:
    keys = ("balanced_accuracy", "defect_recall", "false_alarm_rate", "accuracy")
    return {k: m[k] for k in keys}


# -- the goal's operating point -----------------------------------------------------------
def operating_point(
    val: tuple[np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    outcome_matrix: np.ndarray,
    ceiling: float = GOALS["false_alarm_rate"],
    as_run: float = 0.0,
) -> dict[str, Any]:
    """Each split's defect AUROC, and the test figures at the ok bias chosen on val.

    The bias is what ``inspector calibrate --max-false-alarms ceiling --confidence none``
    picks on val (the highest val recall with val false alarms at most ``ceiling``); test
    only reports.

    :param val: (class probabilities [N, C], true class indices [N]); ``test`` likewise.
    :param outcome_matrix: the verdict rule (all zeros: argmax of the probabilities).
    :param as_run: the bias that reproduces the method's own verdicts (tiling: the logit of
        its val threshold); the test figures there go in ``test_as_run``, a check that the
        probabilities are those of the run that produced the saved result.
    """
    from inspector.errors import InspectorError
    from inspector.policy.operating_point import choose_bias, defect_auroc, rates_at

    (pv, yv), (pt, yt) = val, test
    out: dict[str, Any] = {
        "false_alarm_ceiling": ceiling,
        "auroc_val": defect_auroc(pv, yv != 0),
        "auroc_test": defect_auroc(pt, yt != 0),
        "test_as_run": rates_at(pt, yt, outcome_matrix, as_run),
    }
    try:
        bias, at_val = choose_bias(pv, yv, outcome_matrix, "max_false_alarms", ceiling)
    except InspectorError as exc:
        return {**out, "error": str(exc)}
    return {**out, "ok_bias": bias, "val": at_val, "test": rates_at(pt, yt, outcome_matrix, bias)}


def load_agent(model_dir: Path) -> Any:
    """A saved agent run (its model.zip) as a torch policy, as the product loads it."""
    from inspector.train.torch_policy import load_any_policy

    return load_any_policy(model_dir)


def policy_probs(
    policy: Any, root: str | Path, split: str, episodes: int = 100_000
) -> tuple[np.ndarray, np.ndarray, Any]:
    """A loaded policy's class probabilities at each decision on a split: (probs, labels, R)."""
    _, probs, y = policy_pass(policy, root, split, episodes)
    return probs, y, policy.meta.outcome_matrix


def policy_pass(
    policy: Any, root: str | Path, split: str, episodes: int = 100_000
) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """One pass of a loaded policy over a split: ``evaluate()``'s metrics, and the class
    probabilities at each decision with the true class indices (for operating points)."""
    from inspector.train.evaluate import decision_probabilities, metrics, run_parts

    labels, decisions, _ = run_parts(policy, "folder", camera_params(root, split), episodes)
    classes = policy.meta.classes
    probs, y = decision_probabilities(classes, labels, decisions)
    return metrics(classes, classes[0], labels, decisions), probs, y


def policy_test_figures(
    policy: Any, root: str | Path, val_episodes: int = 100_000, test_episodes: int = 100_000
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(test metrics, :func:`operating_point`) of a loaded policy: one val pass, one test
    pass (the metrics and the operating point's test figures come from the same pass)."""
    pv, yv, rule = policy_probs(policy, root, "val", val_episodes)
    test, pt, yt = policy_pass(policy, root, "test", test_episodes)
    return test, operating_point((pv, yv), (pt, yt), rule)


def agent_operating_point(
    model_dir: Path, root: str | Path, val_episodes: int = 100_000, test_episodes: int = 100_000
) -> dict[str, Any]:
    """:func:`operating_point` of a saved agent (one val and one test pass)."""
    return policy_test_figures(load_agent(model_dir), root, val_episodes, test_episodes)[1]
