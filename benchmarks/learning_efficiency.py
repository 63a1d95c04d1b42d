"""Learning efficiency on synthetic panels where points are invisible at overview resolution.

Arms (same env, network and PPO settings; only rewards / loss differ):

  a  sparse profile (+1 correct verdict) + plain SB3 PPO
  b  shaped process + outcome rewards (lcd_panel terms), no redistribution
  c  b + exponential redistribution (lambda 0.15, window 20)
  d  b + learned (RUDDER-style) redistribution
  e  full stack: c + hybrid loss (0.7 PPO / 0.2 CE on labels / 0.1 KL from the scripted teacher)
  f  control: b + shuffled redistribution
  g  control: a's sparse rewards through HybridPPO and the RRM buffer (the trainer of
     b-f, extra loss weights 0): separates what the rewards do from what the trainer does
     (only with ``--arms``, e.g. ``--arms abcdefgh``)
  h  control: b's outcome terms only (no process terms): do the process rewards or the
     profile's verdict values decide what (b) learns? (only with ``--arms``)

Metric: environment steps until evaluation accuracy (deterministic policy, fixed
evaluation parts, budget-capped) first reaches the target (90 %); median and spread
over seeds. Also final accuracy, per-class recall, mean steps per part and the share
of glimpses at native resolution (a policy that never focuses cannot find points).

With ``--calibrate N`` each evaluation is also scored at the ok bias chosen on N other
labelled parts, as ``inspector calibrate`` would store it: a model whose verdicts lean
to one class shows there whether it separates the classes at all.

Two tasks (``--task``, see :data:`TASKS`): ``quadrants`` (default) and ``grid16`` (the
first, on which no arm learned: the default glimpse CNN cannot tell a 1-px point from
the full-depth pixel grid, and a search of 16 native cells caps accuracy at ~0.93).

Each (arm, seed) result is saved under benchmarks/results/learning_efficiency/ so an
interrupted run resumes where it stopped.

    python -m benchmarks.learning_efficiency --quick      # < 10 min on 2 cores
    python -m benchmarks.learning_efficiency              # 5 seeds, full budget
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._report import table, write_section  # noqa: E402
from inspector.commands._args import non_negative_int  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "learning_efficiency"


@dataclasses.dataclass(frozen=True)
class Task:
    """One synthetic inspection task: the camera and how the agent may look at it.

    Both tasks: 128x128 panels, 1-px points whose contrast is capped so that they are
    invisible in the 32-px overview (``invisible_at=32``): finding them needs a glimpse
    at native resolution, and a search, since the overview does not say where.
    """

    name: str
    camera: dict
    glimpse: int
    zoom_levels: int
    step_budget: int
    about: str


TASKS = {
    # The default since 2026-12-05. A shallow pixel grid (grid 0.25) lets the default
    # glimpse CNN tell a 1-px point from the texture at native resolution (supervised
    # probe: 0.99 held out, against 0.50-0.58 on the full grid); 64-px glimpses make the
    # native level 4 cells, so a complete search takes ~6 steps (teacher: 5.7, ceiling
    # 1.00) and the question is what the rewards teach, not whether 1-px points on an
    # LCD grid can be seen by a small CNN.
    "quadrants": Task(
        "quadrants",
        {"size": 128, "invisible_at": 32, "point_size": (1, 1), "grid": 0.25},
        glimpse=64,
        zoom_levels=2,
        step_budget=16,
        about="shallow pixel grid (`grid=0.25`), glimpse 64, 2 zoom levels: the native level"
        " is 4 cells of 64x64",
    ),
    # The first task (until 2026-12-05): full-depth grid, 32-px glimpses, 3 zoom levels.
    # A 1-px point is invisible at the first zoom level too (the searching teacher finds
    # 1 % of points there), so a part needs a search of 16 native cells: 12 steps cap any
    # search at ~0.82 accuracy, 24 allow ~0.93 (see `search_ceiling`).
    "grid16": Task(
        "grid16",
        {"size": 128, "invisible_at": 32, "point_size": (1, 1)},
        glimpse=32,
        zoom_levels=3,
        step_budget=24,
        about="full-depth pixel grid, glimpse 32, 3 zoom levels (reward_profiles/lcd_panel.yaml"
        " scan): the native level is 16 cells of 32x32",
    ),
}
DEFAULT_TASK = "quadrants"
#: The task in use (:func:`use_task`); the functions below read these.
TASK = TASKS[DEFAULT_TASK]
CAMERA = TASK.camera
STEP_BUDGET = TASK.step_budget
GLIMPSE = TASK.glimpse


def use_task(name: str) -> Task:
    """Make ``name`` the task every function of this module works on."""
    global TASK, CAMERA, STEP_BUDGET, GLIMPSE
    TASK = TASKS[name]
    CAMERA, STEP_BUDGET, GLIMPSE = TASK.camera, TASK.step_budget, TASK.glimpse
    return TASK


def results_dir(mode: str) -> Path:
    """Where the task's runs are saved (the first task kept the plain mode name)."""
    return RESULTS / (mode if TASK.name == "grid16" else f"{mode}_{TASK.name}")


#: ``--balanced-verdict``: weight of the teacher's stop steps in the class-balanced
#: verdict cross-entropy (the stop steps are ~7 % of the cloned samples).
BALANCED_STOP_WEIGHT = 8.0
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
        scan = dataclasses.replace(prof.scan, glimpse=GLIMPSE, zoom_levels=TASK.zoom_levels)
        return dataclasses.replace(prof, step_budget=STEP_BUDGET, scan=scan)

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
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from inspector.env import InspectionEnv
    from inspector.rrm.buffer import RRMRolloutBuffer
    from inspector.scan import ACTIONS
    from inspector.train.config import TrainConfig
    from inspector.train.evaluate import metrics, run_parts
    from inspector.train.hybrid import HybridPPO
    from inspector.train.runner import ppo_kwargs, pretrain, pretrain_perception
    from inspector.train.torch_policy import TorchPolicy, meta_for_model

    torch.set_num_threads(1)
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
    teacher = hybrid.get("teacher") == "scripted"

    def make(i):
        def thunk():
            from stable_baselines3.common.monitor import Monitor

            e = InspectionEnv(prof, "synthetic", {**CAMERA, "seed": seed}, teacher=teacher)
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
    meta = meta_for_model(model, prof)
    curve = []
    # The full stack pretrains its perception and clones the scripted teacher first
    # (the training runner's own steps); those crops and env steps count.
    n_pp = min(perception, budget // 4) if arm == "e" else 0
    n_bc = min(cfg.bc_samples, budget // 2) if arm == "e" else 0
    frozen = bool(freeze_perception and n_pp)
    run_cfg = cfg.replace(
        seed=seed, perception_samples=n_pp, bc_samples=n_bc, perception_freeze=frozen
    )
    camera = {**CAMERA, "seed": seed}
    t0 = time.time()  # the pretraining is part of the run's time, as of its steps
    if n_pp:
        pretrain_perception(model, prof, "synthetic", camera, run_cfg)
    if n_bc:
        pretrain(model, prof, "synthetic", camera, run_cfg)
    offset = n_pp + n_bc

    class Eval(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next = offset + eval_every

        def _on_rollout_start(self) -> None:
            if self.num_timesteps + offset >= self.next:
                self.next += eval_every
                curve.append(do_eval(self.num_timesteps))

        def _on_step(self) -> bool:
            return True

    def do_eval(steps):
        pol = TorchPolicy(model, meta)
        labels, decisions, _ = run_parts(
            pol, "synthetic", {**CAMERA, "seed": 10_000 + seed}, eval_parts
        )
        m = metrics(meta.classes, meta.classes[0], labels, decisions)
        point = {
            "steps": int(steps) + offset,
            "accuracy": m["accuracy"],
            "per_class_recall": m["per_class_recall"],
            "mean_steps": m["mean_steps"],
            "native_share": m["native_share"],
        }
        if calibrate:
            point["calibrated"] = calibrated_eval(pol, seed, calibrate, labels, decisions)
        return point

    if offset:
        curve.append(do_eval(0))
    model.learn(budget - offset, callback=Eval())
    curve.append(do_eval(model.num_timesteps))
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
    probs, y = part_probabilities(policy, "synthetic", {**CAMERA, "seed": 20_000 + seed}, parts)
    bias, _ = choose_bias(probs, y, meta.outcome_matrix, "balanced")
    idx = {c: i for i, c in enumerate(meta.classes)}
    p_eval, truth = decision_probabilities(meta.classes, labels, decisions)
    v = verdicts_at(p_eval, meta.outcome_matrix, np.array([bias]))[0]
    recall = {c: float((v[truth == i] == i).mean()) if (truth == i).any() else None
              for c, i in idx.items()}  # fmt: skip
    return {"ok_bias": bias, "accuracy": float((v == truth).mean()), "per_class_recall": recall}


def search_ceiling(parts: int, seed: int = 0) -> dict:
    """Accuracy of the non-privileged searching teacher with a perfect verdict once in sight.

    It searches the native grid and declares the true class as soon as the defect is in
    sight, ``ok`` when the budget ends first: what a policy that searches like it and
    never misjudges a glimpse would reach. No learning involved; it says whether the
    task's target is reachable at all within the step budget.
    """
    from inspector.env import InspectionEnv
    from inspector.teacher import ScriptedTeacher

    prof, _, _ = arm_setup("b")
    camera = {**CAMERA, "seed": 10_000 + seed}
    env = InspectionEnv(prof, "synthetic", camera, teacher=ScriptedTeacher(fallback=False))
    hits: dict[str, list[bool]] = {c: [] for c in env.classes}
    steps = []
    for ep in range(parts):
        _, info = env.reset(seed=ep)
        label, a, v = info["label"], info["teacher"], info["teacher_verdict"]
        while True:
            _, _, term, trunc, info = env.step([a, v])
            if term or trunc:
                break
            a, v = info["teacher_next"], info["teacher_verdict_next"]
        hits[env.classes[label]].append(bool(info["correct"]))
        steps.append(info["steps"])
    recall = {c: float(np.mean(h)) if h else None for c, h in hits.items()}
    return {
        "accuracy": float(np.mean([h for hs in hits.values() for h in hs])),
        "per_class_recall": recall,
        "mean_steps": float(np.mean(steps)),
    }


def verdict_payoffs(arm: str, parts: int = 300, seed: int = 0) -> dict:
    """What each verdict earns when declared at the first step, per true class (no learning).

    The same parts are replayed once per verdict; rewards are the environment's (before
    redistribution and normalisation). From the matrix follow the payoff of any policy
    that decides from the overview alone: a constant verdict, or line vs the rest.

    :returns: ``classes``, ``prior`` (share of each class among the parts) and ``matrix``
        [true class][verdict] of mean rewards.
    """
    from inspector.env import InspectionEnv
    from inspector.scan import STOP

    prof, _, _ = arm_setup(arm)
    env = InspectionEnv(prof, "synthetic", {**CAMERA, "seed": 30_000 + seed})
    k = len(env.classes)
    total, count = np.zeros((k, k)), np.zeros(k)
    for ep in range(parts):
        for v in range(k):
            _, info = env.reset(seed=ep)
            _, r, _, _, _ = env.step([STOP, v])
            total[info["label"], v] += r
        count[info["label"]] += 1
    return {
        "classes": list(env.classes),
        "prior": (count / count.sum()).tolist(),
        "matrix": (total / np.maximum(count, 1)[:, None]).tolist(),
    }


def payoff_note(payoffs: dict[str, dict]) -> str:
    """One note: the expected reward per part of overview-only policies under each profile."""
    parts = []
    for arm, p in payoffs.items():
        m, prior, cls = np.asarray(p["matrix"]), np.asarray(p["prior"]), p["classes"]
        const = prior @ m  # expected reward of each constant verdict
        li = cls.index("line")
        # Line told from the rest on the overview, the rest called whichever pays more.
        rest = [i for i in range(len(cls)) if i != li]
        line_rest = prior[li] * m[li, li] + max(sum(prior[i] * m[i, v] for i in rest) for v in rest)
        best = int(np.argmax(const))
        parts.append(
            f"({arm}) constant "
            + " / ".join(f"{c} {const[i]:+.2f}" for i, c in enumerate(cls))
            + f" (best: {cls[best]}), line vs the rest {line_rest:+.2f}, every part right"
            f" {float(prior @ np.diag(m)):+.2f}"
        )
    return (
        "Verdict payoffs (`verdict_payoffs`: each verdict declared at the first step on the"
        " same 300 parts, the environment's rewards before redistribution and normalisation;"
        " what a policy that decides from the overview alone can earn): " + "; ".join(parts) + "."
    )


def _grid_residual(gray: np.ndarray) -> np.ndarray:
    """``|pixel - median of the four pixels one grid pitch away|``, at the frame's pitch.

    The synthetic panels have a periodic pixel grid (pitch 3, 4 or 5); the pitch is
    taken as the one that predicts the frame best, so nothing privileged is used.
    """
    from camera_drivers.synthetic import _PITCHES

    g = gray.astype(np.float32)
    best: tuple[float, np.ndarray] | None = None
    for p in sorted(set(_PITCHES)):
        pred = np.stack([np.roll(g, p, 1), np.roll(g, -p, 1), np.roll(g, p, 0), np.roll(g, -p, 0)])
        r = np.abs(g - np.median(pred, axis=0))
        if best is None or float(r.mean()) < best[0]:
            best = (float(r.mean()), r)
    assert best is not None
    return best[1]


def point_visibility(frames: int = 600, seed: int = 0, false_alarm: float = 0.05) -> dict:
    """How visible a point is at native resolution, with no learning: two fixed detectors.

    Each scores a native glimpse (the task's glimpse size) by its largest residual: ``|pixel -
    median3x3(pixel)|`` (local), or the residual against the pixels one grid pitch away
    (:func:`_grid_residual`, which knows the panel has a periodic grid). Glimpses around
    a point are compared with glimpses of ok panels, thresholded at ``false_alarm`` of
    the ok ones. The search ceiling assumes a perfect verdict once a point is in sight;
    this says what a simple detector gets.
    """
    import cv2

    from inspector.camera import open_camera

    cam = open_camera("synthetic", {**CAMERA, "seed": 10_000 + seed})
    scores: dict[str, dict[str, list[float]]] = {
        k: {"ok": [], "point": []} for k in ("local", "grid")
    }
    for i in range(frames):
        f = cam.load(i)
        if f.truth is None or f.truth.label not in ("ok", "point"):
            continue
        gray = f.gray
        res = {
            "local": np.abs(gray.astype(np.int16) - cv2.medianBlur(gray, 3).astype(np.int16)),
            "grid": _grid_residual(gray),
        }
        s, g, h = gray.shape[0], GLIMPSE, GLIMPSE // 2
        if f.truth.label == "point":
            corners = [
                (min(max(8, b.y0 - h), s - g - 8), min(max(8, b.x0 - h), s - g - 8))
                for b in f.truth.boxes
            ]
        else:
            corners = [(s // 2 - h, s // 2 - h)]
        for k, r in res.items():
            for y0, x0 in corners:
                scores[k][f.truth.label].append(float(r[y0 : y0 + g, x0 : x0 + g].max()))
    out: dict = {"false_alarm": false_alarm, "points": len(scores["local"]["point"])}
    for k, sc in scores.items():
        thr = float(np.percentile(sc["ok"], 100 * (1 - false_alarm)))
        out[k] = {
            "ok_max_median": float(np.median(sc["ok"])),
            "point_max_median": float(np.median(sc["point"])),
            "recall": float(np.mean(np.asarray(sc["point"]) > thr)),
        }
    return out


def perception_probe(
    samples: int = 12_000, epochs: int = 12, seed: int = 0, variants: tuple = ("fast", "fine")
) -> dict:
    """Held-out accuracy of the glimpse CNN, trained supervised, on point-vs-ok glimpses.

    Native crops (the task's glimpse size) of the training panels: one around each
    point (at a random offset) and two at random places of each ok panel; 80 % train,
    20 % held out. Both :class:`~inspector.train.network.GlimpseCNN` variants, a linear
    head, Adam 2e-3.
    It separates "can the network see a point at all" from "does RL teach it to".
    """
    import torch
    from torch import nn

    from inspector.camera import open_camera
    from inspector.train.network import GlimpseCNN, standardise

    torch.manual_seed(seed)
    cam = open_camera("synthetic", {**CAMERA, "seed": seed})
    rng = np.random.default_rng(seed)
    xs, ys, i = [], [], 0
    size, g = CAMERA["size"], GLIMPSE
    while len(xs) < samples:
        f = cam.load(i)
        i += 1
        img = f.gray
        if f.truth is None:
            continue
        if f.truth.label == "point":
            for b in f.truth.boxes:
                x0 = int(np.clip(b.x0 - rng.integers(0, g), 0, size - g))
                y0 = int(np.clip(b.y0 - rng.integers(0, g), 0, size - g))
                xs.append(img[y0 : y0 + g, x0 : x0 + g])
                ys.append(1)
        elif f.truth.label == "ok":
            for _ in range(2):
                x0, y0 = (int(v) for v in rng.integers(0, size - g + 1, size=2))
                xs.append(img[y0 : y0 + g, x0 : x0 + g])
                ys.append(0)
    x = torch.tensor(np.stack(xs)).float().unsqueeze(1)
    y = torch.tensor(ys)
    perm = torch.randperm(len(y))
    train, test = perm[: int(0.8 * len(y))], perm[int(0.8 * len(y)) :]
    out = {"samples": len(y)}
    for name in variants:
        fine = name == "fine"
        cnn = GlimpseCNN(8, fine=fine)
        head = nn.Linear(cnn.out_dim, 2)
        opt = torch.optim.Adam([*cnn.parameters(), *head.parameters()], lr=2e-3)
        for _ in range(epochs):
            order = train[torch.randperm(len(train))]
            for s in range(0, len(order), 128):
                b = order[s : s + 128]
                loss = nn.functional.cross_entropy(head(cnn(standardise(x[b]))), y[b])
                opt.zero_grad()
                loss.backward()
                opt.step()
        with torch.no_grad():
            pred = head(cnn(standardise(x[test]))).argmax(1)
        out[name] = {
            "accuracy": float((pred == y[test]).float().mean()),
            "recall": float((pred[y[test] == 1] == 1).float().mean()),
            "false_alarm": float((pred[y[test] == 0] == 1).float().mean()),
        }
    return out


def control_notes(results: list[dict]) -> list[str]:
    """Each control arm's final accuracy beside the arm it changes one thing of."""
    final = {
        arm: float(np.median([r["curve"][-1]["accuracy"] for r in results if r["arm"] == arm]))
        for arm in {r["arm"] for r in results}
    }
    pairs = (
        ("g", "a", "(a)'s sparse rewards through (b)'s trainer (HybridPPO, RRM buffer)"),
        ("h", "b", "(b)'s profile without its process terms (focus_defect, step_cost)"),
    )
    return [
        f"Control ({c}), {what}: final accuracy {final[c]:.3f} (median), ({base})"
        f" {final[base]:.3f}."
        for c, base, what in pairs
        if c in final and base in final
    ]


def ratio_notes(med: dict, reached: dict, target: float, budget: int) -> list[str]:
    """What the runs say about the step ratios (e) vs (a) and (e) vs (b).

    :param med: median steps to the target per arm (runs that missed count as the budget).
    :param reached: per arm, whether any run reached the target.
    :returns: one note per ratio that the saved arms allow.
    """
    notes = []
    if "e" not in med:
        return notes
    for base, goal in (("a", " (goal: 8x)"), ("b", "")):
        if base not in med:
            continue
        name = f"Full stack (e) vs {ARMS[base].split(' (')[0].split(' +')[0]} ({base})"
        if not reached["e"]:
            notes.append(
                f"{name}: undefined, (e) reached {target:.0%} in no run within {budget:,} steps."
            )
        elif not reached[base]:
            floor = budget / max(1.0, med["e"])
            notes.append(
                f"{name}: ({base}) reached {target:.0%} in no run within {budget:,} steps, so"
                f" (e) needs at least {floor:.1f}x fewer steps{goal} (a lower bound:"
                f" {budget:,} / the median of (e), {med['e']:,.0f})."
            )
        else:
            notes.append(
                f"{name}: {med[base] / max(1.0, med['e']):.2f}x fewer steps{goal} (medians; runs"
                " that missed count as the budget, which makes a ratio over them a lower bound)."
            )
    return notes


def long_baseline_notes(
    out_dir: Path, budget: int, target: float, med_e: float | None
) -> list[str]:
    """Notes on arm (a) runs saved with a larger budget than the table's (``--arms a
    --budget N``): whether sparse PPO reaches the target given more steps, and what that
    says about the ratio to the full stack's median ``med_e``."""
    notes = []
    for path in sorted(out_dir.glob(f"a_*_b{STEP_BUDGET}.json")):
        parts = path.stem.split("_")  # a, seed, budget, bN
        if len(parts) != 4 or not parts[2].isdigit() or int(parts[2]) <= budget:
            continue
        r = json.loads(path.read_text())
        n, curve = int(parts[2]), r["curve"]
        hit = steps_to(curve, target)
        last = curve[-1]
        best = max(c["accuracy"] for c in curve)
        rc = last["per_class_recall"]
        text = (
            f"Sparse PPO (a) given {n:,} steps (seed {r['seed']}, `--seeds {r['seed'] + 1}"
            f" --budget {n} --arms a`): "
        )
        if hit is None:
            text += f"never reached {target:.0%} (best {best:.3f}, final {last['accuracy']:.3f}"
        else:
            text += f"reached {target:.0%} at {hit:,} steps (final {last['accuracy']:.3f}"
        text += (
            ", recall ok / line / point "
            + " / ".join(f"{rc.get(c) or 0:.2f}" for c in ("ok", "line", "point"))
            + f", {last['mean_steps']:.1f} steps/part, native share {last['native_share']:.2f})"
        )
        if med_e:
            ratio = (hit if hit is not None else n) / max(1.0, med_e)
            text += (
                f": {'' if hit is not None else 'at least '}{ratio:.1f}x the full stack's"
                f" median steps ({med_e:,.0f}; goal 8x)"
            )
        notes.append(text + ".")
    return notes


def _accuracy(point: dict, calibrated: bool = False) -> float | None:
    """One evaluation's accuracy; with ``calibrated``, at the calibrated ok bias
    (:func:`calibrated_eval`; None for an evaluation without it)."""
    return (point.get("calibrated") or {}).get("accuracy") if calibrated else point["accuracy"]


def _calibrated(curve: list[dict]) -> list[float]:
    """The accuracies at the calibrated ok bias of the evaluations that have one."""
    return [a for c in curve if (a := _accuracy(c, True)) is not None]


def steps_to(curve: list[dict], target: float, calibrated: bool = False) -> int | None:
    """First evaluated step count with accuracy >= target, else None.

    :param calibrated: use the accuracy at the calibrated ok bias (evaluations without
        it never count).
    """
    for c in curve:
        acc = _accuracy(c, calibrated)
        if acc is not None and acc >= target:
            return c["steps"]
    return None


def _outcomes(rs: list[dict], target: float, budget: int):
    """Per run: steps to ``target`` (None if never), the same capped at ``budget``, the
    final evaluation; and the final per-class recall averaged over the runs."""
    hits = [steps_to(r["curve"], target) for r in rs]
    capped = [h if h is not None else budget for h in hits]
    final = [r["curve"][-1] for r in rs]
    recall = {
        c: float(np.mean([f["per_class_recall"].get(c) or 0.0 for f in final]))
        for c in ("ok", "line", "point")
    }
    return hits, capped, final, recall


def summarise(results: list[dict], target: float, budget: int) -> tuple[str, dict]:
    rows, med = [], {}
    for arm, name in ARMS.items():
        rs = [r for r in results if r["arm"] == arm]
        if not rs:
            continue
        hits, capped, final, recall = _outcomes(rs, target, budget)
        med[arm] = float(np.median(capped))
        rows.append(
            [
                f"({arm}) {name}",
                len(rs),
                f"{np.median(capped):,.0f}"
                + ("" if all(h is not None for h in hits) else " (cap)"),
                f"{min(capped):,}-{max(capped):,}",
                f"{sum(h is not None for h in hits)}/{len(rs)}",
                f"{np.median([f['accuracy'] for f in final]):.3f}",
                " / ".join(f"{recall[c]:.2f}" for c in ("ok", "line", "point")),
                f"{np.mean([f['mean_steps'] for f in final]):.1f}",
                f"{np.mean([f['native_share'] for f in final]):.2f}",
            ]
        )
    header = [
        "arm",
        "seeds",
        f"median steps to {target:.0%}",
        "range",
        "reached",
        "final acc (median)",
        "recall ok / line / point",
        "mean steps/part",
        "native share",
    ]
    return table(header, rows), med


def describe_variant(tag: str) -> str:
    """Words for a saved run's file-name tag (``_bc16384_fine_pp8000`` ...)."""
    words = []
    for tok in [t for t in tag.split("_") if t]:
        if tok.startswith("bc"):
            words.append(f"clones {int(tok[2:]):,} teacher steps")
        elif tok == "fine":
            words.append("full-resolution glimpse CNN")
        elif tok == "bal":
            words.append(f"balanced verdict loss (stop weight {BALANCED_STOP_WEIGHT:g})")
        elif tok.startswith("w") and tok[1:2].isdigit():
            words.append("hybrid weights " + tok[1:].replace("-", " / "))
        elif tok == "frz":
            words.append("glimpse CNN frozen after it")
        elif tok.startswith("cw"):
            words.append(f"critic warm-up {int(tok[2:]):,} PPO steps")
        elif tok == "ev":
            words.append("per-glimpse evidence head")
        elif tok == "ov":
            words.append("evidence on the overview")
        elif tok.startswith("cal") and tok[3:].isdigit():
            words.append(f"ok bias calibrated on {int(tok[3:])} other parts")
        elif tok == "ms":
            words.append("crops from every zoom level")
        elif tok.startswith("m") and tok[1:].isdigit():
            words.append(f"{int(tok[1:])} remembered glimpses")
        elif tok.startswith("pp"):
            words.append(f"perception pretraining on {int(tok[2:]):,} crops")
        else:
            words.append(tok)
    if words:
        return ", ".join(words)
    from inspector.train.config import TrainConfig

    return f"TrainConfig defaults (clones {TrainConfig().bc_samples:,} teacher steps)"


def variants_table(out_dir: Path, budget: int, target: float) -> tuple[str, list[dict]]:
    """Every saved configuration of the full stack (e) at ``budget``: one row each.

    The arm table compares the arms under one configuration; this one keeps the
    experiments on the full stack itself side by side (its perception, its loss), each
    with the seeds it has. Columns as in the arm table, plus the accuracy right after
    the pretraining (before any PPO step) and the best accuracy seen.
    """
    groups: dict[str, list[dict]] = {}
    prefix = "e_"
    stem_end = f"_{budget}_b{STEP_BUDGET}"
    for path in sorted(out_dir.glob(f"{prefix}*{stem_end}*.json")):
        seed_part, _, tag = path.stem[len(prefix) :].partition(stem_end)
        if not seed_part.isdigit():
            continue
        groups.setdefault(tag, []).append(json.loads(path.read_text()))
    rows, out = [], []
    for tag, rs in sorted(groups.items(), key=lambda kv: (len(kv[0]), kv[0])):
        hits, capped, final, recall = _outcomes(rs, target, budget)
        first = [r["curve"][0] for r in rs if r.get("bc_samples") or r.get("perception_samples")]
        row = {
            "variant": describe_variant(tag),
            "seeds": sorted(r["seed"] for r in rs),
            "median_steps": float(np.median(capped)),
            "reached": sum(h is not None for h in hits),
            "after_pretraining": float(np.median([f["accuracy"] for f in first]))
            if first
            else None,
            "best": float(np.median([max(c["accuracy"] for c in r["curve"]) for r in rs])),
            "final": float(np.median([f["accuracy"] for f in final])),
        }
        if all(r.get("calibrate_parts") for r in rs):
            cal = [steps_to(r["curve"], target, calibrated=True) for r in rs]
            row["calibrated"] = {
                "median_steps": float(np.median([h if h is not None else budget for h in cal])),
                "reached": sum(h is not None for h in cal),
                "best": float(np.median([max(_calibrated(r["curve"])) for r in rs])),
                "final": float(np.median([_accuracy(f, True) for f in final])),
            }
        cal_row = row.get("calibrated")
        out.append(row)
        rows.append(
            [
                row["variant"],
                ",".join(str(v) for v in row["seeds"]),
                f"{row['median_steps']:,.0f}" + ("" if row["reached"] == len(rs) else " (cap)"),
                f"{row['reached']}/{len(rs)}",
                "-" if row["after_pretraining"] is None else f"{row['after_pretraining']:.3f}",
                f"{row['best']:.3f}",
                f"{row['final']:.3f}",
                " / ".join(f"{recall[c]:.2f}" for c in ("ok", "line", "point")),
                f"{np.mean([f['mean_steps'] for f in final]):.1f}",
                f"{np.mean([f['native_share'] for f in final]):.2f}",
                "-"
                if cal_row is None
                else f"{cal_row['median_steps']:,.0f}"
                + ("" if cal_row["reached"] == len(rs) else " (cap)")
                + f", {cal_row['reached']}/{len(rs)}"
                + f", {cal_row['best']:.3f}, {cal_row['final']:.3f}",
            ]
        )
    header = [
        "full stack (e) variant",
        "seeds",
        f"median steps to {target:.0%}",
        "reached",
        "acc after pretraining (median)",
        "best acc (median)",
        "final acc (median)",
        "final recall ok / line / point",
        "mean steps/part",
        "native share",
        f"calibrated ok bias: steps to {target:.0%}, reached, best, final acc (median)",
    ]
    return (table(header, rows) if rows else ""), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 seed, small budget (< 10 min)")
    ap.add_argument(
        "--task",
        choices=sorted(TASKS),
        default=DEFAULT_TASK,
        help=f"which synthetic task (default {DEFAULT_TASK}; grid16: the first, harder one)",
    )
    ap.add_argument("--seeds", type=int, help="seeds per arm (default 5, quick 1)")
    ap.add_argument(
        "--only-seeds",
        help="comma-separated seeds to train in this process (e.g. 1,2: run two processes"
        " side by side); the report covers every saved seed of --seeds",
    )
    ap.add_argument(
        "--budget", type=int, help="env steps per run (default 30000; quick 4096, 6144 on grid16)"
    )
    ap.add_argument(
        "--arms",
        default=MAIN_ARMS,
        help=f"which arms to run (default {MAIN_ARMS}; add g and h for the controls)",
    )
    ap.add_argument("--target", type=float, default=0.9, help="accuracy target (default 0.9)")
    ap.add_argument("--force", action="store_true", help="rerun results that exist")
    ap.add_argument(
        "--bc-samples",
        type=int,
        help="behaviour-cloning samples of arm (e) (default: TrainConfig's; at most budget/2)",
    )
    ap.add_argument(
        "--fine-cnn",
        action="store_true",
        help="the glimpse CNN's full-resolution variant (TrainConfig.cnn_fine) in every arm",
    )
    ap.add_argument(
        "--balanced-verdict",
        action="store_true",
        help="class-balanced, stop-weighted verdict cross-entropy in arm (e)"
        " (TrainConfig.verdict_balance / verdict_stop_weight)",
    )
    ap.add_argument(
        "--perception",
        type=non_negative_int,
        default=0,
        help="arm (e) first pretrains its glimpse CNN on this many mask-labelled native"
        " crops (TrainConfig.perception_samples; counted as env steps; at most budget/4)",
    )
    ap.add_argument(
        "--freeze-perception",
        action="store_true",
        help="arm (e): keep the glimpse CNN fixed after --perception pretraining"
        " (TrainConfig.perception_freeze)",
    )
    ap.add_argument(
        "--weights",
        help="arm (e): hybrid loss weights RL,SL,KD (default 0.7,0.2,0.1)",
    )
    ap.add_argument(
        "--critic-warmup",
        type=int,
        default=0,
        help="arm (e): PPO env steps at the start during which only the value function"
        " learns (TrainConfig.critic_warmup)",
    )
    ap.add_argument(
        "--memory",
        type=non_negative_int,
        default=0,
        help="glimpses the observation remembers, every arm (scan.memory; default: the"
        " profile's 4)",
    )
    ap.add_argument(
        "--evidence",
        action="store_true",
        help="every arm: the per-glimpse evidence head (TrainConfig.glimpse_evidence; arm"
        " (e) pretrains it with --perception)",
    )
    ap.add_argument(
        "--all-levels",
        action="store_true",
        help="arm (e): perception crops from every zoom level, not only native"
        " (TrainConfig.perception_levels: all; needs --perception)",
    )
    ap.add_argument(
        "--overview-evidence",
        action="store_true",
        help="every arm: the evidence head judges the overview too"
        " (TrainConfig.overview_evidence; needs --evidence)",
    )
    ap.add_argument(
        "--calibrate",
        type=non_negative_int,
        default=0,
        help="every arm: at each evaluation also score the evaluation parts at the ok bias"
        " chosen on this many other labelled parts (as `inspector calibrate` does; not"
        " training steps)",
    )
    ap.add_argument(
        "--report-only", action="store_true", help="write the table from the saved runs only"
    )
    args = ap.parse_args(argv)
    unknown = sorted(set(args.arms) - set(ARMS))
    if unknown or not args.arms:
        ap.error(f"--arms takes letters of {''.join(ARMS)}, got {args.arms!r}")
    if args.freeze_perception and not args.perception:
        ap.error("--freeze-perception needs --perception N (there is nothing pretrained to keep)")
    if args.all_levels and not args.perception:
        ap.error("--all-levels needs --perception N (it chooses where those crops come from)")
    if args.overview_evidence and not args.evidence:
        ap.error("--overview-evidence needs --evidence (the head it reuses)")
    weights = None
    if args.weights:
        try:
            weights = tuple(float(v) for v in args.weights.split(","))
        except ValueError:
            weights = ()
        if len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0:
            ap.error(f"--weights wants three non-negative numbers RL,SL,KD, got {args.weights!r}")
    seeds = args.seeds or (1 if args.quick else 5)
    use_task(args.task)
    # 64-px glimpses cost about three times the 32-px ones per step: a smaller quick budget.
    quick_budget = 6144 if TASK.name == "grid16" else 4096
    budget = args.budget or (quick_budget if args.quick else 30_000)
    eval_every = 1024 if args.quick else 2048
    eval_parts = 60 if args.quick else 150
    mode = "quick" if args.quick else "full"
    out_dir = results_dir(mode)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    only = {int(v) for v in args.only_seeds.split(",")} if args.only_seeds else None
    for seed in range(seeds):
        for arm in args.arms:
            tag = f"_bc{args.bc_samples}" if args.bc_samples is not None and arm == "e" else ""
            tag += "_fine" if args.fine_cnn else ""
            tag += "_bal" if args.balanced_verdict and arm == "e" else ""
            tag += f"_pp{args.perception}" if args.perception and arm == "e" else ""
            tag += "_ms" if args.all_levels and args.perception and arm == "e" else ""
            tag += "_frz" if args.freeze_perception and arm == "e" else ""
            if weights is not None and arm == "e":
                tag += "_w" + "-".join(f"{w:g}" for w in weights)
            tag += f"_cw{args.critic_warmup}" if args.critic_warmup and arm == "e" else ""
            tag += f"_m{args.memory}" if args.memory else ""
            tag += "_ev" if args.evidence else ""
            tag += "_ov" if args.overview_evidence else ""
            tag += f"_cal{args.calibrate}" if args.calibrate else ""
            path = out_dir / f"{arm}_{seed}_{budget}_b{STEP_BUDGET}{tag}.json"
            if path.exists() and not args.force:
                results.append(json.loads(path.read_text()))
                continue
            if args.report_only or (only is not None and seed not in only):
                continue
            print(f"arm {arm} seed {seed}: training {budget} steps", flush=True)
            r = run_one(arm, seed, budget, eval_every, eval_parts, n_envs=4,
                        bc_samples=args.bc_samples, fine_cnn=args.fine_cnn,
                        balanced_verdict=args.balanced_verdict,
                        perception=args.perception,
                        critic_warmup=args.critic_warmup,
                        freeze_perception=args.freeze_perception,
                        weights=weights, memory=args.memory,
                        evidence=args.evidence, all_levels=args.all_levels,
                        overview_evidence=args.overview_evidence,
                        calibrate=args.calibrate)  # fmt: skip
            path.write_text(json.dumps(r, indent=1))
            last = r["curve"][-1]
            print(
                f"  final accuracy {last['accuracy']:.3f}, native share {last['native_share']:.2f},"
                f" {r['wall_s']:.0f} s",
                flush=True,
            )
            results.append(r)
    if not results:
        print("no saved runs to report", file=sys.stderr)
        return 1
    seeds_done = {a: sum(r["arm"] == a for r in results) for a in args.arms}
    body, med = summarise(results, args.target, budget)
    ceiling = search_ceiling(eval_parts)
    vis = point_visibility()
    # The probe does not depend on the runs (minutes of training): kept like a run.
    epochs = 3 if args.quick else 12
    probe_path = out_dir / f"perception_probe_{epochs}ep.json"
    if probe_path.exists() and not args.force:
        probe = json.loads(probe_path.read_text())
    else:
        # The full-resolution CNN matters on the full-depth grid only (and costs minutes).
        probe = perception_probe(
            epochs=epochs, variants=("fast", "fine") if TASK.name == "grid16" else ("fast",)
        )
        probe_path.write_text(json.dumps(probe, indent=1))
    rc = ceiling["per_class_recall"]
    notes = [
        "",
        f"Task `{TASK.name}` (`--task {TASK.name}`): synthetic panels"
        f" {CAMERA['size']}x{CAMERA['size']}, 1-px points invisible at the"
        f" {CAMERA['invisible_at']}-px overview (`invisible_at={CAMERA['invisible_at']}`),"
        f" {TASK.about}; step budget {STEP_BUDGET}.",
        f"Search ceiling (no learning): the non-privileged searching teacher, declaring the"
        f" true class once the defect is in sight and ok otherwise, reaches accuracy"
        f" {ceiling['accuracy']:.3f} (recall ok / line / point "
        + " / ".join(f"{rc.get(c) or 0:.2f}" for c in ("ok", "line", "point"))
        + f", {ceiling['mean_steps']:.1f} steps/part) on {eval_parts} parts: the"
        f" {args.target:.0%} target is "
        + ("reachable" if ceiling["accuracy"] >= args.target else "NOT reachable")
        + " within the budget, for a searcher that never misjudges a glimpse.",
        f"Point visibility at native resolution (no learning; largest residual in a"
        f" {GLIMPSE}x{GLIMPSE} glimpse, {vis['points']} points, threshold at"
        f" {vis['false_alarm']:.0%} false alarms on ok glimpses): against the 3x3 median,"
        f" the median ok glimpse has a {vis['local']['ok_max_median']:.0f}-level residual"
        f" and {vis['local']['recall']:.0%} of points are found; against the pixels one grid"
        f" pitch away (a detector that models the grid) {vis['grid']['recall']:.0%}.",
        f"Perception probe (`perception_probe`: the glimpse CNN trained supervised on"
        f" {probe['samples']:,} native glimpses, point vs ok, 20 % held out): the default"
        f" CNN reaches {probe['fast']['accuracy']:.2f} held-out accuracy (point recall"
        f" {probe['fast']['recall']:.2f}, false alarms {probe['fast']['false_alarm']:.2f})"
        + (
            f", the full-resolution variant (`cnn_fine`, `--fine-cnn`)"
            f" {probe['fine']['accuracy']:.2f} (recall {probe['fine']['recall']:.2f}, false"
            f" alarms {probe['fine']['false_alarm']:.2f})."
            if "fine" in probe
            else "."
        ),
        f"Mode: {mode}; seeds per arm: {seeds_done}; {budget:,} env steps per run; evaluation every"
        f" {eval_every:,} steps on {eval_parts} fixed parts (deterministic policy). Runs that never"
        " reached the target count as the budget ('(cap)'). Arm (e) first behaviour-clones the"
        " scripted teacher on its own env steps (counted in its step numbers, taken from the"
        " same budget).",
        "Arm (a) is plain SB3 PPO; (b)-(f)"
        + (" and the controls" if {"g", "h"} & set(seeds_done) else "")
        + " train with `HybridPPO` (extra loss weights 0 but in (e)), "
        + (
            "whose PPO ratio counts the verdict's probability on stop steps only"
            " (`verdict_on_stop`, where the environment reads it)."
            if TASK.name != "grid16"
            else "in these runs (before 2026-12-05) with the verdict's probability counted on"
            " every step, as plain PPO does; `verdict_on_stop` came later."
        ),
    ]
    notes.append(payoff_note({a: verdict_payoffs(a) for a in ("a", "b")}))
    notes += control_notes(results)
    reached = {
        a: any(steps_to(r["curve"], args.target) is not None for r in results if r["arm"] == a)
        for a in med
    }
    notes += ratio_notes(med, reached, args.target, budget)
    notes += long_baseline_notes(
        out_dir, budget, args.target, med["e"] if reached.get("e") else None
    )
    vbody, variants = variants_table(out_dir, budget, args.target)
    if vbody:
        notes += [
            "",
            f"Full stack (e) configurations at {budget:,} steps (every saved run; flags"
            " `--fine-cnn`, `--balanced-verdict`, `--perception N`, `--freeze-perception`,"
            " `--weights RL,SL,KD`, `--critic-warmup N`, `--memory N`, `--evidence`,"
            " `--overview-evidence`, `--all-levels`, `--calibrate N`, `--bc-samples N`; the"
            " pretraining's crops and cloned steps count as env steps):",
            "",
            vbody.rstrip("\n"),
        ]
        if any("calibrated" in v for v in variants):
            notes += [
                "",
                "Calibrated column (`--calibrate N`): at every evaluation the ok bias that"
                " `inspector calibrate` (balanced objective) would store is chosen on N other"
                " labelled parts (camera seed 20,000 + seed), and the evaluation parts are"
                " scored at it; the bias moves only the final verdict, so the search and the"
                " raw figures are those of the same run. Calibration episodes are not counted"
                " as training steps (like the evaluation episodes).",
            ]
    if not set(MAIN_ARMS) <= set(args.arms):
        # The arm table would hold only these arms: keep the published one.
        print(body, flush=True)
        print(
            "docs/benchmarks.md not written (--arms is a subset): rerun without --arms and"
            " with --report-only to rewrite it from every saved run",
            file=sys.stderr,
        )
        return 0
    section, title = (
        "learning_efficiency",
        "Learning efficiency (synthetic panels, points invisible at overview)",
    )
    if TASK.name != DEFAULT_TASK:
        section, title = f"{section}_{TASK.name}", f"{title}: task {TASK.name}"
    write_section(
        section,
        title,
        body + "\n".join(notes) + "\n",
        command=" ".join(
            ["python -m benchmarks.learning_efficiency"]
            + [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report-only"]
        ),
    )
    print(body)
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
