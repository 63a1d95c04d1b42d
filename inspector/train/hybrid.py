"""HybridPPO: PPO + supervised cross-entropy on verdicts + KL distillation from a teacher.

loss = (w_rl * L_PPO + w_sl * L_CE + w_kd * L_KL) / (w_rl + w_sl + w_kd)

* L_PPO is SB3's PPO loss, computed exactly as ``PPO.train`` does.
* L_CE: cross-entropy of the verdict head (the second action component's logits)
  against the step's verdict target, at every step of labelled episodes ("if I
  stopped now, what would it be"): with the scripted teacher the verdict its
  observations support (ok until the defect was in sight, then the true class),
  else the episode's true label. Collected alongside the rollout by
  :class:`RRMRolloutBuffer`.
* L_KL: KL(teacher || student) on the rollout's observations. The teacher is either
  a saved model with the same action space (its distribution is computed on the
  batch), or the scripted teacher whose actions the environment
  reports (``teacher="scripted"``; a label-smoothed one-hot target on the move
  component). Without a teacher w_kd is 0, and the log says so.

The verdict is read only on ``stop`` (see :mod:`inspector.env`), so by default
(``verdict_on_stop``) the PPO ratio counts the verdict component's probability on
stop steps only: on every other step the sampled verdict changes nothing, and its
log-probability times the step's advantage is zero-mean noise in the verdict head's
gradient (and drift in the ratio that clipping then holds against the move). The
rollout's stored log-probabilities are corrected the same way before the update.

With w_sl = w_kd = 0 and ``verdict_on_stop=False`` the loss *is* the PPO loss (not a
rescaled copy), so the gradients equal plain PPO's on the same batch. Subclasses PPO and overrides
``train()`` only (plus a two-line hook that hands each step's infos to the buffer).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import PPO
from stable_baselines3.common.utils import explained_variance
from torch.nn import functional as F

from inspector.rrm.buffer import RRMRolloutBuffer
from inspector.scan import STOP, stop_index
from inspector.train.losses import balanced_class_weights, verdict_cross_entropy

log = logging.getLogger(__name__)


class HybridPPO(PPO):
    """PPO with the hybrid loss.

    :param w_rl: weight of the PPO loss.
    :param w_sl: weight of the verdict cross-entropy.
    :param w_kd: weight of the KL distillation from the teacher.
    :param teacher: ``"scripted"``, an SB3 policy/model with the same action space, or None.
    :param teacher_smoothing: label smoothing of the scripted teacher's one-hot target.
    :param verdict_balance: class-balanced verdict cross-entropy, the class weights taken
        over each rollout's targets (see :mod:`inspector.train.losses`).
    :param verdict_stop_weight: weight of the steps where the scripted teacher would stop
        in the verdict cross-entropy (1 = none).
    :param verdict_on_stop: the verdict component's log-probability enters the PPO
        ratio on stop steps only (the only steps where the environment reads it).
    :param critic_warmup: for the model's first ``critic_warmup`` env steps only the
        value function learns (on detached features; the policy, the features and the
        hybrid terms are left alone). After behaviour cloning the value head is still
        untrained, so the first PPO updates follow noise advantages and undo the
        cloned policy; a warmed-up critic gives them meaningful advantages. 0 = off.
    """

    #: Default after loading: the teacher is not saved with the model (see below).
    teacher: Any = None
    #: For objects built without ``__init__`` (``load`` runs it, then the saved data wins).
    verdict_on_stop: bool = True

    def __init__(
        self,
        *args: Any,
        w_rl: float = 0.7,
        w_sl: float = 0.2,
        w_kd: float = 0.1,
        teacher: Any = None,
        teacher_smoothing: float = 0.05,
        verdict_balance: bool = False,
        verdict_stop_weight: float = 1.0,
        critic_warmup: int = 0,
        verdict_on_stop: bool = True,
        **kwargs: Any,
    ) -> None:
        if critic_warmup < 0:
            raise ValueError(f"critic_warmup must not be negative, got {critic_warmup}")
        self.critic_warmup = int(critic_warmup)
        self.verdict_on_stop = bool(verdict_on_stop)
        if verdict_stop_weight <= 0:
            raise ValueError(f"verdict_stop_weight must be positive, got {verdict_stop_weight}")
        self.verdict_balance = bool(verdict_balance)
        self.verdict_stop_weight = float(verdict_stop_weight)
        self.w_rl = float(w_rl)
        self.w_sl = float(w_sl)
        self.w_kd = float(w_kd)
        self.teacher_smoothing = teacher_smoothing
        if teacher is not None and not isinstance(teacher, str):
            teacher = getattr(teacher, "policy", teacher)
            teacher.set_training_mode(False)
        self.teacher = teacher
        if self.teacher is None and self.w_kd and kwargs.get("_init_setup_model", True):
            log.warning("no teacher given: the KL weight w_kd=%.3g is set to 0", self.w_kd)
            self.w_kd = 0.0
        super().__init__(*args, **kwargs)

    def _excluded_save_params(self) -> list[str]:
        # A teacher policy would be pickled into every checkpoint; callers pass it again.
        return [*super()._excluded_save_params(), "teacher"]

    # -- collection hooks -------------------------------------------------------------
    def _setup_learn(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        out = super()._setup_learn(*args, **kwargs)
        if isinstance(self.rollout_buffer, RRMRolloutBuffer):
            self.rollout_buffer.set_initial_teacher(getattr(self.env, "reset_infos", None))
        return out

    def _update_info_buffer(self, infos: list[dict], dones: np.ndarray | None = None) -> None:
        super()._update_info_buffer(infos, dones)
        # Called once per step just before rollout_buffer.add(): hand over the infos.
        if isinstance(self.rollout_buffer, RRMRolloutBuffer) and dones is not None:
            self.rollout_buffer.stash(infos, dones, getattr(self.env, "reset_infos", None))

    # -- the verdict on stop steps only -------------------------------------------------
    def _stop_action(self) -> int:
        """The stop action's index: the last of the env's action table (the profile's
        ``scan.actions``), the moves table's ``STOP`` without a MultiDiscrete space."""
        space = self.action_space
        if isinstance(space, spaces.MultiDiscrete):
            return stop_index(int(space.nvec[0]))
        return STOP

    def _masks_verdict(self) -> bool:
        space = self.action_space
        return bool(
            self.verdict_on_stop
            and isinstance(space, spaces.MultiDiscrete)
            and len(space.nvec) == 2
        )

    def _action_log_prob(self, dist: Any, actions: th.Tensor) -> th.Tensor:
        """The log-probability of ``actions`` the PPO ratio uses.

        With ``verdict_on_stop`` the verdict component counts on stop steps only.
        """
        if not self._masks_verdict():
            return dist.log_prob(actions)
        move, verdict = dist.distribution
        a = actions.long()
        stop = (a[:, 0] == self._stop_action()).to(th.float32)
        return move.log_prob(a[:, 0]) + stop * verdict.log_prob(a[:, 1])

    def _mask_rollout_log_probs(self) -> None:
        """Drop the verdict component from the stored log-probabilities of non-stop steps.

        Called before the update's first pass, while the policy is still the one that
        collected the rollout: its verdict log-probabilities are those of the rollout.
        """
        buf = self.rollout_buffer
        if not self._masks_verdict() or buf.generator_ready:
            return
        n_steps, n_envs = buf.log_probs.shape[:2]
        actions = buf.actions.reshape(n_steps * n_envs, -1)
        non_stop = actions[:, 0].astype(np.int64) != self._stop_action()
        if not non_stop.any():
            return
        idx = np.flatnonzero(non_stop)
        lp_verdict = np.zeros(n_steps * n_envs, dtype=np.float32)
        self.policy.set_training_mode(False)
        with th.no_grad():
            for s in range(0, len(idx), 512):
                part = idx[s : s + 512]
                obs = {
                    k: th.as_tensor(v.reshape(n_steps * n_envs, *v.shape[2:])[part]).to(self.device)
                    for k, v in buf.observations.items()
                }
                dist = self.policy.get_distribution(obs)
                a = th.as_tensor(actions[part, 1]).long().to(self.device)
                lp_verdict[part] = dist.distribution[1].log_prob(a).cpu().numpy()
        self.policy.set_training_mode(True)
        buf.log_probs -= lp_verdict.reshape(n_steps, n_envs)

    # -- the hybrid loss ----------------------------------------------------------------
    def _kd_loss(self, obs: Any, dist: Any, samples: Any) -> th.Tensor | None:
        cats = dist.distribution
        if self.teacher == "scripted":
            t = samples.teacher_actions
            valid = t >= 0
            if not bool(valid.any()):
                return None
            logq = cats[0].logits[valid]
            n = logq.shape[1]
            eps = self.teacher_smoothing
            p = th.full_like(logq, eps / n)
            p[th.arange(p.shape[0]), t[valid]] += 1.0 - eps
            return (p * (th.log(p) - logq)).sum(dim=1).mean()
        with th.no_grad():
            tdist = self.teacher.get_distribution(obs)
        tcats = getattr(tdist, "distribution", [tdist.distribution])
        tcats = tcats if isinstance(tcats, list) else [tcats]
        kl = 0.0
        for tc, sc in zip(tcats, cats):
            kl = kl + th.distributions.kl_divergence(tc, sc).mean()
        return kl

    def _class_weights(self) -> th.Tensor | None:
        """The verdict classes' weights over this rollout's targets (``verdict_balance``)."""
        if self.verdict_balance and hasattr(self.rollout_buffer, "labels"):
            n_classes = int(self.action_space.nvec[-1])  # type: ignore[attr-defined]
            return balanced_class_weights(self.rollout_buffer.labels, n_classes)
        return None

    def _evaluate_batch(self, obs: Any, actions: th.Tensor, warming: bool):
        """(distribution, log-probability, values, entropy) of a batch.

        The same computation as ``ActorCriticPolicy.evaluate_actions``, keeping the
        distribution for the supervised and distillation terms.
        """
        policy = self.policy
        features = policy.extract_features(obs)
        if policy.share_features_extractor:
            pi_features = vf_features = features
        else:
            pi_features, vf_features = features
        if warming:  # the value function learns on features it cannot change
            vf_features = vf_features.detach()
        latent_pi = policy.mlp_extractor.forward_actor(pi_features)
        latent_vf = policy.mlp_extractor.forward_critic(vf_features)
        dist = policy._get_action_dist_from_latent(latent_pi)
        log_prob = self._action_log_prob(dist, actions)
        values = policy.value_net(latent_vf)
        return dist, log_prob, values.flatten(), dist.entropy()

    def _ppo_loss(
        self,
        rollout_data: Any,
        log_prob: th.Tensor,
        values: th.Tensor,
        entropy: th.Tensor | None,
        clip_range: float,
        clip_range_vf: float | None,
        warming: bool,
        stats: dict[str, list],
    ) -> th.Tensor:
        """SB3's PPO loss of a batch (the value loss alone while the critic warms up)."""
        advantages = rollout_data.advantages
        if self.normalize_advantage and len(advantages) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        ratio = th.exp(log_prob - rollout_data.old_log_prob)
        policy_loss_1 = advantages * ratio
        policy_loss_2 = advantages * th.clamp(ratio, 1 - clip_range, 1 + clip_range)
        policy_loss = -th.min(policy_loss_1, policy_loss_2).mean()
        stats["pg"].append(policy_loss.item())
        stats["clip"].append(th.mean((th.abs(ratio - 1) > clip_range).float()).item())
        if clip_range_vf is None:
            values_pred = values
        else:
            values_pred = rollout_data.old_values + th.clamp(
                values - rollout_data.old_values, -clip_range_vf, clip_range_vf
            )
        value_loss = F.mse_loss(rollout_data.returns, values_pred)
        stats["value"].append(value_loss.item())
        if entropy is None:
            entropy_loss = -th.mean(-log_prob)
        else:
            entropy_loss = -th.mean(entropy)
        stats["entropy"].append(entropy_loss.item())
        if warming:  # the value function alone
            return self.vf_coef * value_loss
        return policy_loss + self.ent_coef * entropy_loss + self.vf_coef * value_loss

    def _hybrid_loss(
        self,
        loss: th.Tensor,
        obs: Any,
        dist: Any,
        rollout_data: Any,
        class_weights: th.Tensor | None,
        stats: dict[str, list],
    ) -> th.Tensor:
        """The weighted mean of the PPO loss, the verdict cross-entropy and the KL term."""
        total_w = self.w_rl
        extra = 0.0
        labels = rollout_data.labels
        labelled = labels >= 0
        if self.w_sl > 0 and bool(labelled.any()):
            vlogits = dist.distribution[-1].logits[labelled]
            teach = getattr(rollout_data, "teacher_actions", None)
            ce = verdict_cross_entropy(
                vlogits,
                labels[labelled],
                class_weights,
                None if teach is None else teach[labelled],
                self.verdict_stop_weight,
                self._stop_action(),
            )
            extra = extra + self.w_sl * ce
            total_w += self.w_sl
            stats["ce"].append(ce.item())
            stats["verdict_acc"].append(
                (vlogits.argmax(dim=1) == labels[labelled]).float().mean().item()
            )
        if self.w_kd > 0:
            kd = self._kd_loss(obs, dist, rollout_data)
            if kd is not None:
                extra = extra + self.w_kd * kd
                total_w += self.w_kd
                stats["kd"].append(float(kd.item()))
        return (self.w_rl * loss + extra) / total_w

    def train(self) -> None:
        """One PPO update over the rollout with the hybrid loss."""
        self._mask_rollout_log_probs()
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)  # type: ignore[operator]
        clip_range_vf = None
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)  # type: ignore[operator]
        stats: dict[str, list] = {
            k: [] for k in ("entropy", "pg", "value", "clip", "ce", "kd", "verdict_acc")
        }
        # The critic warms up while the steps so far are within critic_warmup.
        warming = self.num_timesteps <= self.critic_warmup
        hybrid = (self.w_sl > 0 or self.w_kd > 0) and not warming
        class_weights = self._class_weights()
        continue_training = True
        for _epoch in range(self.n_epochs):
            approx_kl_divs = []
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    actions = rollout_data.actions.long().flatten()
                obs = rollout_data.observations
                dist, log_prob, values, entropy = self._evaluate_batch(obs, actions, warming)
                loss = self._ppo_loss(
                    rollout_data,
                    log_prob,
                    values,
                    entropy,
                    clip_range,
                    clip_range_vf,
                    warming,
                    stats,
                )
                if hybrid and hasattr(rollout_data, "labels"):
                    loss = self._hybrid_loss(loss, obs, dist, rollout_data, class_weights, stats)
                with th.no_grad():
                    log_ratio = log_prob - rollout_data.old_log_prob
                    approx_kl_div = th.mean((th.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
                    approx_kl_divs.append(approx_kl_div)
                if self.target_kl is not None and approx_kl_div > 1.5 * self.target_kl:
                    continue_training = False
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break
        self._record(stats, approx_kl_divs, loss, clip_range, warming)

    def _record(
        self,
        stats: dict[str, list],
        approx_kl_divs: list,
        loss: th.Tensor,
        clip_range: float,
        warming: bool,
    ) -> None:
        """The update's figures for the logger (SB3's names, plus the hybrid terms')."""
        explained_var = explained_variance(
            self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten()
        )
        rec = self.logger.record
        rec("train/entropy_loss", np.mean(stats["entropy"]))
        rec("train/policy_gradient_loss", np.mean(stats["pg"]))
        rec("train/value_loss", np.mean(stats["value"]))
        rec("train/approx_kl", np.mean(approx_kl_divs))
        rec("train/clip_fraction", np.mean(stats["clip"]))
        rec("train/loss", loss.item())
        rec("train/explained_variance", explained_var)
        rec("train/n_updates", self._n_updates, exclude="tensorboard")
        rec("train/clip_range", clip_range)
        rec("train/critic_warmup", float(warming))
        if stats["ce"]:
            rec("train/ce_loss", np.mean(stats["ce"]))
            rec("train/verdict_accuracy", np.mean(stats["verdict_acc"]))
        if stats["kd"]:
            rec("train/kd_loss", np.mean(stats["kd"]))
        for k, v in getattr(self.rollout_buffer, "stats", {}).items():
            rec(k, v)
