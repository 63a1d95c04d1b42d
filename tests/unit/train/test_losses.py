"""The verdict cross-entropy: plain by default, class-balanced and stop-weighted on request."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from torch.nn import functional as F

from inspector.scan import STOP
from inspector.train.losses import balanced_class_weights, verdict_cross_entropy


def test_balanced_weights_make_every_seen_class_count_equally():
    targets = np.array([0] * 8 + [1] * 2 + [-1] * 5)  # -1: unlabelled, ignored
    w = balanced_class_weights(targets, 3)
    # n / (k * count) with n = 10 labelled, k = 2 classes seen; the unseen class gets 1.
    assert w.tolist() == pytest.approx([10 / 16, 10 / 4, 1.0])
    counts = np.bincount(targets[targets >= 0], minlength=3)
    per_class_total = w.numpy()[:2] * counts[:2]
    assert per_class_total[0] == pytest.approx(per_class_total[1])


def test_balanced_weights_without_labels_are_all_one():
    assert balanced_class_weights(np.full(4, -1), 3).tolist() == [1.0, 1.0, 1.0]


def test_unweighted_loss_is_the_plain_mean_cross_entropy():
    gen = th.Generator().manual_seed(0)
    logits = th.randn(32, 3, generator=gen)
    y = th.randint(0, 3, (32,), generator=gen)
    teach = th.randint(0, STOP + 1, (32,), generator=gen)
    plain = F.cross_entropy(logits, y)
    assert verdict_cross_entropy(logits, y).item() == pytest.approx(plain.item(), rel=1e-6)
    # A stop weight of 1 or uniform class weights change nothing.
    ones = th.ones(3)
    assert verdict_cross_entropy(logits, y, ones, teach, 1.0).item() == pytest.approx(
        plain.item(), rel=1e-6
    )


def test_stop_weight_pulls_the_loss_towards_the_stop_rows():
    logits = th.tensor([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0]])  # row 0 right, row 1 wrong
    y = th.tensor([0, 0])
    teach = th.tensor([0, STOP])  # the wrong row is the teacher's stop
    ce = F.cross_entropy(logits, y, reduction="none")
    got = verdict_cross_entropy(logits, y, None, teach, 8.0)
    assert got.item() == pytest.approx(((ce[0] + 8 * ce[1]) / 9).item(), rel=1e-6)
    assert got > verdict_cross_entropy(logits, y)


def test_class_weights_pull_the_loss_towards_the_rare_class():
    logits = th.tensor([[5.0, 0.0], [5.0, 0.0], [5.0, 0.0], [5.0, 0.0]])  # always "ok"
    y = th.tensor([0, 0, 0, 1])
    w = balanced_class_weights(y.numpy(), 2)
    assert verdict_cross_entropy(logits, y, w) > verdict_cross_entropy(logits, y)


def test_stop_weight_must_be_positive():
    with pytest.raises(ValueError, match="stop_weight must be positive"):
        verdict_cross_entropy(th.zeros(1, 3), th.zeros(1, dtype=th.long), stop_weight=0.0)


def test_train_config_passes_the_verdict_options_to_the_model_and_rejects_bad_ones():
    from inspector.train.config import TrainConfig

    with pytest.raises(ValueError, match="verdict_stop_weight must be positive"):
        TrainConfig().replace(verdict_stop_weight=-1.0)
    cfg = TrainConfig().replace(verdict_balance=True, verdict_stop_weight=8.0)
    assert (cfg.verdict_balance, cfg.verdict_stop_weight) == (True, 8.0)
