"""``train``: build the environments, run HybridPPO, checkpoint, resume, report."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import InspectorError
from inspector.files import atomic_path, write_atomic
from inspector.profile import Profile, load_profile
from inspector.scan import ACTIONS
from inspector.train.config import TrainConfig

log = logging.getLogger(__name__)


def cosine_schedule(lr: float, floor: float):
    """SB3 schedule: cosine from ``lr`` (progress 1) to ``floor`` (progress 0)."""

    def schedule(progress_remaining: float) -> float:
        t = 1.0 - progress_remaining
        return floor + 0.5 * (lr - floor) * (1.0 + math.cos(math.pi * t))

    return schedule


def _make_env(profile_path: str, camera: str, params: dict, seed: int, teacher: bool):
    def thunk():
        from stable_baselines3.common.monitor import Monitor

        from inspector.env import InspectionEnv

        env = InspectionEnv(profile_path, camera, params, teacher=teacher)
        env.reset(seed=seed)
        return Monitor(env, info_keywords=("correct", "steps"))

    return thunk


def make_vec_env(
    profile_path: str, camera: str, params: Mapping[str, Any], cfg: TrainConfig, teacher: bool
):
    """n_envs environments (SubprocVecEnv or DummyVecEnv), each seeded differently."""
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    fns = [
        _make_env(profile_path, camera, dict(params), cfg.seed * 1000 + i, teacher)
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
            "n_move_actions": len(ACTIONS),
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


@dataclass
class TrainResult:
    """What ``train`` produced."""

    out: Path
    model_path: Path
    timesteps: int
    report: dict[str, Any] | None


def _callbacks(out: Path, cfg: TrainConfig, total: int, progress: bool):
    from stable_baselines3.common.callbacks import BaseCallback

    from inspector.train.watch import progress_callback

    class RunCallback(BaseCallback):
        """Per-term TensorBoard means, checkpoints at rollout boundaries."""

        def __init__(self) -> None:
            super().__init__()
            self.recent = deque(maxlen=200)
            self.steps_recent = deque(maxlen=200)
            self.term_sums: dict[str, float] = {}
            self.term_n = 0
            self.native = 0
            self.last_ckpt = 0

        def _on_training_start(self) -> None:
            self.last_ckpt = self.num_timesteps

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                for k, v in info.get("terms", {}).items():
                    self.term_sums[k] = self.term_sums.get(k, 0.0) + v
                self.term_n += 1
                self.native += int(bool(info.get("native")))
                if "correct" in info and "steps" in info:
                    self.recent.append(float(info["correct"]))
                    self.steps_recent.append(info["steps"])
            return True

        def _on_rollout_start(self) -> None:
            # The previous rollout is fully trained here: a safe point to checkpoint.
            if self.num_timesteps - self.last_ckpt >= cfg.checkpoint_interval:
                save_checkpoint(self.model, out)
                self.last_ckpt = self.num_timesteps

        def _on_rollout_end(self) -> None:
            rec = self.logger.record
            if self.term_n:
                for k, v in self.term_sums.items():
                    rec(f"terms/{k}", v / self.term_n)
                rec("rollout/native_share", self.native / self.term_n)
            if self.recent:
                rec("rollout/accuracy", float(np.mean(self.recent)))
                rec("rollout/mean_glimpses", float(np.mean(self.steps_recent)))
            self.term_sums, self.term_n, self.native = {}, 0, 0

    # The progress callback first: its timing then leaves out the others' checks.
    procs = 1 + (cfg.n_envs if cfg.vec_env == "subproc" and cfg.n_envs > 1 else 0)
    return [progress_callback(out, total, progress, processes=procs), RunCallback()]


def pretrain_perception(
    model: Any,
    profile: str | Profile,
    camera: str,
    params: Mapping,
    cfg: TrainConfig,
    out: Path | None = None,
):
    """Pretrain the glimpse CNN on mask-labelled crops (see :mod:`inspector.train.perception`).

    ``cfg.perception_samples`` crops, seeded by ``cfg.seed``; with
    ``cfg.perception_freeze`` the glimpse CNN is frozen afterwards. The stats go to
    ``out/perception.json`` when ``out`` is given.
    """
    from inspector.env import InspectionEnv
    from inspector.train.perception import freeze_glimpse_cnn, perception_pretrain

    stats = perception_pretrain(
        model,
        lambda: InspectionEnv(profile, camera, dict(params)),
        cfg.perception_samples,
        epochs=cfg.perception_epochs,
        seed=cfg.seed,
        levels=cfg.perception_levels,
    )
    if cfg.perception_freeze:
        stats["perception/frozen_weights"] = float(freeze_glimpse_cnn(model))
    if out is not None:
        (out / "perception.json").write_text(json.dumps(stats, indent=2))
    return stats


def pretrain(
    model: Any,
    profile: str | Profile,
    camera: str,
    params: Mapping,
    cfg: TrainConfig,
    out: Path | None = None,
):
    """Behaviour-clone the scripted teacher (see :mod:`inspector.train.pretrain`).

    ``cfg.bc_samples`` teacher steps, seeded by ``cfg.seed``; the stats go to
    ``out/bc.json`` when ``out`` is given.
    """
    from inspector.env import InspectionEnv
    from inspector.train.pretrain import behaviour_clone, collect_teacher_samples

    data = collect_teacher_samples(
        lambda: InspectionEnv(profile, camera, dict(params), teacher=True),
        cfg.bc_samples,
        seed=cfg.seed,
    )
    stats = behaviour_clone(
        model,
        data,
        epochs=cfg.bc_epochs,
        lr=cfg.bc_lr,
        balance=cfg.verdict_balance,
        stop_weight=cfg.verdict_stop_weight,
    )
    stats["bc/samples"] = cfg.bc_samples
    if out is not None:
        (out / "bc.json").write_text(json.dumps(stats, indent=2))
    return stats


def save_checkpoint(model: Any, out: Path) -> Path:
    """Write checkpoints/ckpt_<steps>.zip atomically and point latest.json at it."""
    ck = out / "checkpoints"
    ck.mkdir(parents=True, exist_ok=True)
    path = ck / f"ckpt_{model.num_timesteps:09d}.zip"
    with atomic_path(path) as tmp:
        model.save(str(tmp))
    norm = getattr(model.rollout_buffer, "normaliser", None)
    state = {"path": path.name, "num_timesteps": int(model.num_timesteps)}
    if norm is not None:
        state["normaliser"] = {
            "mean": norm.ret_rms.mean,
            "var": norm.ret_rms.var,
            "count": norm.ret_rms.count,
            "lo": norm.lo if np.isfinite(norm.lo) else None,
            "hi": norm.hi if np.isfinite(norm.hi) else None,
        }
    write_atomic(ck / "latest.json", json.dumps(state))
    return path


#: The largest ``latest.json`` read (bytes).
MAX_LATEST_BYTES = 64 * 1024


def _finite_or_none(value: Any, key: str, where: Path) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InspectorError(
            f"{where}: normaliser.{key} must be a finite number, got {value!r:.40}"
        )
    return float(value)


def read_latest(out: Path) -> tuple[dict[str, Any], Path]:
    """``checkpoints/latest.json`` of a run, checked: (state, checkpoint path).

    The checkpoint it names must be a ``ckpt_*.zip`` file inside the run's
    ``checkpoints/`` folder (no path separators, no symlink out); the normaliser's
    numbers must be finite.

    :param out: the run directory.
    :raises InspectorError: a damaged or hostile ``latest.json``.
    """
    ck = out / "checkpoints"
    latest = ck / "latest.json"
    try:
        raw = latest.read_bytes()[: MAX_LATEST_BYTES + 1]
        if len(raw) > MAX_LATEST_BYTES:
            raise ValueError(f"over {MAX_LATEST_BYTES} bytes")
        state = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InspectorError(f"{latest}: cannot read it ({str(exc)[:120]})") from None
    if not isinstance(state, dict):
        raise InspectorError(f"{latest}: expected a JSON object")
    name = state.get("path")
    if (
        not isinstance(name, str)
        or not name.startswith("ckpt_")
        or not name.endswith(".zip")
        or "/" in name
        or "\\" in name
        or name in (".", "..")
        or any(ord(c) < 32 for c in name)
    ):
        raise InspectorError(
            f"{latest}: 'path' must name a ckpt_*.zip file in {ck}, got {name!r:.80}"
        )
    ckpt = ck / name
    real_ck = os.path.realpath(ck)
    if os.path.commonpath([real_ck, os.path.realpath(ckpt)]) != real_ck or not ckpt.is_file():
        raise InspectorError(f"{latest}: checkpoint {name!r} is not a file inside {ck}")
    norm = state.get("normaliser")
    if norm is not None:
        if not isinstance(norm, dict):
            raise InspectorError(f"{latest}: 'normaliser' must be an object")
        clean = {k: _finite_or_none(norm.get(k), k, latest) for k in ("mean", "var", "count")}
        if None in clean.values() or clean["var"] < 0 or clean["count"] < 0:
            raise InspectorError(f"{latest}: normaliser needs finite mean, var >= 0, count >= 0")
        clean.update({k: _finite_or_none(norm.get(k), k, latest) for k in ("lo", "hi")})
        state["normaliser"] = clean
    return state, ckpt


def train_run(
    profile_path: str,
    camera: str,
    camera_params: Mapping[str, Any],
    timesteps: int,
    out: str | Path,
    cfg: TrainConfig | None = None,
    *,
    teacher_path: str | None = None,
    resume: bool = False,
    progress: bool = True,
    evaluate_after: bool = True,
    init_from: str | None = None,
    recipe: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train a policy; see ``inspector train --help``.

    With held-out labelled frames (:func:`inspector.train.select.val_params`) the run
    keeps its best model on them, not the last, and ends by choosing its operating point
    there; report.json says which model was kept, why, and on which frames.

    :param init_from: a model whose weights initialise the new one (same spaces).
    :param recipe: what the report says about the recipe (the preset; see
        :func:`inspector.train.presets.describe`).
    """
    from inspector.train.perception import freeze_glimpse_cnn
    from inspector.train.safe_load import read_model_zip, restore
    from inspector.train.select import BestOnVal, end_of_training, val_params

    cfg = cfg or TrainConfig()
    if timesteps < 1:
        raise InspectorError(f"--timesteps must be positive, got {timesteps}")
    out = Path(out)
    profile = load_profile(profile_path)
    out.mkdir(parents=True, exist_ok=True)
    prof_copy = out / "profile.yaml"
    if not (resume and prof_copy.exists()):
        shutil.copyfile(profile_path, prof_copy)
        (out / "profile.sha256").write_text(profile.sha256 + "\n")
        (out / "config.yaml").write_text(cfg.to_yaml())
        (out / "camera.json").write_text(
            json.dumps({"camera": camera, "params": dict(camera_params)}, indent=2)
        )
    teacher = resolve_teacher(cfg, teacher_path)
    latest = out / "checkpoints" / "latest.json"
    val, val_source = val_params(camera, camera_params, cfg)
    sel = (
        BestOnVal(
            out, profile, camera, val, cfg, val_source, fresh=not (resume and latest.is_file())
        )
        if val is not None and cfg.select_interval > 0
        else None
    )
    env = make_vec_env(str(prof_copy), camera, camera_params, cfg, teacher == "scripted")
    tb = str(out / "tb")
    try:
        if resume and latest.is_file():
            state, ckpt = read_latest(out)
            model = build_model(env, profile, cfg, teacher, tb)
            restore(model, read_model_zip(ckpt), optimizer=True)
            if teacher is None:
                model.w_kd = 0.0
            # The run's config decides (a checkpoint from before the option has none).
            model.verdict_on_stop = cfg.verdict_on_stop
            norm = state.get("normaliser")
            if norm:
                nm = model.rollout_buffer.normaliser
                nm.ret_rms.mean, nm.ret_rms.var, nm.ret_rms.count = (
                    norm["mean"],
                    norm["var"],
                    norm["count"],
                )
                nm.lo = norm["lo"] if norm["lo"] is not None else np.inf
                nm.hi = norm["hi"] if norm["hi"] is not None else -np.inf
            log.warning("resuming from %s at step %d", ckpt.name, model.num_timesteps)
            if cfg.perception_freeze:
                freeze_glimpse_cnn(model)
            remaining = max(0, timesteps - model.num_timesteps)
            reset = False
        else:
            if resume:
                log.warning("--resume: no checkpoint in %s, starting fresh", out)
            model = build_model(env, profile, cfg, teacher, tb)
            if init_from:
                from inspector.train.torch_policy import load_trained

                base, _, _ = load_trained(init_from)
                model.policy.load_state_dict(base.policy.state_dict())
            if cfg.perception_samples > 0:
                pretrain_perception(model, str(prof_copy), camera, camera_params, cfg, out)
            elif cfg.perception_freeze:
                if not init_from:
                    log.warning(
                        "perception_freeze without perception_samples or --init-from:"
                        " the glimpse CNN stays at its random initialisation"
                    )
                freeze_glimpse_cnn(model)
            if teacher == "scripted" and cfg.bc_samples > 0:
                pretrain(model, str(prof_copy), camera, camera_params, cfg, out)
            remaining = timesteps
            reset = True
        if remaining > 0:
            callbacks = _callbacks(out, cfg, timesteps, progress)
            model.learn(
                remaining,
                callback=callbacks + ([sel.callback()] if sel else []),
                reset_num_timesteps=reset,
                tb_log_name="hybrid_ppo",
            )
        save_checkpoint(model, out)
        with atomic_path(out / "model.zip") as tmp:
            model.save(str(tmp))
        ending = end_of_training(out, model, sel, camera, val, val_source, cfg)
    finally:
        env.close()
    report = None
    if evaluate_after and cfg.final_eval_episodes > 0:
        extra = {**ending, **({"recipe": dict(recipe)} if recipe else {})}
        params = {**camera_params, **cfg.eval_camera_params}
        report = evaluate_run(out, camera, params, cfg, extra)
    return TrainResult(out, out / "model.zip", int(model.num_timesteps), report)


def evaluate_run(
    out: Path,
    camera: str,
    params: Mapping[str, Any],
    cfg: TrainConfig,
    extra: Mapping[str, Any] | None = None,
) -> dict:
    """Evaluate the run's model at its operating point; write report.json + report.png.

    :param extra: sections added to the report (kept model, operating point, recipe).
    """
    from inspector.policy.operating_point import read_ok_bias
    from inspector.train.evaluate import evaluate, trained_source, write_report
    from inspector.train.torch_policy import TorchPolicy, load_trained, meta_for_model

    model, profile, sha = load_trained(out)
    policy = TorchPolicy(model, meta_for_model(model, profile, sha, read_ok_bias(out, sha)))
    result, kept = evaluate(
        policy,
        camera,
        params,
        cfg.final_eval_episodes,
        ok_class=profile.ok_class,
        keep=6,
        trained_on=trained_source(out),
    )
    result["model_sha256"] = sha
    result["scan"] = dict(policy.meta.scan)
    result["ok_bias"] = policy.meta.ok_bias
    result["eval_frames"] = result.pop("frames")  # which frames, and what they are to it
    result.update(extra or {})
    write_report(result, kept, out / "report.json", out / "report.png")
    return result
