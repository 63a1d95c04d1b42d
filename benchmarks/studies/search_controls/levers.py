"""The engineer's levers: the step cost (retrained) and the outcome values (not retrained).

Outcome values: the verdict on ``stop`` is the class with the highest expected outcome
reward under the profile's outcome matrix (:func:`~inspector.policy.base.decide_verdict`),
so changing a false-alarm cost changes the verdicts of a trained agent at once, on the
same search and the same class probabilities. :func:`outcome_value_rows` re-decides one
agent's test parts under each false-alarm cost and scores the verdicts under that cost,
beside the verdicts the as-trained profile gives (a rule that reads the probabilities
well earns more under the new costs than the old verdicts do).
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: False-alarm costs of the outcome-values lever (lcd_panel.yaml has -0.8).
FALSE_ALARM_COSTS = (-0.2, -0.4, -0.8, -1.2, -1.6)
AS_TRAINED = -0.8


def outcome_matrix(profile, false_alarm: float) -> np.ndarray:
    """R[c, y] of ``profile`` with the ``false_alarm`` term's value replaced."""
    terms = tuple(
        dataclasses.replace(t, reward=float(false_alarm)) if t.term == "false_alarm" else t
        for t in profile.terms
    )
    return dataclasses.replace(profile, terms=terms).outcome_matrix()


def outcome_value_rows(profile, probs: np.ndarray, labels: np.ndarray) -> list[dict]:
    """One row per false-alarm cost: the verdicts re-decided from the same probabilities.

    :param probs: [N, C] class probabilities at each part's decision (one trained agent).
    :param labels: [N] true class indices (0: ok).
    """
    from inspector.policy.operating_point import verdicts_at

    zero = np.array([0.0])
    base = verdicts_at(probs, outcome_matrix(profile, AS_TRAINED), zero)[0]
    ok, defect = labels == 0, labels != 0
    rows = []
    for cost in FALSE_ALARM_COSTS:
        m = outcome_matrix(profile, cost)
        v = verdicts_at(probs, m, zero)[0]
        rows.append(
            {
                "false_alarm_cost": cost,
                "false_alarms": float((v[ok] != 0).mean()),
                "recall": float((v[defect] != 0).mean()),
                "recall_by_class": {
                    int(c): float((v[labels == c] != 0).mean()) for c in np.unique(labels[defect])
                },
                "accuracy": float((v == labels).mean()),
                "reward": float(m[v, labels].mean()),
                "reward_as_trained_verdicts": float(m[base, labels].mean()),
            }
        )
    return rows


def monotone(values: list[float], increasing: bool) -> bool:
    """True when ``values`` never move against the expected direction."""
    d = np.diff(np.asarray(values, dtype=float))
    return bool(np.all(d >= -1e-12) if increasing else np.all(d <= 1e-12))
