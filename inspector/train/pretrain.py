"""Behaviour cloning of the scripted teacher before PPO (DAgger's first round).

The known failure mode of this task is a policy that declares from the overview
at step 1: its classifier never sees a native glimpse of a point, so zooming never
pays, so it never zooms. Cloning the teacher first breaks that loop: the policy
starts out scanning like the teacher, and the verdict head has already learned to
judge glimpses at every zoom level. PPO then continues with the KL term on the
student's own states relabelled by the teacher (DAgger-style).

The environment steps spent here count as training steps (``bc_samples``): they are
reported with every learning-efficiency figure.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch as th
from torch.nn import functional as F

from inspector.scan import stop_index
from inspector.train.losses import balanced_class_weights, verdict_cross_entropy

log = logging.getLogger(__name__)


def collect_teacher_samples(
    make_env: Any, n: int, epsilon: float = 0.2, seed: int = 0
) -> dict[str, np.ndarray]:
    """Run the scripted teacher (with epsilon-random moves, to visit off-path states).

    :param make_env: callable returning an InspectionEnv built with ``teacher=True``.
    :param n: number of environment steps (samples) to collect.
    :param epsilon: share of random actions (moves, zooms or jumps; never a stop), whose
        states the teacher still labels.
    :returns: arrays glimpse, overview, state, teacher (move action), verdict (the
        verdict the observations support so far, see ``InspectionEnv.teacher_verdict``),
        label (the part's true class).
    """
    env = make_env()
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {
        k: [] for k in ("glimpse", "overview", "state", "teacher", "verdict", "label")
    }
    obs, info = env.reset(seed=seed)
    nxt, verdict = info["teacher"], info.get("teacher_verdict", info["label"])
    try:
        while len(rows["label"]) < n:
            for k in ("glimpse", "overview", "state"):
                rows[k].append(obs[k])
            rows["teacher"].append(nxt)
            rows["verdict"].append(verdict)
            rows["label"].append(info["label"])
            a = nxt
            if rng.random() < epsilon:
                # A random move, zoom or jump of the profile's table, never a stop (its last).
                a = int(rng.integers(0, len(env.scanner.actions) - 1))
            obs, _, term, trunc, info = env.step([a, max(0, verdict)])
            nxt, verdict = info.get("teacher_next", 0), info.get("teacher_verdict_next", -1)
            if term or trunc:
                obs, info = env.reset()
                nxt, verdict = info["teacher"], info.get("teacher_verdict", info["label"])
    finally:
        env.close()
    return {k: np.asarray(v) for k, v in rows.items()}


def behaviour_clone(
    model: Any,
    data: dict[str, np.ndarray],
    epochs: int = 8,
    lr: float = 1e-3,
    batch: int = 128,
    balance: bool = False,
    stop_weight: float = 1.0,
) -> dict[str, float]:
    """Train the policy's move head on the teacher's actions and its verdict head on the
    teacher's verdicts (``data["verdict"]``; the true labels where there is none).

    :param balance: class-balanced verdict loss (see :mod:`inspector.train.losses`).
    :param stop_weight: weight of the steps where the teacher stops in the verdict loss.
    :returns: final losses and training accuracies; ``bc/stop_verdict_accuracy`` is the
        verdict accuracy on the teacher's stop steps, the only ones where it is read.
    """
    policy = model.policy
    policy.set_training_mode(True)
    opt = th.optim.Adam(policy.parameters(), lr=lr)
    n = len(data["label"])
    tens = {k: th.as_tensor(v) for k, v in data.items()}
    ykey = "verdict" if "verdict" in tens else "label"
    n_classes = int(policy.action_space.nvec[-1])
    stop = stop_index(int(policy.action_space.nvec[0]))
    weights = balanced_class_weights(data[ykey], n_classes) if balance else None
    gen = th.Generator().manual_seed(0)
    stats: dict[str, float] = {}
    for _ in range(epochs):
        perm = th.randperm(n, generator=gen)
        move_acc, verdict_acc, losses = [], [], []
        stop_hits, stops = 0, 0
        for s in range(0, n, batch):
            b = perm[s : s + batch]
            obs = {k: tens[k][b].float() for k in ("glimpse", "overview", "state")}
            dist = policy.get_distribution(obs)
            move_logits = dist.distribution[0].logits
            verdict_logits = dist.distribution[-1].logits
            t = tens["teacher"][b].long()
            y = tens[ykey][b].long()
            vloss = verdict_cross_entropy(verdict_logits, y, weights, t, stop_weight, stop)
            loss = F.cross_entropy(move_logits, t) + vloss
            opt.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            move_acc.append((move_logits.argmax(1) == t).float().mean().item())
            verdict_acc.append((verdict_logits.argmax(1) == y).float().mean().item())
            at_stop = t == stop
            stops += int(at_stop.sum())
            stop_hits += int((verdict_logits.argmax(1)[at_stop] == y[at_stop]).sum())
        stats = {
            "bc/loss": float(np.mean(losses)),
            "bc/move_accuracy": float(np.mean(move_acc)),
            "bc/verdict_accuracy": float(np.mean(verdict_acc)),
            "bc/stop_verdict_accuracy": stop_hits / stops if stops else float("nan"),
        }
    policy.set_training_mode(False)
    log.info("behaviour cloning: %s", stats)
    return stats
