"""The verdict cross-entropy shared by behaviour cloning and the hybrid loss.

The verdict head is trained at every step ("if I stopped now, what would it be"),
but the verdict targets are far from balanced: with the scripted teacher a part's
target is ``ok`` until its defect is in sight, so on the synthetic panels a point is
the target of about 5 % of the steps although a third of the parts have one, and the
head learns to answer ``ok`` (measured: point recall 0.00 after cloning). Two
optional corrections:

* class balancing: each target class weighs ``n / (k * count)`` (the classes then
  count equally, whatever their share of the steps);
* stop weighting: the steps where the teacher stops, the only ones where the verdict
  is read, weigh ``stop_weight`` times more.

Both are off (plain mean cross-entropy) unless asked for.
"""

from __future__ import annotations

import numpy as np
import torch as th
from torch.nn import functional as F

from inspector.scan import STOP


def balanced_class_weights(targets: np.ndarray, n_classes: int) -> th.Tensor:
    """``n / (k * count_c)`` per class over the labelled (``>= 0``) targets.

    A class without any target gets weight 1 (it never occurs in the loss anyway).
    """
    t = np.asarray(targets).reshape(-1)
    t = t[t >= 0]
    counts = np.bincount(t, minlength=n_classes).astype(np.float64)[:n_classes]
    w = np.ones(n_classes)
    seen = counts > 0
    if seen.any():
        w[seen] = len(t) / (int(seen.sum()) * counts[seen])
    return th.as_tensor(w, dtype=th.float32)


def verdict_cross_entropy(
    logits: th.Tensor,
    targets: th.Tensor,
    class_weights: th.Tensor | None = None,
    teacher_actions: th.Tensor | None = None,
    stop_weight: float = 1.0,
    stop_action: int = STOP,
) -> th.Tensor:
    """Weighted mean cross-entropy of the verdict logits (all targets valid, ``>= 0``).

    :param class_weights: per-class weights (:func:`balanced_class_weights`) or None.
    :param teacher_actions: the teacher's move action per row (-1 unknown) for the
        stop weighting, or None.
    :param stop_weight: weight of the rows where the teacher stops (1 = none).
    :param stop_action: the stop action's index in the model's action table (its last).
    """
    if stop_weight <= 0:
        raise ValueError(f"stop_weight must be positive, got {stop_weight}")
    ce = F.cross_entropy(logits, targets, reduction="none")
    w = th.ones_like(ce)
    if class_weights is not None:
        w = w * class_weights.to(ce.device)[targets]
    if teacher_actions is not None and stop_weight != 1.0:
        w = w * th.where(teacher_actions == stop_action, float(stop_weight), 1.0)
    return (ce * w).sum() / w.sum()
