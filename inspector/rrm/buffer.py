"""The RRM core inside stable-baselines3: a rollout buffer that rewrites rewards before GAE.

SB3 calls ``compute_returns_and_advantage`` once per rollout; this subclass first
turns the environment's channel rewards into the rewards PPO learns from:

    channels (weights, already applied by the env)
      -> redistribution of the outcome channel over each complete episode
      -> + potential-based shaping F = gamma * Phi(s') - Phi(s)
      -> normalisation (running return std or min-max) and clipping
      -> + SB3's timeout bootstrap (gamma * V(s_T) on truncated episodes, kept as is)

Episodes cut by the rollout's ends (begun in the previous rollout, or not finished
yet) are **kept raw and bootstrapped**: their outcome rewards are not moved (a
partial episode's return is unknown), shaping and normalisation still apply, and
GAE bootstraps them from the value function as usual. With identity settings
nothing is touched, so advantages are bit-identical to plain PPO.

The buffer also collects, alongside the rollout, each step's verdict target and the
scripted teacher's action (from ``info``) for the hybrid loss. The verdict target is
the teacher's verdict for the observation when the env reports one (the true class
once the defect has been in sight, ok before: what the observations can support),
else the episode's true label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.buffers import DictRolloutBuffer

from inspector.profile import RRMConfig
from inspector.rrm.learned import LearnedRedistributor, episode_features
from inspector.rrm.normalise import RewardNormaliser
from inspector.rrm.redistribution import redistribute
from inspector.rrm.shaping import shaping_rewards
from inspector.rrm.step import INFO_KEY as STEP_KEY
from inspector.rrm.step import StepRecord


class HybridSamples(NamedTuple):
    """A minibatch: SB3's fields plus the labels and teacher actions of each step."""

    observations: dict[str, th.Tensor]
    actions: th.Tensor
    old_values: th.Tensor
    old_log_prob: th.Tensor
    advantages: th.Tensor
    returns: th.Tensor
    labels: th.Tensor
    teacher_actions: th.Tensor


def episode_segments(starts: np.ndarray, last_done: bool) -> list[tuple[int, int, bool]]:
    """Split one env's column of a rollout into episodes.

    :param starts: episode_starts[t] (1 where a new episode's first observation is).
    :param last_done: whether the last step of the rollout ended an episode.
    :returns: (begin, end_exclusive, complete) for each segment; complete means the
        episode both began and ended inside this rollout.
    """
    n = len(starts)
    begins = [0] + [t for t in range(1, n) if starts[t]]
    segs = []
    for j, b in enumerate(begins):
        e = begins[j + 1] if j + 1 < len(begins) else n
        ended = (j + 1 < len(begins)) or bool(last_done)
        segs.append((b, e, bool(starts[b]) and ended))
    return segs


class RRMRolloutBuffer(DictRolloutBuffer):
    """DictRolloutBuffer with the RRM reward pipeline and label/teacher collection.

    :param rrm: the profile's RRM settings.
    :param n_move_actions: number of move actions (features of the learned model).
    :param seed: seed of the shuffled control and the learned model.
    """

    def __init__(
        self,
        *args: Any,
        rrm: RRMConfig | None = None,
        n_move_actions: int = 7,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        self.rrm = rrm or RRMConfig()
        self.n_move_actions = n_move_actions
        self.rng = np.random.default_rng(seed)
        self._stash: Sequence[dict] | None = None
        self._next_teacher: np.ndarray | None = None
        self._next_verdict: np.ndarray | None = None
        self.learned: LearnedRedistributor | None = None
        self._seed = seed
        super().__init__(*args, **kwargs)
        n = self.rrm.normalisation
        self.normaliser = RewardNormaliser(
            n.method, gamma=self.gamma, clip=n.clip, epsilon=n.epsilon, n_envs=self.n_envs
        )
        self.stats: dict[str, float] = {}

    def reset(self) -> None:
        super().reset()
        shape = (self.buffer_size, self.n_envs)
        self.env_rewards = np.zeros(shape, dtype=np.float32)
        self.outcome = np.zeros(shape, dtype=np.float64)
        self.process = np.zeros(shape, dtype=np.float64)
        self.phi_prev = np.zeros(shape, dtype=np.float64)
        self.phi = np.zeros(shape, dtype=np.float64)
        self.labels = np.full(shape, -1, dtype=np.int64)
        self.teacher_actions = np.full(shape, -1, dtype=np.int64)
        self.has_info = np.zeros(shape, dtype=bool)
        self.rrm_rewards = np.zeros(shape, dtype=np.float64)

    # -- collection ---------------------------------------------------------------
    def stash(
        self, infos: Sequence[dict], dones: np.ndarray, reset_infos: Sequence[dict] | None = None
    ) -> None:
        """Called by HybridPPO once per env step, just before ``add``, with the step's infos."""
        self._stash = infos
        self._stash_dones = np.asarray(dones, dtype=bool)
        self._reset_infos = reset_infos

    def set_initial_teacher(self, reset_infos: Sequence[dict] | None) -> None:
        """Teacher actions for the very first observations (from the vec env's reset infos)."""
        infos = reset_infos or [{}] * self.n_envs
        self._next_teacher = np.array([int((ri or {}).get("teacher", -1)) for ri in infos])
        self._next_verdict = np.array([int((ri or {}).get("teacher_verdict", -1)) for ri in infos])

    def add(self, obs, action, reward, episode_start, value, log_prob) -> None:  # type: ignore[override]
        pos = self.pos
        super().add(obs, action, reward, episode_start, value, log_prob)
        infos = self._stash
        self._stash = None
        if infos is None:
            self.env_rewards[pos] = reward
            self.outcome[pos] = reward
            return
        if self._next_teacher is not None:
            self.teacher_actions[pos] = self._next_teacher
        verdict = self._next_verdict
        nxt = np.full(self.n_envs, -1, dtype=np.int64)
        nxt_v = np.full(self.n_envs, -1, dtype=np.int64)
        for i, info in enumerate(infos):
            rec = info.get(STEP_KEY)
            if not isinstance(rec, StepRecord):  # not an InspectionEnv: plain rewards
                self.env_rewards[pos, i] = reward[i]
                self.outcome[pos, i] = reward[i]
                continue
            self.has_info[pos, i] = True
            self.env_rewards[pos, i] = rec.reward
            self.outcome[pos, i] = rec.outcome  # the env weighted the channels
            self.process[pos, i] = rec.process
            self.phi_prev[pos, i] = rec.phi_prev
            self.phi[pos, i] = rec.phi
            label = rec.label
            if verdict is not None and verdict[i] >= 0 and label >= 0:
                label = int(verdict[i])
            self.labels[pos, i] = label
            if self._stash_dones[i] and self._reset_infos is not None:
                # The next observation is the new episode's first: its teacher is in
                # the reset info.
                src = self._reset_infos[i] or {}
                nxt[i] = int(src.get("teacher", -1))
                nxt_v[i] = int(src.get("teacher_verdict", -1))
            else:
                nxt[i], nxt_v[i] = rec.teacher_next, rec.teacher_verdict_next
        self._next_teacher = nxt
        self._next_verdict = nxt_v

    # -- the RRM pipeline ------------------------------------------------------------
    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        self.last_dones = np.asarray(dones, dtype=bool).copy()
        if not self.rrm.is_identity:
            self.rewards = self.rrm_pipeline(np.asarray(dones, dtype=bool)).astype(np.float32)
        super().compute_returns_and_advantage(last_values, dones)

    def rrm_pipeline(self, last_dones: np.ndarray) -> np.ndarray:
        """The rewards PPO learns from for this rollout (see the module docstring)."""
        red = self.rrm.redistribution
        self.stats = {}
        # SB3 added gamma * V(terminal obs) to truncated steps: keep that part as it is.
        bootstrap = self.rewards.astype(np.float64) - self.env_rewards.astype(np.float64)
        outcome = self.outcome.copy()
        segments = [
            episode_segments(self.episode_starts[:, i], bool(last_dones[i]))
            for i in range(self.n_envs)
        ]
        complete = [(i, b, e) for i, segs in enumerate(segments) for b, e, c in segs if c]
        if red.method == "learned":
            self._learned_redistribute(outcome, complete)
        elif red.method != "none":
            for i, b, e in complete:
                outcome[b:e, i] = redistribute(
                    self.outcome[b:e, i], red.method, lam=red.lam, window=red.window, rng=self.rng
                )
        shaped = np.zeros_like(outcome)
        if self.rrm.shaping.potential is not None:
            shaped = shaping_rewards(self.phi_prev, self.phi, self.gamma)
        total = outcome + self.process + shaped
        ends = np.zeros_like(self.episode_starts, dtype=bool)
        ends[:-1] = self.episode_starts[1:] > 0
        ends[-1] = last_dones
        normalised = self.normaliser(total, ends)
        self.rrm_rewards = normalised
        self.stats["rrm/complete_episodes"] = float(len(complete))
        self.stats["rrm/mean_reward"] = float(normalised.mean())
        return normalised + bootstrap

    def _learned_redistribute(
        self, outcome: np.ndarray, complete: list[tuple[int, int, int]]
    ) -> None:
        if not complete:
            return
        red = self.rrm.redistribution
        glimpse = self.observations["glimpse"]
        state = self.observations["state"]
        feats, outs = [], []
        for i, b, e in complete:
            feats.append(
                episode_features(
                    glimpse[b:e, i], state[b:e, i], self.actions[b:e, i], self.n_move_actions
                )
            )
            outs.append(self.outcome[b:e, i])
        if self.learned is None:
            self.learned = LearnedRedistributor(
                feats[0].shape[1], hidden=red.hidden, lr=red.lr, seed=self._seed
            )
        new = self.learned.redistribute(feats, outs)
        for (i, b, e), r in zip(complete, new):
            outcome[b:e, i] = r
        self.stats["rrm/learned_loss"] = self.learned.fit(feats, outs)

    # -- sampling ---------------------------------------------------------------------
    def get(self, batch_size: int | None = None):  # type: ignore[override]
        if not self.generator_ready:
            self._labels_flat = self.swap_and_flatten(self.labels)
            self._teacher_flat = self.swap_and_flatten(self.teacher_actions)
        yield from super().get(batch_size)

    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> HybridSamples:  # type: ignore[override]
        base = super()._get_samples(batch_inds, env)
        return HybridSamples(
            *base,
            labels=th.as_tensor(self._labels_flat[batch_inds].flatten(), device=self.device),
            teacher_actions=th.as_tensor(
                self._teacher_flat[batch_inds].flatten(), device=self.device
            ),
        )
