"""``train``: set up the run directory, pretrain, run HybridPPO, keep the best model,
choose the operating point, report. The pieces live beside it: :mod:`.build` (envs,
model, teacher), :mod:`.checkpoints` (checkpoints, resume), :mod:`.callbacks`."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspector.errors import InspectorError
from inspector.files import atomic_path, write_atomic
from inspector.profile import Profile, load_profile
from inspector.progress import ProgressLine
from inspector.train.build import (
    build_model,
    cosine_schedule,
    make_vec_env,
    policy_kwargs,
    ppo_kwargs,
    resolve_teacher,
)
from inspector.train.callbacks import run_callback
from inspector.train.checkpoints import read_latest, resume_model, save_checkpoint
from inspector.train.config import TrainConfig
from inspector.train.phases import PhaseClock
from inspector.train.watch import write_progress

#: The names callers (retraining, the benchmarks) import from here, the run's pieces
#: included.
__all__ = [
    "TrainResult",
    "build_model",
    "cosine_schedule",
    "closing_evaluation",
    "evaluate_run",
    "make_vec_env",
    "policy_kwargs",
    "ppo_kwargs",
    "pretrain",
    "pretrain_perception",
    "read_latest",
    "resolve_teacher",
    "save_checkpoint",
    "train_run",
]

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What ``train`` produced."""

    out: Path
    model_path: Path
    timesteps: int
    report: dict[str, Any] | None


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


def _write_run_files(
    out: Path,
    profile_path: str,
    profile: Profile,
    camera: str,
    camera_params: Mapping[str, Any],
    cfg: TrainConfig,
    resume: bool,
) -> Path:
    """The run's copies of its profile, config and camera (kept as they are on resume).

    :returns: the profile copy the run trains with.
    """
    out.mkdir(parents=True, exist_ok=True)
    prof_copy = out / "profile.yaml"
    if not (resume and prof_copy.exists()):
        shutil.copyfile(profile_path, prof_copy)
        (out / "profile.sha256").write_text(profile.sha256 + "\n")
        (out / "config.yaml").write_text(cfg.to_yaml())
        (out / "camera.json").write_text(
            json.dumps({"camera": camera, "params": dict(camera_params)}, indent=2)
        )
    return prof_copy


def _fresh_model(
    env: Any,
    profile: Profile,
    cfg: TrainConfig,
    teacher: Any,
    out: Path,
    prof_copy: Path,
    camera: str,
    camera_params: Mapping[str, Any],
    init_from: str | None,
    clock: PhaseClock,
) -> Any:
    """A new model, initialised from ``init_from`` when given, then pretrained (perception
    crops, cloning the scripted teacher) as ``cfg`` says; ``clock`` counts their CPU."""
    from inspector.train.perception import freeze_glimpse_cnn

    model = build_model(env, profile, cfg, teacher, str(out / "tb"))
    if init_from:
        from inspector.train.torch_policy import load_trained

        base, _, _ = load_trained(init_from)
        model.policy.load_state_dict(base.policy.state_dict())
    if cfg.perception_samples > 0:
        with clock.phase("perception"):
            pretrain_perception(model, str(prof_copy), camera, camera_params, cfg, out)
    elif cfg.perception_freeze:
        if not init_from:
            log.warning(
                "perception_freeze without perception_samples or --init-from:"
                " the glimpse CNN stays at its random initialisation"
            )
        freeze_glimpse_cnn(model)
    if teacher == "scripted" and cfg.bc_samples > 0:
        with clock.phase("cloning"):
            pretrain(model, str(prof_copy), camera, camera_params, cfg, out)
    return model


def _distil_supervised(
    model: Any,
    teacher: Any,
    env: Any,
    cfg: TrainConfig,
    timesteps: int,
    out: Path,
    sel: Any,
    clock: PhaseClock,
) -> None:
    """Supervised distillation from ``teacher`` for ``cfg.supervised_distill_steps`` of
    the run's ``timesteps`` before PPO (:mod:`inspector.train.dagger`): a checkpoint and
    a val check after each round. Nothing to do once the model has those steps."""
    steps = min(cfg.supervised_distill_steps, timesteps)
    if model.num_timesteps >= steps or (sel is not None and sel.gave_up):
        return
    with clock.phase("distillation"):  # the val checks during it count as theirs
        _distil_rounds(model, teacher, env, cfg, steps, out, sel, clock)


def _distil_rounds(
    model: Any,
    teacher: Any,
    env: Any,
    cfg: TrainConfig,
    steps: int,
    out: Path,
    sel: Any,
    clock: PhaseClock,
) -> None:
    from inspector.train.dagger import DistillSettings, distil

    if teacher is None or isinstance(teacher, str):
        raise InspectorError(
            f"supervised_distill_steps needs a model or ensemble teacher, got {cfg.teacher!r}"
        )
    if sel is not None and not sel.state["checks"]:
        sel.check(model, "before distillation")
    settings = DistillSettings(
        steps=steps,
        rounds=cfg.distill_rounds,
        passes=cfg.distill_passes,
        batch=cfg.minibatch()[0],
        lr=cfg.learning_rate,
        temperature=cfg.distill_temperature,
        w_moves=cfg.distill_w_moves,
        flips=cfg.distill_flips,
        mixup=cfg.distill_mixup,
    )

    rounds = out / "distill.json"  # each round's losses (a resumed run goes on with them)
    history: list = json.loads(rounds.read_text()) if rounds.is_file() else []
    # progress.json after each round: the train --members parent's lines show the
    # student's steps and ETA as they show a member's (no lines of its own: one a round)
    line = ProgressLine(f"distil {out.name}", steps, start=model.num_timesteps, every=1e9)

    def after_round(m: Any, k: int, losses: dict[str, float]) -> bool:
        save_checkpoint(m, out)
        clock.flush()
        history.append(losses)
        write_atomic(rounds, json.dumps(history, indent=1))
        figure = f"KL {losses['kl_verdict']:.3f}"
        write_progress(out, line, m.num_timesteps, figure, finished=m.num_timesteps >= steps)
        logging.getLogger("inspector.progress").info(
            "distil %s: %s/%s steps, KL verdict %.4f, moves %.4f", out.name,
            f"{m.num_timesteps:,}", f"{steps:,}", losses["kl_verdict"], losses["kl_moves"],
        )  # fmt: skip
        if sel is None:
            return True
        sel.check(m, f"after distillation round {k}")
        return not sel.gave_up

    distil(model, teacher, env, settings, seed=cfg.seed, after_round=after_round)


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
    from inspector.train.ending import end_of_training
    from inspector.train.select import BestOnVal, val_params

    cfg = cfg or TrainConfig()
    if timesteps < 1:
        raise InspectorError(f"--timesteps must be positive, got {timesteps}")
    out = Path(out)
    profile = load_profile(profile_path)
    prof_copy = _write_run_files(out, profile_path, profile, camera, camera_params, cfg, resume)
    teacher = resolve_teacher(cfg, teacher_path)
    resuming = resume and (out / "checkpoints" / "latest.json").is_file()
    clock = PhaseClock(out, fresh=not resuming)
    val, val_source = val_params(camera, camera_params, cfg)
    sel = (
        BestOnVal(out, profile, camera, val, cfg, val_source, fresh=not resuming, clock=clock)
        if val is not None and cfg.select_interval > 0
        else None
    )
    env = make_vec_env(str(prof_copy), camera, camera_params, cfg, teacher == "scripted")
    try:
        if resuming:
            model = resume_model(out, env, profile, cfg, teacher)
        else:
            if resume:
                log.warning("--resume: no checkpoint in %s, starting fresh", out)
            model = _fresh_model(
                env, profile, cfg, teacher, out, prof_copy, camera, camera_params, init_from, clock
            )
        _distil_supervised(model, teacher, env, cfg, timesteps, out, sel, clock)
        remaining = max(0, timesteps - model.num_timesteps)
        if remaining > 0 and not (sel is not None and sel.gave_up):
            with clock.phase("ppo"):  # the val checks during it count as theirs
                model.learn(
                    remaining,
                    callback=run_callback(out, cfg, timesteps, progress, clock)
                    + ([sel.callback()] if sel else []),
                    reset_num_timesteps=model.num_timesteps == 0,
                    tb_log_name="hybrid_ppo",
                )
        save_checkpoint(model, out)
        with atomic_path(out / "model.zip") as tmp:
            model.save(str(tmp))
        with clock.phase("calibration"):  # the last val check counts as one
            ending = end_of_training(out, model, sel, camera, val, val_source, cfg)
    finally:
        env.close()
    report = None
    if evaluate_after and cfg.final_eval_episodes != 0:
        extra = {**ending, **({"recipe": dict(recipe)} if recipe else {})}
        with clock.phase("evaluation"):
            report = closing_evaluation(out, camera, camera_params, cfg, extra)
        report["cpu_s_by_phase"] = dict(clock.seconds)
        write_atomic(out / "report.json", json.dumps(report, indent=2))
    return TrainResult(out, out / "model.zip", int(model.num_timesteps), report)


def closing_evaluation(
    out: Path,
    camera: str,
    camera_params: Mapping[str, Any],
    cfg: TrainConfig,
    extra: Mapping[str, Any] | None = None,
) -> dict:
    """The run's last evaluation, on held-out frames (:func:`.select.eval_params`).

    Without held-out frames nothing is evaluated: the report keeps ``extra`` and says
    why under ``evaluation`` (and a warning says it on the console), rather than giving
    a figure on the frames the model was trained on.
    """
    from inspector.train.select import eval_params, no_eval_doc

    params, source = eval_params(camera, camera_params, cfg)
    if params is None:
        log.warning("no closing evaluation: %s", source)
        return {**(extra or {}), "eval_frames": None, "evaluation": no_eval_doc(source)}
    report = evaluate_run(out, camera, params, cfg, extra)
    report["evaluation"] = {"ran": True, "why": source}
    return report


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
    from inspector.policy.operating_point import read_calibrated
    from inspector.train.evaluate import evaluate, trained_source, write_report
    from inspector.train.torch_policy import TorchPolicy, load_trained, meta_for_model

    model, profile, sha = load_trained(out)
    policy = TorchPolicy(model, meta_for_model(model, profile, sha, **read_calibrated(out, sha)))
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
