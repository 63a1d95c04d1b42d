"""Saved runs: the configuration every result file carries, and finding results by it.

A run's configuration is ``{"kind": "run", "task", "mode", "arm", "seed", "budget",
"step_budget", "variant"}``, ``variant`` holding every option of :data:`VARIANT_DEFAULTS`
(those that apply to arm (e) only at their defaults for the other arms). The perception
probe's is ``{"kind": "perception_probe", "task", "mode", "epochs"}``. File names
(``<arm>_<seed>_<budget>_b<step budget><tag>.json``, :func:`variant_tag`) only keep the
folder readable: nothing reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Saved, load_results, save_result
from benchmarks.studies.learning_efficiency.tasks import STUDY, current

#: The options of a run (the command line's) and their defaults.
VARIANT_DEFAULTS: dict[str, Any] = {
    "bc_samples": None,
    "fine_cnn": False,
    "balanced_verdict": False,
    "perception": 0,
    "all_levels": False,
    "freeze_perception": False,
    "weights": None,
    "critic_warmup": 0,
    "memory": 0,
    "evidence": False,
    "overview_evidence": False,
    "calibrate": 0,
}
#: Options that change arm (e) only.
FULL_STACK_ONLY = (
    "bc_samples",
    "balanced_verdict",
    "perception",
    "all_levels",
    "freeze_perception",
    "weights",
    "critic_warmup",
)


def arm_variant(arm: str, **options: Any) -> dict[str, Any]:
    """The options as they apply to ``arm``: every key of :data:`VARIANT_DEFAULTS`, those
    of :data:`FULL_STACK_ONLY` at their defaults unless ``arm`` is ``e``."""
    unknown = set(options) - set(VARIANT_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown options {sorted(unknown)}")
    variant = {**VARIANT_DEFAULTS, **options}
    if arm != "e":
        variant.update({k: VARIANT_DEFAULTS[k] for k in FULL_STACK_ONLY})
    if not variant["perception"]:
        variant["all_levels"] = False  # it chooses where the pretraining's crops come from
    if variant["weights"] is not None:
        variant["weights"] = [float(w) for w in variant["weights"]]
    return variant


def variant_tag(variant: Mapping[str, Any]) -> str:
    """The file-name tag of a variant (``_bc16384_fine_pp8000`` ...; ``""``: defaults)."""
    v = variant
    weights: Sequence[float] | None = v["weights"]
    return (
        (f"_bc{v['bc_samples']}" if v["bc_samples"] is not None else "")
        + ("_fine" if v["fine_cnn"] else "")
        + ("_bal" if v["balanced_verdict"] else "")
        + (f"_pp{v['perception']}" if v["perception"] else "")
        + ("_ms" if v["all_levels"] and v["perception"] else "")
        + ("_frz" if v["freeze_perception"] else "")
        + ("_w" + "-".join(f"{w:g}" for w in weights) if weights is not None else "")
        + (f"_cw{v['critic_warmup']}" if v["critic_warmup"] else "")
        + (f"_m{v['memory']}" if v["memory"] else "")
        + ("_ev" if v["evidence"] else "")
        + ("_ov" if v["overview_evidence"] else "")
        + (f"_cal{v['calibrate']}" if v["calibrate"] else "")
    )


def run_config(
    mode: str, arm: str, seed: int, budget: int, variant: Mapping[str, Any]
) -> dict[str, Any]:
    """The configuration of one run of the task in use."""
    task = current()
    return {
        "kind": "run",
        "task": task.name,
        "mode": mode,
        "arm": arm,
        "seed": int(seed),
        "budget": int(budget),
        "step_budget": task.step_budget,
        "variant": dict(variant),
    }


def probe_config(mode: str, epochs: int) -> dict[str, Any]:
    """The configuration of the perception probe of the task in use."""
    return {"kind": "perception_probe", "task": current().name, "mode": mode, "epochs": epochs}


def run_path(out_dir: Path, config: Mapping[str, Any]) -> Path:
    """Where a run's result is saved."""
    c = config
    stem = f"{c['arm']}_{c['seed']}_{c['budget']}_b{c['step_budget']}"
    return out_dir / f"{stem}{variant_tag(c['variant'])}.json"


def probe_path(out_dir: Path, config: Mapping[str, Any]) -> Path:
    """Where the perception probe's result is saved."""
    return out_dir / f"perception_probe_{config['epochs']}ep.json"


def runs(out_dir: Path, **want: Any) -> list[Saved]:
    """The saved runs in ``out_dir`` (file-name order) whose configuration has ``want``."""
    return load_results(out_dir, STUDY, kind="run", **want)


def save(path: Path, config: Mapping[str, Any], result: Mapping[str, Any]) -> dict:
    """Save a result with its configuration; return what was written."""
    return save_result(path, STUDY, config, result)
