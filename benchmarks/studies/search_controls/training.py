"""The quadrants task, the reward arms and one resumable training run that keeps its model.

The task is learning_efficiency's ``quadrants`` preset (kept here as a copy, so this
study does not depend on another study's module while benchmarks/ is restructured):
128x128 synthetic panels, 1-px points capped to be invisible in the 32-px overview,
a shallow pixel grid (0.25), 64-px glimpses and 2 zoom levels (the native level is 4
cells of 64x64), a 16-step budget.

Every arm trains the full stack: perception pretraining on mask-labelled native crops,
cloning of the scripted teacher, then HybridPPO with the hybrid loss (0.7 PPO, 0.2
verdict cross-entropy, 0.1 KL to the teacher). Arms differ only in the reward
(:data:`ARMS`); the step-cost lever changes only ``step_cost`` of the ``exp`` arm.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.studies.shared import learn_with_curve

ROOT = harness.ROOT

#: learning_efficiency's ``quadrants`` task (camera parameters, glimpse, zoom levels, budget).
CAMERA = {"size": 128, "invisible_at": 32, "point_size": (1, 1), "grid": 0.25}
GLIMPSE = 64
ZOOM_LEVELS = 2
STEP_BUDGET = 16
#: The camera seed of the parts each run is evaluated on (learning_efficiency's), and of
#: the parts an operating point is chosen on (never trained or reported on).
TEST_SEED_BASE = 10_000
VAL_SEED_BASE = 20_000

#: Section 2's arms: name -> what the reward is. All share pretraining, cloning, CE and KL.
ARMS = {
    "outcome": "outcome terms only (sparse: verdict values at the end)",
    "process": "+ process terms (focus_defect, step_cost)",
    "exp": "+ exponential redistribution (lambda 0.15, window 20)",
    "learned": "+ learned redistribution (in place of exponential)",
    "shaping": "+ potential shaping (focus_quality, scale 0.5) on top of exp",
    "shuffled": "+ shuffled redistribution (control, in place of exponential)",
}
#: The step costs of the step-cost lever (the exp arm's profile; lcd_panel.yaml has 0.01).
STEP_COSTS = (0.0, 0.01, 0.03, 0.1, 0.3)
HYBRID = {"w_rl": 0.7, "w_sl": 0.2, "w_kd": 0.1, "teacher": "scripted"}


def profile_for(arm: str, step_cost: float | None = None):
    """The task's profile for ``arm`` (lcd_panel.yaml's terms, the task's scan and budget).

    :param step_cost: the ``step_cost`` term's cost (positive number, paid as a negative
        reward every step); None keeps the profile's 0.01.
    """
    from inspector import PROCESS
    from inspector.profile import RedistributionConfig, ShapingConfig, load_profile

    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")
    base = load_profile(str(ROOT / "reward_profiles" / "lcd_panel.yaml"))
    scan = dataclasses.replace(base.scan, glimpse=GLIMPSE, zoom_levels=ZOOM_LEVELS)
    prof = dataclasses.replace(base, step_budget=STEP_BUDGET, scan=scan)
    method = {"exp": "exponential", "shaping": "exponential"}.get(arm, arm)
    if arm in ("outcome", "process"):
        method = "none"
    rrm = dataclasses.replace(
        prof.rrm, redistribution=RedistributionConfig(method=method, lam=0.15, window=20)
    )
    if arm == "shaping":
        rrm = dataclasses.replace(rrm, shaping=ShapingConfig(potential="focus_quality", scale=0.5))
    terms = prof.terms
    if arm == "outcome":
        terms = tuple(t for t in terms if t.channel != PROCESS)
    if step_cost is not None:
        terms = tuple(
            dataclasses.replace(t, reward=-float(step_cost)) if t.term == "step_cost" else t
            for t in terms
        )
    return dataclasses.replace(prof, rrm=rrm, terms=terms)


def run_name(arm: str, seed: int, budget: int, step_cost: float | None = None) -> str:
    """File stem of a run: ``exp_s0_32768`` or ``exp_sc0.1_s0_32768``."""
    sc = "" if step_cost is None else f"_sc{step_cost:g}"
    return f"{arm}{sc}_s{seed}_{budget}"


def eval_point(policy: Any, seed: int, parts: int, steps: int) -> dict:
    """The product's ``eval`` metrics on the run's fixed test parts at ``steps``."""
    from inspector.train.evaluate import metrics, run_parts

    labels, decisions, _ = run_parts(
        policy, "synthetic", {**CAMERA, "seed": TEST_SEED_BASE + seed}, parts
    )
    m = metrics(policy.meta.classes, policy.meta.classes[0], labels, decisions)
    keep = ("accuracy", "per_class_recall", "defect_recall", "false_alarm_rate")
    keep += ("mean_steps", "mean_glimpses", "native_share", "pixel_fraction", "stopped_share")
    return {"steps": int(steps), **{k: m[k] for k in keep}}


def train_one(
    arm: str,
    seed: int,
    budget: int,
    out_dir: Path,
    *,
    perception: int = 8000,
    bc_samples: int = 8192,
    eval_every: int = 4096,
    eval_parts: int = 150,
    step_cost: float | None = None,
    n_envs: int = 4,
) -> dict:
    """Train one arm with one seed; save the model as ``out_dir/<run>.zip``.

    The supervised part (perception pretraining, cloning) is done once per seed and
    sizes and kept as ``out_dir/pretrained_s<seed>_<crops>_<cloned>.pt``; later runs of
    the seed load it (``pretrained_reused`` in the record; ``wall_s`` then excludes it).

    The pretraining's crops and cloned steps count as env steps of ``budget`` (as in
    learning_efficiency). The returned (and saved) record holds the evaluation curve on
    the run's fixed test parts and the wall time.
    """
    prof = profile_for(arm, step_cost)
    run = train_run(
        prof, seed, budget, out_dir, run_name(arm, seed, budget, step_cost), _pretrained_stack,
        perception=perception, bc_samples=bc_samples, eval_every=eval_every,
        eval_parts=eval_parts, n_envs=n_envs,
    )  # fmt: skip
    how = run.pop("stack")
    sc = step_cost if step_cost is not None else 0.01
    return {"arm": arm, "seed": seed, "budget": budget, "step_cost": sc, **run,
            "pretrained_reused": how}  # fmt: skip


def train_run(
    prof: Any,
    seed: int,
    budget: int,
    out_dir: Path,
    name: str,
    stack: Any,
    *,
    perception: int,
    bc_samples: int,
    eval_every: int,
    eval_parts: int,
    n_envs: int,
) -> dict:
    """The training every arm shares: build the model on ``prof``, give it its supervised
    stack (``stack(model, prof, camera, cfg, out_dir)``, whose answer is kept as
    ``stack``), PPO for the rest of ``budget`` with an evaluation curve, save
    ``out_dir/<name>.zip``.

    :returns: the record's shared fields: ``perception_samples``, ``bc_samples``,
        ``eval_parts``, ``hybrid``, ``curve``, ``wall_s``, and ``stack``.
    """
    import torch
    from stable_baselines3.common.utils import set_random_seed

    from inspector.train.config import TrainConfig

    torch.set_num_threads(1)
    camera = {**CAMERA, "seed": seed}
    n_pp, n_bc = min(perception, budget // 4), min(bc_samples, budget // 2)
    cfg = TrainConfig().replace(seed=seed, perception_samples=n_pp, bc_samples=n_bc)
    model, env = _make_model(prof, camera, cfg, n_envs)
    t0 = time.time()
    how = stack(model, prof, camera, cfg, out_dir)
    set_random_seed(seed)
    offset = n_pp + n_bc

    def evaluate(steps: int) -> dict:
        return eval_point(agent_policy(model, prof), seed, eval_parts, steps)

    curve = learn_with_curve(
        model, max(0, budget - offset), offset, eval_every, evaluate, [evaluate(offset)]
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{name}.tmp.zip"
    model.save(str(tmp), exclude=["teacher"])
    tmp.replace(out_dir / f"{name}.zip")
    env.close()
    return {
        "perception_samples": n_pp,
        "bc_samples": n_bc,
        "eval_parts": eval_parts,
        "hybrid": {k: HYBRID[k] for k in ("w_rl", "w_sl", "w_kd")},
        "curve": curve,
        "stack": how,
        "wall_s": time.time() - t0,
    }


def _make_model(prof: Any, camera: dict, cfg: Any, n_envs: int):
    """The hybrid PPO model of a run over ``n_envs`` synthetic envs: (model, vec env)."""
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.env import InspectionEnv
    from inspector.rrm.buffer import RRMRolloutBuffer
    from inspector.train.hybrid import HybridPPO
    from inspector.train.runner import ppo_kwargs

    seed = cfg.seed

    def make(i: int):
        def thunk():
            e = InspectionEnv(prof, "synthetic", camera, teacher=True)
            e.reset(seed=seed * 100 + i)
            return Monitor(e)

        return thunk

    env = DummyVecEnv([make(i) for i in range(n_envs)])
    n_actions = int(env.action_space.nvec[0])  # the profile's action table
    model = HybridPPO(
        "MultiInputPolicy",
        env,
        rollout_buffer_class=RRMRolloutBuffer,
        rollout_buffer_kwargs={"rrm": prof.rrm, "n_move_actions": n_actions, "seed": seed},
        **HYBRID,
        **ppo_kwargs(cfg, len(prof.classes)),
    )
    return model, env


def _pretrained_stack(model: Any, prof: Any, camera: dict, cfg: Any, out_dir: Path) -> bool:
    """Give ``model`` the seed's supervised stack; whether it was reused from disk.

    Every arm and step cost of a seed starts from the same supervised stack: the
    perception pretraining and cloning of the first run of that seed, kept beside the
    models (the rewards play no part in them).
    """
    import torch

    from inspector.train.runner import pretrain, pretrain_perception

    shared = out_dir / f"pretrained_s{cfg.seed}_{cfg.perception_samples}_{cfg.bc_samples}.pt"
    if shared.is_file():
        model.policy.load_state_dict(torch.load(shared, weights_only=True))
        return True
    if cfg.perception_samples:
        pretrain_perception(model, prof, "synthetic", camera, cfg)
    if cfg.bc_samples:
        pretrain(model, prof, "synthetic", camera, cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.policy.state_dict(), out_dir / f".{shared.name}.tmp")
    (out_dir / f".{shared.name}.tmp").replace(shared)
    return False


#: Saved results carry the configuration that produced them (:func:`harness.save_result`),
#: so a reader selects them by it.
STUDY = "search_controls"
#: What identifies a run (the keys of its record that make its configuration).
RUN_KEYS = ("arm", "seed", "budget", "step_cost", "perception_samples", "bc_samples")


def run_config(record: dict) -> dict:
    """The configuration of a training record (what was trained, how much)."""
    cfg = {"kind": "run", **{k: record[k] for k in RUN_KEYS}}
    cfg["eval_parts"] = record.get("eval_parts")
    return cfg


def save_result(path: Path, config: dict, result: dict) -> dict:
    """``result`` with its configuration under ``"benchmark"``, written atomically."""
    return harness.save_result(path, STUDY, config, result)


def agent_policy(model: Any, prof: Any):
    """The product's torch policy over a trained model (the profile's decision rule)."""
    from inspector.train.torch_policy import TorchPolicy, meta_for_model

    return TorchPolicy(model, meta_for_model(model, prof))


def load_agent(out_dir: Path, arm: str, seed: int, budget: int, step_cost: float | None = None):
    """A saved run's policy, or None when the run has not been trained yet."""
    from inspector.train.hybrid import HybridPPO

    path = out_dir / f"{run_name(arm, seed, budget, step_cost)}.zip"
    if not path.is_file():
        return None
    model = HybridPPO.load(str(path), device="cpu")
    return agent_policy(model, profile_for(arm, step_cost))
