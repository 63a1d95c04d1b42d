"""The arms: their profiles and trainers, one training run, its calibrated evaluation."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from benchmarks.harness import ROOT
from benchmarks.studies.learning_efficiency.tasks import current
from benchmarks.studies.shared import BALANCED_STOP_WEIGHT, learn_with_curve

ARMS = {
    "a": "sparse + plain PPO",
    "b": "shaped (process + outcome)",
    "c": "b + exponential redistribution",
    "d": "b + learned redistribution",
    "e": "c + hybrid loss (CE + KL teacher)",
    "f": "b + shuffled redistribution (control)",
    "g": "a's rewards, b's trainer (control)",
    "h": "b's outcome terms only (control)",
}


#: The arms the issue asks for; the others (g, h) are controls run when ``--arms`` names them.
MAIN_ARMS = "abcdef"


#: HybridPPO as a plain PPO: no verdict cross-entropy, no distillation, no teacher.
NO_EXTRA_LOSS = {"w_sl": 0.0, "w_kd": 0.0, "teacher": None}


def arm_setup(arm: str):
    """(profile, HybridPPO kwargs, use plain SB3 PPO) for an arm."""
    from inspector import PROCESS
    from inspector.profile import RedistributionConfig, load_profile

    def task_scan(prof):
        scan = dataclasses.replace(
            prof.scan, glimpse=current().glimpse, zoom_levels=current().zoom_levels
        )
        return dataclasses.replace(prof, step_budget=current().step_budget, scan=scan)

    if arm in ("a", "g"):
        sparse = load_profile(str(ROOT / "reward_profiles" / "sparse.yaml"))
        if arm == "g":  # HybridPPO with no extra loss, as (b)-(d), (f)
            return task_scan(sparse), dict(NO_EXTRA_LOSS), False
        return task_scan(sparse), {}, True
    base = task_scan(load_profile(str(ROOT / "reward_profiles" / "lcd_panel.yaml")))
    method = {"c": "exponential", "d": "learned", "e": "exponential", "f": "shuffled"}.get(
        arm, "none"
    )
    rrm = dataclasses.replace(
        base.rrm, redistribution=RedistributionConfig(method=method, lam=0.15, window=20)
    )
    prof = dataclasses.replace(base, rrm=rrm)
    if arm == "h":
        prof = dataclasses.replace(prof, terms=tuple(t for t in prof.terms if t.channel != PROCESS))
    hybrid = {"w_rl": 0.7, "w_sl": 0.2, "w_kd": 0.1, "teacher": "scripted"} if arm == "e" else {}
    if not hybrid:
        hybrid = dict(NO_EXTRA_LOSS)
    return prof, hybrid, False


def arm_config(
    arm: str,
    bc_samples: int | None = None,
    fine_cnn: bool = False,
    balanced_verdict: bool = False,
    critic_warmup: int = 0,
    weights: tuple[float, float, float] | None = None,
    memory: int = 0,
    evidence: bool = False,
    all_levels: bool = False,
    overview_evidence: bool = False,
):
    """(profile, HybridPPO kwargs, plain SB3 PPO?, TrainConfig) of an arm with the options
    of :func:`run_one` (those of the full stack change arm (e) only)."""
    from inspector.train.config import TrainConfig

    prof, hybrid, plain = arm_setup(arm)
    if memory:
        prof = dataclasses.replace(prof, scan=dataclasses.replace(prof.scan, memory=memory))
    if weights is not None and arm == "e":
        hybrid = {**hybrid, "w_rl": weights[0], "w_sl": weights[1], "w_kd": weights[2]}
    cfg = TrainConfig()
    if bc_samples is not None:
        cfg = cfg.replace(bc_samples=bc_samples)
    if fine_cnn:
        cfg = cfg.replace(cnn_fine=True)
    if evidence or overview_evidence:  # TrainConfig refuses the overview without the head
        cfg = cfg.replace(glimpse_evidence=evidence, overview_evidence=overview_evidence)
    if all_levels:
        cfg = cfg.replace(perception_levels="all")
    if balanced_verdict:
        cfg = cfg.replace(verdict_balance=True, verdict_stop_weight=BALANCED_STOP_WEIGHT)
    if hybrid.get("w_sl", 0) > 0:
        hybrid = {
            **hybrid,
            "verdict_balance": cfg.verdict_balance,
            "verdict_stop_weight": cfg.verdict_stop_weight,
            "critic_warmup": int(critic_warmup),
        }
    return prof, hybrid, plain, cfg


def arm_model(prof, hybrid: dict, plain: bool, cfg, seed: int, n_envs: int):
    """The arm's learner on ``n_envs`` synthetic cameras of the task in use: plain SB3 PPO,
    or HybridPPO with the RRM rollout buffer."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.env import InspectionEnv
    from inspector.rrm.buffer import RRMRolloutBuffer
    from inspector.scan import ACTIONS
    from inspector.train.hybrid import HybridPPO
    from inspector.train.runner import ppo_kwargs

    teacher = hybrid.get("teacher") == "scripted"

    def make(i):
        def thunk():
            from stable_baselines3.common.monitor import Monitor

            e = InspectionEnv(
                prof, "synthetic", {**current().camera, "seed": seed}, teacher=teacher
            )
            e.reset(seed=seed * 100 + i)
            return Monitor(e)

        return thunk

    env = DummyVecEnv([make(i) for i in range(n_envs)])
    common = ppo_kwargs(cfg.replace(seed=seed), len(prof.classes))
    if plain:
        model = PPO("MultiInputPolicy", env, **common)
    else:
        model = HybridPPO(
            "MultiInputPolicy",
            env,
            rollout_buffer_class=RRMRolloutBuffer,
            rollout_buffer_kwargs={"rrm": prof.rrm, "n_move_actions": len(ACTIONS), "seed": seed},
            **hybrid,
            **common,
        )
    return model


def run_one(
    arm: str,
    seed: int,
    budget: int,
    eval_every: int,
    eval_parts: int,
    n_envs: int,
    bc_samples: int | None = None,
    fine_cnn: bool = False,
    balanced_verdict: bool = False,
    perception: int = 0,
    critic_warmup: int = 0,
    freeze_perception: bool = False,
    weights: tuple[float, float, float] | None = None,
    memory: int = 0,
    evidence: bool = False,
    all_levels: bool = False,
    overview_evidence: bool = False,
    calibrate: int = 0,
):
    """Train one arm with one seed; evaluate every ``eval_every`` steps.

    :param memory: glimpses the observation remembers (the profile's ``scan.memory``,
        4 in lcd_panel.yaml) when not 0.
    :param evidence: the extractor's per-glimpse evidence head (TrainConfig.glimpse_evidence).
    :param all_levels: arm (e)'s perception crops from every zoom level
        (TrainConfig.perception_levels: all).
    :param overview_evidence: the evidence head judges the overview too
        (TrainConfig.overview_evidence; needs ``evidence``).
    :param calibrate: at each evaluation, also choose the ok bias on this many other
        labelled parts (``inspector calibrate``'s balanced objective) and score the
        evaluation parts at that bias (:func:`calibrated_eval`); 0: raw verdicts only.
    """
    import torch

    from inspector.train.torch_policy import meta_for_model

    torch.set_num_threads(1)
    prof, hybrid, plain, cfg = arm_config(
        arm, bc_samples, fine_cnn, balanced_verdict, critic_warmup, weights, memory, evidence,
        all_levels, overview_evidence,
    )  # fmt: skip
    model = arm_model(prof, hybrid, plain, cfg, seed, n_envs)
    meta = meta_for_model(model, prof)
    t0 = time.time()  # the pretraining is part of the run's time, as of its steps
    n_pp, n_bc, frozen = _pretrain(
        arm, model, prof, cfg, seed, budget, perception, freeze_perception
    )
    offset = n_pp + n_bc

    def do_eval(steps):
        return evaluation(model, meta, seed, eval_parts, calibrate, int(steps))

    curve = [do_eval(offset)] if offset else []
    learn_with_curve(model, budget - offset, offset, eval_every, do_eval, curve)
    return {
        "arm": arm,
        "seed": seed,
        "budget": budget,
        "bc_samples": n_bc,
        "perception_samples": n_pp,
        "fine_cnn": bool(fine_cnn),
        "balanced_verdict": bool(balanced_verdict),
        "critic_warmup": int(critic_warmup) if arm == "e" else 0,
        "perception_frozen": frozen,
        "weights": [hybrid.get("w_rl", 1.0), hybrid.get("w_sl", 0.0), hybrid.get("w_kd", 0.0)],
        "memory": int(prof.scan.memory),
        "evidence": bool(evidence),
        "perception_levels": cfg.perception_levels if n_pp else None,
        "overview_evidence": bool(cfg.overview_evidence),
        "calibrate_parts": int(calibrate),
        "curve": curve,
        "wall_s": time.time() - t0,
    }


def _pretrain(
    arm: str,
    model,
    prof,
    cfg,
    seed: int,
    budget: int,
    perception: int,
    freeze_perception: bool,
) -> tuple[int, int, bool]:
    """The full stack (arm e) pretrains its perception and clones the scripted teacher
    first (the training runner's own steps); those crops and env steps count.

    :returns: (perception crops, cloned samples, whether the glimpse CNN is frozen).
    """
    from inspector.train.runner import pretrain, pretrain_perception

    n_pp = min(perception, budget // 4) if arm == "e" else 0
    n_bc = min(cfg.bc_samples, budget // 2) if arm == "e" else 0
    frozen = bool(freeze_perception and n_pp)
    run_cfg = cfg.replace(
        seed=seed, perception_samples=n_pp, bc_samples=n_bc, perception_freeze=frozen
    )
    camera = {**current().camera, "seed": seed}
    if n_pp:
        pretrain_perception(model, prof, "synthetic", camera, run_cfg)
    if n_bc:
        pretrain(model, prof, "synthetic", camera, run_cfg)
    return n_pp, n_bc, frozen


def evaluation(model, meta, seed: int, parts: int, calibrate: int, steps: int) -> dict:
    """One point of the learning curve: the deterministic policy on ``parts`` fixed
    evaluation parts (camera seed 10,000 + seed), at ``steps`` env steps.

    :param calibrate: also score them at the ok bias chosen on this many other parts
        (:func:`calibrated_eval`; 0: not).
    """
    from inspector.train.evaluate import metrics, run_parts
    from inspector.train.torch_policy import TorchPolicy

    pol = TorchPolicy(model, meta)
    camera = {**current().camera, "seed": 10_000 + seed}
    labels, decisions, _ = run_parts(pol, "synthetic", camera, parts)
    m = metrics(meta.classes, meta.classes[0], labels, decisions)
    point = {
        "steps": steps,
        "accuracy": m["accuracy"],
        "per_class_recall": m["per_class_recall"],
        "mean_steps": m["mean_steps"],
        "native_share": m["native_share"],
    }
    if calibrate:
        point["calibrated"] = calibrated_eval(pol, seed, calibrate, labels, decisions)
    return point


def calibrated_eval(policy, seed: int, parts: int, labels, decisions) -> dict:
    """The evaluation parts' figures at the ok bias chosen on ``parts`` other parts.

    The bias is what ``inspector calibrate`` (balanced objective) would store for this
    model: chosen on labelled parts drawn with another seed than the evaluation parts
    (``20_000 + seed``), then applied to the evaluation parts' decisions. The bias only
    moves the final verdict, not the search, so the evaluation episodes need not be
    run again.

    :param labels: the evaluation parts' true classes; ``decisions``: their decisions
        at bias 0 (:func:`inspector.train.evaluate.run_parts`).
    :returns: ``ok_bias``, ``accuracy`` and ``per_class_recall`` at that bias.
    """
    from inspector.policy.operating_point import choose_bias, verdicts_at
    from inspector.train.evaluate import decision_probabilities, part_probabilities

    meta = policy.meta
    probs, y = part_probabilities(
        policy, "synthetic", {**current().camera, "seed": 20_000 + seed}, parts
    )
    bias, _ = choose_bias(probs, y, meta.outcome_matrix, "balanced")
    idx = {c: i for i, c in enumerate(meta.classes)}
    p_eval, truth = decision_probabilities(meta.classes, labels, decisions)
    v = verdicts_at(p_eval, meta.outcome_matrix, np.array([bias]))[0]
    recall = {c: float((v[truth == i] == i).mean()) if (truth == i).any() else None
              for c, i in idx.items()}  # fmt: skip
    return {"ok_bias": bias, "accuracy": float((v == truth).mean()), "per_class_recall": recall}
