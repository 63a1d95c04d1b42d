"""The agent: trained in resumable chunks within a budget, its variants and their names."""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import ROOT, write_json
from benchmarks.studies.quality_magnetic_tile.data import camera_params
from benchmarks.studies.quality_magnetic_tile.operating import (
    load_agent,
    policy_pass,
    policy_test_figures,
    val_summary,
)
from benchmarks.studies.quality_magnetic_tile.settings import PROFILE, fmt
from benchmarks.studies.shared import BALANCED_STOP_WEIGHT


def agent_config(seed: int, **overrides: Any):
    """TrainConfig defaults (hybrid loss, scripted teacher) with a constant learning rate."""
    from inspector.train.config import TrainConfig

    base = TrainConfig()
    return base.replace(seed=seed, lr_floor=base.learning_rate, final_eval_episodes=0, **overrides)


def _eval_agent(model_dir: Path, root: str | Path, split: str, episodes: int = 100_000):
    """``evaluate()``'s metrics of a saved agent on a split."""
    return policy_pass(load_agent(model_dir), root, split, episodes)[0]


SELECT = ("balanced_accuracy", "defect_auroc")


def _better(entry: dict[str, Any], best: dict[str, Any], select: str) -> bool:
    """Whether a val entry beats the kept one on ``select`` (then balanced accuracy)."""
    if select not in SELECT:
        raise ValueError(f"select must be one of {SELECT}, got {select!r}")

    def key(e: dict[str, Any]) -> tuple[float, float]:
        v = e.get(select)
        return (-1.0 if v is None else float(v), float(e["balanced_accuracy"]))

    return key(entry) > key(best)


def next_chunk(
    state: dict[str, Any], budget_s: float, chunk: int, first_chunk: int, rollout: int
) -> int:
    """Env steps of the next chunk: what the rest of the budget allows at the rate so far,
    less one val pass, in whole rollouts (at most ``chunk``; the first ``first_chunk``);
    0 when not one rollout fits."""
    remaining = budget_s - state["spent_s"]
    if state["steps"]:
        rate = state["steps"] / max(1e-6, state["train_s"])
        eval_s = np.mean([h["val_s"] for h in state["history"]])
        want = min(chunk, int((remaining - eval_s) * rate) // rollout * rollout)
    else:
        want = max(rollout, first_chunk // rollout * rollout)
    return 0 if want < rollout or remaining <= 0 else int(want)


def run_agent(
    root: str | Path,
    budget_s: float,
    seed: int,
    run_dir: Path,
    *,
    chunk: int = 4096,
    first_chunk: int = 1024,
    cfg: Any = None,
    val_episodes: int = 100_000,
    test_episodes: int = 100_000,
    profile_path: str = PROFILE,
    select: str = "balanced_accuracy",
) -> dict[str, Any]:
    """Train the agent in resumable chunks until ``budget_s`` is spent; best val -> test.

    :param select: the val figure that picks the kept chunk: ``balanced_accuracy`` (of the
        verdicts as trained) or ``defect_auroc`` (threshold-free, what the operating
        point then works with; ties go to the later chunk's balanced accuracy).

    ``run_dir/state.json`` records the seconds spent and the val curve, so a killed run
    continues where its last finished chunk left off (a chunk cut short is lost time).

    :param profile_path: the reward profile (default reward_profiles/magnetic_tile.yaml).
    """
    cfg = cfg or agent_config(seed)
    rollout = cfg.n_envs * cfg.n_steps
    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / "state.json"
    state = (
        json.loads(state_path.read_text())
        if state_path.exists()
        else {"spent_s": 0.0, "train_s": 0.0, "steps": 0, "history": [], "best": None}
    )
    best_dir = run_dir / "best"
    while True:
        want = next_chunk(state, budget_s, chunk, first_chunk, rollout)
        if not want:
            break
        entry, m = _train_chunk(state, want, root, run_dir, cfg, profile_path, val_episodes)
        if state["best"] is None or _better(entry, state["best"], select):
            best_dir.mkdir(exist_ok=True)
            for name in ("model.zip", "profile.yaml", "profile.sha256", "config.yaml"):
                shutil.copyfile(run_dir / "run" / name, best_dir / name)
            state["best"] = entry
        write_json(state_path, state)
        print(
            f"  agent: {entry['steps']} steps, {state['spent_s']:.0f}/{budget_s:.0f} s, val "
            f"bal.acc {m['balanced_accuracy']:.3f}, mean steps {m['mean_steps']:.1f}, "
            f"native share {m['native_share']:.2f}",
            flush=True,
        )
    if state["best"] is None:
        raise RuntimeError(f"agent: budget {budget_s:.0f} s too small for one chunk")
    test, op = policy_test_figures(load_agent(best_dir), root, val_episodes, test_episodes)
    return {
        "method": "agent",
        "seed": seed,
        "budget_s": budget_s,
        "spent_s": state["spent_s"],
        "train_s": state["train_s"],
        "steps": state["steps"],
        "steps_per_s": state["steps"] / max(1e-6, state["train_s"]),
        "best_val": state["best"],
        "history": state["history"],
        "config": dataclasses.asdict(cfg),
        "model": str(best_dir.relative_to(ROOT) if best_dir.is_relative_to(ROOT) else best_dir),
        "test": test,
        "operating_point": op,
    }


def _train_chunk(
    state: dict[str, Any],
    want: int,
    root: str | Path,
    run_dir: Path,
    cfg: Any,
    profile_path: str,
    val_episodes: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train ``want`` more steps (resuming ``run_dir/run``), then score it on val.

    Adds the chunk's time and steps to ``state`` and its entry to the val curve.

    :returns: (the curve's new entry, the val metrics).
    """
    from inspector.train.runner import train_run

    t0 = time.perf_counter()
    res = train_run(
        profile_path,
        "folder",
        camera_params(root, "train"),
        state["steps"] + want,
        run_dir / "run",
        cfg,
        resume=True,
        progress=False,
        evaluate_after=False,
    )
    t1 = time.perf_counter()
    m = _eval_agent(run_dir / "run", root, "val", val_episodes)
    t2 = time.perf_counter()
    state["steps"] = res.timesteps
    state["train_s"] += t1 - t0
    state["spent_s"] += t2 - t0
    entry = {
        "steps": res.timesteps,
        "at_s": round(state["spent_s"], 1),
        "val_s": t2 - t1,
        **val_summary(m),
        "mean_steps": m["mean_steps"],
        "native_share": m["native_share"],
        "stopped_share": m["stopped_share"],
        "defect_auroc": m.get("defect_auroc"),
    }
    state["history"].append(entry)
    return entry, m


def reselect(
    src: dict[str, Any] | None,
    runs_dir: Path,
    key: str,
    suffix: str,
    root: str | Path,
    val_episodes: int = 100_000,
    test_episodes: int = 100_000,
) -> dict[str, Any]:
    """``key + "_sauc"`` from the saved run ``key`` (kept by val balanced accuracy; its saved
    result ``src``): the
    chunk with the best val defect AUROC among its chunk-end checkpoints, then test.

    Which chunk is kept does not change training, so this is the run
    ``--agent-select-auroc`` would have made with the same chunks, without training it
    again. Each checkpoint is first checked against the val balanced accuracy recorded
    for it.

    :raises RuntimeError: the run, a checkpoint, or its recorded val figure is missing.
    """
    run_dir = runs_dir / f"{key}{suffix}"
    state_path = run_dir / "state.json"
    if src is None or not state_path.is_file():
        raise RuntimeError(f"reselect: no saved run {key}{suffix} to re-select from")
    state = json.loads(state_path.read_text())
    new_key = key + "_sauc"
    new_dir = runs_dir / f"{new_key}{suffix}"
    side = ("profile.yaml", "profile.sha256", "config.yaml")

    def stage(steps: int, dest: Path) -> Path:
        ckpt = run_dir / "run" / "checkpoints" / f"ckpt_{steps:09d}.zip"
        if not ckpt.is_file():
            raise RuntimeError(f"reselect: checkpoint {ckpt} is missing")
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ckpt, dest / "model.zip")
        for name in side:
            shutil.copyfile(run_dir / "best" / name, dest / name)
        return dest

    entries, best = [], None
    for h in state["history"]:
        m = _eval_agent(stage(h["steps"], new_dir / "candidate"), root, "val", val_episodes)
        if abs(m["balanced_accuracy"] - h["balanced_accuracy"]) > 1e-9:
            raise RuntimeError(
                f"reselect: checkpoint at {h['steps']} steps gives val balanced accuracy"
                f" {m['balanced_accuracy']:.4f}, the run recorded {h['balanced_accuracy']:.4f}"
            )
        entry = {**h, "defect_auroc": m["defect_auroc"]}
        entries.append(entry)
        if best is None or _better(entry, best, "defect_auroc"):
            best = entry
        print(
            f"  reselect {h['steps']} steps: val AUROC {fmt(m['defect_auroc'])},"
            f" balanced {m['balanced_accuracy']:.3f}",
            flush=True,
        )
    if best is None:
        raise RuntimeError(f"reselect: {key}{suffix} has no chunks")
    shutil.rmtree(new_dir / "candidate", ignore_errors=True)
    best_dir = stage(best["steps"], new_dir / "best")
    test, op = policy_test_figures(load_agent(best_dir), root, val_episodes, test_episodes)
    return {
        **src,
        "best_val": best,
        "history": entries,
        "select": "defect_auroc",
        "reselected_from": f"{key}{suffix}",
        "model": str(best_dir.relative_to(ROOT) if best_dir.is_relative_to(ROOT) else best_dir),
        "test": test,
        "operating_point": op,
    }


def agent_tag(
    perception: int = 0,
    freeze: bool = False,
    memory: int = 0,
    evidence: bool = False,
    balanced: bool = False,
    all_levels: bool = False,
    overview_evidence: bool = False,
    cnn_channels: int = 0,
    perception_epochs: int = 0,
    select_auroc: bool = False,
) -> str:
    """The results key suffix of an agent variant (``""``: TrainConfig defaults)."""
    return (
        (f"_c{cnn_channels}" if cnn_channels else "")
        + (f"_pp{perception}" if perception else "")
        + (f"_pe{perception_epochs}" if perception_epochs and perception else "")
        + ("_ms" if all_levels and perception else "")
        + ("_frz" if freeze and perception else "")
        + (f"_m{memory}" if memory else "")
        + ("_ev" if evidence else "")
        + ("_ov" if overview_evidence else "")
        + ("_bal" if balanced else "")
        + ("_sauc" if select_auroc else "")
    )


def variant_profile(memory: int, out: Path) -> str:
    """reward_profiles/magnetic_tile.yaml with ``scan.memory`` replaced, written to ``out``."""
    import yaml

    from inspector.profile import load_profile

    doc = yaml.safe_load(Path(PROFILE).read_text())
    doc["scan"]["memory"] = int(memory)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"# {Path(PROFILE).name} with scan.memory {memory}"
        " (benchmarks.studies.quality_magnetic_tile)\n" + yaml.safe_dump(doc, sort_keys=False)
    )
    load_profile(str(out))  # fail here, not after the first chunk
    return str(out)


def agent_name(key: str) -> str:
    """Table words for an agent results key (``agent_pp8000_frz`` ...)."""
    words = []
    for tok in key.split("_")[1:]:
        if tok.startswith("pp"):
            words.append(f"perception pretraining on {int(tok[2:]):,} crops")
        elif tok == "sauc":
            words.append("chunk kept by val AUROC")
        elif tok.startswith("pe") and tok[2:].isdigit():
            words.append(f"{int(tok[2:])} pretraining epochs")
        elif tok.startswith("c") and tok[1:].isdigit():
            words.append(f"glimpse CNN {int(tok[1:])} channels wide")
        elif tok == "frz":
            words.append("glimpse CNN frozen")
        elif tok == "ms":
            words.append("crops from every zoom level")
        elif tok == "ev":
            words.append("per-glimpse evidence head")
        elif tok == "ov":
            words.append("evidence on the overview")
        elif tok == "bal":
            words.append(f"balanced verdict loss (stop weight {BALANCED_STOP_WEIGHT:g})")
        elif tok.startswith("m") and tok[1:].isdigit():
            words.append(f"{int(tok[1:])} remembered glimpses")
        else:
            words.append(tok)
    return "agent (HybridPPO, scripted teacher" + "".join(f", {w}" for w in words) + ")"
