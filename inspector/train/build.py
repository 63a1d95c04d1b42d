"""The pieces of a training run: environments, the network's and PPO's settings, the
HybridPPO model and its teacher (what ``train``, retraining and the benchmarks build)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from inspector.profile import Profile
from inspector.train.config import TrainConfig


def cosine_schedule(lr: float, floor: float):
    """SB3 schedule: cosine from ``lr`` (progress 1) to ``floor`` (progress 0)."""

    def schedule(progress_remaining: float) -> float:
        t = 1.0 - progress_remaining
        return floor + 0.5 * (lr - floor) * (1.0 + math.cos(math.pi * t))

    return schedule


def _make_env(
    profile_path: str, camera: str, params: dict, seed: int, teacher: bool, max_zoom: int | None
):
    def thunk():
        from stable_baselines3.common.monitor import Monitor

        from inspector.env import InspectionEnv

        env = InspectionEnv(profile_path, camera, params, teacher=teacher, max_zoom=max_zoom)
        env.reset(seed=seed)
        return Monitor(env, info_keywords=("correct", "steps"))

    return thunk


def make_vec_env(
    profile_path: str, camera: str, params: Mapping[str, Any], cfg: TrainConfig, teacher: bool
):
    """n_envs environments (SubprocVecEnv or DummyVecEnv), each seeded differently."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [
        _make_env(
            profile_path, camera, dict(params), cfg.seed * 1000 + i, teacher, cfg.rollout_max_zoom
        )
        for i in range(cfg.n_envs)
    ]
    if cfg.vec_env == "subproc" and cfg.n_envs > 1:
        return SubprocVecEnv(fns, start_method="fork")
    return DummyVecEnv(fns)


def policy_kwargs(cfg: TrainConfig, n_classes: int | None = None) -> dict[str, Any]:
    """SB3 ``policy_kwargs``: the CNN extractor over glimpses, overview and state.

    :param n_classes: verdict classes (the profile's); needed by ``cfg.glimpse_evidence``.
    """
    from inspector.train.network import InspectorExtractor

    if cfg.glimpse_evidence and not n_classes:
        raise ValueError("glimpse_evidence needs the number of verdict classes")
    return {
        "features_extractor_class": InspectorExtractor,
        "features_extractor_kwargs": {
            "channels": cfg.cnn_channels,
            "features_dim": cfg.features_dim,
            **({"fine": True} if cfg.cnn_fine else {}),
            **({"separable": True} if cfg.cnn_separable else {}),
            **({"evidence_classes": int(n_classes)} if cfg.glimpse_evidence else {}),
            **({"overview_evidence": True} if cfg.overview_evidence else {}),
        },
        "net_arch": list(cfg.net_arch),
        "normalize_images": False,
    }


def ppo_kwargs(cfg: TrainConfig, n_classes: int | None = None) -> dict[str, Any]:
    """The PPO settings of ``cfg`` (shared by HybridPPO and plain-PPO baselines).

    :param n_classes: verdict classes, for :func:`policy_kwargs`.
    """
    return {
        "n_steps": cfg.n_steps,
        "batch_size": cfg.minibatch()[0],  # the commands print the note when it differs
        "n_epochs": cfg.n_epochs,
        "gamma": cfg.gamma,
        "gae_lambda": cfg.gae_lambda,
        "clip_range": cfg.clip_range,
        "ent_coef": cfg.ent_coef,
        "vf_coef": cfg.vf_coef,
        "max_grad_norm": cfg.max_grad_norm,
        "learning_rate": cosine_schedule(cfg.learning_rate, cfg.lr_floor),
        "seed": cfg.seed,
        "device": "cpu",
        "policy_kwargs": policy_kwargs(cfg, n_classes),
    }


def build_model(env: Any, profile: Profile, cfg: TrainConfig, teacher: Any, tb_dir: str | None):
    """A fresh HybridPPO for ``env``."""
    from inspector.rrm.buffer import RRMRolloutBuffer
    from inspector.train.hybrid import HybridPPO

    return HybridPPO(
        "MultiInputPolicy",
        env,
        tensorboard_log=tb_dir,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={
            "rrm": profile.rrm,
            "n_move_actions": int(env.action_space.nvec[0]),
            "seed": cfg.seed,
        },
        w_rl=cfg.w_rl,
        w_sl=cfg.w_sl,
        w_kd=cfg.w_kd,
        teacher=teacher,
        verdict_balance=cfg.verdict_balance,
        verdict_stop_weight=cfg.verdict_stop_weight,
        critic_warmup=cfg.critic_warmup,
        verdict_on_stop=cfg.verdict_on_stop,
        **ppo_kwargs(cfg, len(profile.classes)),
    )


def resolve_teacher(cfg: TrainConfig, teacher_path: str | None) -> Any:
    """``scripted``, a loaded model's policy, an ensemble directory's teacher, or None."""
    spec = teacher_path or cfg.teacher
    if spec in (None, "", "none"):
        return None
    if spec == "scripted":
        return "scripted"
    from inspector.train.distill import is_ensemble_dir, load_ensemble_teacher

    if is_ensemble_dir(spec):  # distillation: a verdict ensemble teaches (train --members)
        return load_ensemble_teacher(spec)
    from inspector.train.torch_policy import load_trained

    model, _, _ = load_trained(spec)
    return model.policy
