"""Supervised distillation of a verdict ensemble into one student, DAgger style.

What ``train --members`` does to its student by default (``distill: supervised``). The
PPO distillation (``distill: ppo``) trains the student with the hybrid loss whose KL term
has the ensemble as teacher; on the magnetic tiles its student kept the lead's moves but
not the ensemble's judgement (docs/benchmarks.md, members_cost): on the student's own
glimpses the ensemble's verdict ranks the val tiles far better (AUROC 0.966) than the
student's (0.902), so the loss is in the verdict head, and PPO's reward and label terms
(and their cost: 84-96 % of the CPU) pull it elsewhere.

Here the student learns the teacher's distributions directly, on the states it visits:

1. roll the student out (its sampled actions, as PPO would) on the training frames for
   a round's share of the steps, keeping each observation;
2. the teacher judges every kept observation once: the lead's move distribution and the
   members' joint verdict (:class:`inspector.train.distill.EnsembleTeacher`);
3. minimise ``T^2 KL(teacher_T || student_T)`` of the verdict (``T`` the temperature:
   softened distributions carry how sure the teacher is, not only its choice) plus
   ``w_moves * KL`` of the moves, on minibatches drawn from every round's observations
   so far (the aggregate, as DAgger does);
4. checkpoint and check the student on the val frames (the run keeps the best), next round.

No reward, no critic, no labels: the teacher is the only target, so its knowledge of the
frames it was never trained on (its members' disagreement) is what the student learns.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th

log = logging.getLogger(__name__)

#: Observations kept at most (the oldest rounds' go first): ~5 KB each on the tiles.
MAX_KEPT = 200_000
#: Observations the teacher judges at once.
CHUNK = 512


@dataclass
class DistillSettings:
    """How the supervised distillation runs (TrainConfig's ``distill_*`` fields).

    :param steps: environment steps in all (each a kept observation).
    :param rounds: roll-out rounds (a checkpoint and a val check after each).
    :param passes: minibatch samples per round, in multiples of the round's steps.
    :param batch: minibatch size.
    :param lr: Adam's learning rate.
    :param temperature: of the verdict's KL (1: the distributions as they are).
    :param w_moves: weight of the moves' KL (0: the moves learn nothing).
    :param flips: also keep each observation's glimpses and overview flipped left-right,
        upside-down and both (the state as it is), each judged by the teacher: four
        times the inputs on which the student learns its teacher's judgement, from the
        same frames.
    :param mixup: function matching (0: off): each minibatch's glimpses and overviews
        mixed with another row's, ``lam * a + (1 - lam) * b`` with ``lam ~ Beta(mixup,
        mixup)`` per row (the state of ``a`` kept), and the teacher judges the mixed
        inputs as the student sees them. The student then learns the teacher's function
        between the training frames too, where its members disagree and their doubt is
        information; on the frames themselves they are as sure as their training made
        them. Costs the teacher's pass on every minibatch.
    """

    steps: int
    rounds: int = 12
    passes: float = 4.0
    batch: int = 256
    lr: float = 3e-4
    temperature: float = 1.0
    w_moves: float = 1.0
    flips: bool = False
    mixup: float = 0.0

    def round_steps(self, n_envs: int) -> int:
        """Steps per round: a whole number of vector-env steps."""
        per = math.ceil(self.steps / max(1, self.rounds))
        return max(n_envs, per - per % n_envs)


def _obs_tensor(obs: Mapping[str, np.ndarray]) -> dict[str, th.Tensor]:
    return {k: th.as_tensor(np.asarray(v)).float() for k, v in obs.items()}


def collect(model: Any, env: Any, steps: int, obs: Any) -> tuple[dict[str, np.ndarray], Any]:
    """Roll the student out for ``steps`` environment steps (its sampled actions).

    :returns: the observations it saw ({key: [N, ...]}) and the env's next observation.
    """
    kept: dict[str, list[np.ndarray]] = {k: [] for k in obs}
    model.policy.set_training_mode(False)
    for _ in range(max(1, steps // env.num_envs)):
        for k, v in obs.items():
            kept[k].append(np.array(v, copy=True))
        with th.no_grad():
            actions, _, _ = model.policy(_obs_tensor(obs), deterministic=False)
        obs, _, _, _ = env.step(actions.cpu().numpy())
    return {k: np.concatenate(v) for k, v in kept.items()}, obs


def flipped(obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``obs`` and its images flipped left-right, upside-down and both (4x the rows)."""
    out: dict[str, list[np.ndarray]] = {k: [] for k in obs}
    for k in range(4):
        for key, v in obs.items():
            if key == "state":
                out[key].append(v)
                continue
            v = v[..., ::-1] if k & 1 else v
            out[key].append(np.ascontiguousarray(v[..., ::-1, :] if k & 2 else v))
    return {k: np.concatenate(v) for k, v in out.items()}


def teacher_targets(teacher: Any, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The teacher's log-probabilities of moves and verdict on every observation."""
    moves, verdict = [], []
    n = len(next(iter(obs.values())))
    for s in range(0, n, CHUNK):
        part = _obs_tensor({k: v[s : s + CHUNK] for k, v in obs.items()})
        cats = teacher.get_distribution(part).distribution
        moves.append(th.log_softmax(cats[0].logits, -1).numpy())
        verdict.append(th.log_softmax(cats[-1].logits, -1).numpy())
    return {"t_moves": np.concatenate(moves), "t_verdict": np.concatenate(verdict)}


def kl_loss(t_logp: th.Tensor, s_logits: th.Tensor, temperature: float = 1.0) -> th.Tensor:
    """``T^2 KL(softmax(t/T) || softmax(s/T))``, the mean over the batch.

    :param t_logp: the teacher's log-probabilities; ``s_logits`` the student's logits.
    """
    t = th.log_softmax(t_logp / temperature, -1)
    s = th.log_softmax(s_logits / temperature, -1)
    return (t.exp() * (t - s)).sum(-1).mean() * temperature**2


class Aggregate:
    """Every round's observations and the teacher's targets on them (bounded)."""

    def __init__(self) -> None:
        self.parts: list[dict[str, np.ndarray]] = []

    def add(self, part: dict[str, np.ndarray]) -> None:
        self.parts.append(part)
        while len(self.parts) > 1 and len(self) > MAX_KEPT:
            self.parts.pop(0)

    def __len__(self) -> int:
        return sum(len(p["t_verdict"]) for p in self.parts)

    def sample(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """``n`` rows drawn uniformly (with replacement) from every round kept."""
        first = self.parts[0]
        starts = np.cumsum([0] + [len(p["t_verdict"]) for p in self.parts])
        idx = rng.integers(0, starts[-1], n)
        out = {k: np.empty((n, *v.shape[1:]), v.dtype) for k, v in first.items()}
        for j, part in enumerate(self.parts):  # no copy of the whole aggregate
            rows = (idx >= starts[j]) & (idx < starts[j + 1])
            for k in out:
                out[k][rows] = part[k][idx[rows] - starts[j]]
        return out


def mixed(
    obs: Mapping[str, th.Tensor], alpha: float, rng: np.random.Generator
) -> dict[str, th.Tensor]:
    """``obs`` with each row's images mixed with another row's (see ``mixup``)."""
    n = len(obs["state"])
    lam = th.as_tensor(rng.beta(alpha, alpha, n), dtype=th.float32)
    other = th.as_tensor(rng.permutation(n))
    out = dict(obs)
    for key in ("glimpse", "overview"):
        w = lam.view(-1, *([1] * (obs[key].dim() - 1)))
        out[key] = w * obs[key] + (1 - w) * obs[key][other]
    return out


def train_round(
    model: Any,
    data: Aggregate,
    samples: int,
    s: DistillSettings,
    rng: np.random.Generator,
    teacher: Any = None,
) -> dict[str, float]:
    """Minibatch updates of the student on ``samples`` draws from the aggregate
    (``teacher``: judges each minibatch again, needed with ``s.mixup``)."""
    if s.mixup and teacher is None:
        raise ValueError("mixup needs the teacher to judge the mixed inputs")
    policy = model.policy
    policy.set_training_mode(True)
    opt = policy.optimizer
    for group in opt.param_groups:
        group["lr"] = s.lr
    drawn = data.sample(rng, samples)
    kv, km = [], []
    for b in range(0, samples, s.batch):
        obs = _obs_tensor({k: drawn[k][b : b + s.batch] for k in ("glimpse", "overview", "state")})
        t_verdict = th.as_tensor(drawn["t_verdict"][b : b + s.batch])
        t_moves = th.as_tensor(drawn["t_moves"][b : b + s.batch])
        if s.mixup:
            obs = mixed(obs, s.mixup, rng)
            with th.no_grad():
                t_cats = teacher.get_distribution(obs).distribution
            t_verdict = th.log_softmax(t_cats[-1].logits, -1)
            t_moves = th.log_softmax(t_cats[0].logits, -1)
        cats = policy.get_distribution(obs).distribution
        loss_v = kl_loss(t_verdict, cats[-1].logits, s.temperature)
        loss_m = kl_loss(t_moves, cats[0].logits)
        loss = loss_v + s.w_moves * loss_m
        opt.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
        opt.step()
        kv.append(loss_v.item())
        km.append(loss_m.item())
    policy.set_training_mode(False)
    return {"kl_verdict": float(np.mean(kv)), "kl_moves": float(np.mean(km))}


def distil(
    model: Any,
    teacher: Any,
    env: Any,
    s: DistillSettings,
    *,
    seed: int = 0,
    after_round: Callable[[Any, int, dict[str, float]], bool | None] | None = None,
) -> list[dict[str, float]]:
    """Distil ``teacher`` into ``model`` on the states ``model`` visits in ``env``.

    Continues from ``model.num_timesteps`` (a resumed run starts its next round; the
    earlier rounds' observations are not kept across a restart).

    :param after_round: called with (model, round, losses) after each round (the run
        checkpoints and checks the model there); False stops the distillation there.
    :returns: each round's losses, its steps so far and the CPU seconds of its parts
        (``cpu_s_rollout``, ``cpu_s_teacher``, ``cpu_s_update``; with ``mixup`` the
        teacher's judgement of each minibatch counts to the update).
    """
    per = s.round_steps(env.num_envs)
    rng = np.random.default_rng(seed + model.num_timesteps)
    data = Aggregate()
    history = []
    obs = env.reset()
    while model.num_timesteps < s.steps:
        n = min(per, s.steps - model.num_timesteps)
        n = max(env.num_envs, n - n % env.num_envs)
        t0 = time.process_time()
        seen, obs = collect(model, env, n, obs)
        seen = flipped(seen) if s.flips else seen
        t1 = time.process_time()
        data.add({**seen, **teacher_targets(teacher, seen)})
        t2 = time.process_time()
        model.num_timesteps += n
        losses = train_round(model, data, max(s.batch, int(s.passes * n)), s, rng, teacher)
        losses["steps"] = int(model.num_timesteps)
        # where the round's CPU went (this process, all its threads): distill.json keeps it
        losses["cpu_s_rollout"] = round(t1 - t0, 2)
        losses["cpu_s_teacher"] = round(t2 - t1, 2)
        losses["cpu_s_update"] = round(time.process_time() - t2, 2)
        history.append(losses)
        log.info("distillation round at %d steps: %s", model.num_timesteps, losses)
        if after_round is not None and after_round(model, len(history), losses) is False:
            break  # the run gives up (its val checks: TrainConfig.give_up_below)
    return history
