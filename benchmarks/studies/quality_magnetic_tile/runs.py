"""Saved runs: the configuration every result file carries, and finding results by it.

A run's configuration is ``{"mode", "method", "key", "agent", "seed", "budget_s"}``:
``key`` is the results key of the tables (``agent`` plus :func:`agent_tag` of the agent
variant, or the baseline's method), ``agent`` the variant's flags (None for a baseline),
``budget_s`` whole seconds. An ensemble's is ``{"mode", "method": "agent_ensemble",
"key", "agent", "seeds", "budget_s"}``. File names (``<key>_s<seed>_<budget>s.json``)
only keep the folder readable: nothing reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Saved, load_results, save_result
from benchmarks.studies.quality_magnetic_tile.agent import agent_tag
from benchmarks.studies.quality_magnetic_tile.settings import STUDY

#: The agent variant's flags (the keyword arguments of :func:`agent_tag`) and defaults.
VARIANT_DEFAULTS: dict[str, Any] = {
    "perception": 0,
    "freeze": False,
    "memory": 0,
    "evidence": False,
    "balanced": False,
    "all_levels": False,
    "overview_evidence": False,
    "cnn_channels": 0,
    "perception_epochs": 0,
    "select_auroc": False,
}
#: Flags that only mean something with perception pretraining (the tag leaves them out).
NEEDS_PERCEPTION = ("freeze", "all_levels", "perception_epochs")


def agent_variant(**flags: Any) -> dict[str, Any]:
    """The agent variant as saved: every flag of :data:`VARIANT_DEFAULTS`, those that need
    perception pretraining at their default without it."""
    unknown = set(flags) - set(VARIANT_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown agent flags {sorted(unknown)}")
    variant = {**VARIANT_DEFAULTS, **flags}
    if not variant["perception"]:
        variant.update({k: VARIANT_DEFAULTS[k] for k in NEEDS_PERCEPTION})
    return variant


def run_config(
    mode: str, method: str, seed: int, budget_s: float, variant: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The configuration of one run (``variant``: the agent's, ignored for baselines)."""
    agent = agent_variant(**(variant or {})) if method == "agent" else None
    key = method + agent_tag(**agent) if agent is not None else method
    return {
        "mode": mode,
        "method": method,
        "key": key,
        "agent": agent,
        "seed": int(seed),
        "budget_s": round(budget_s),
    }


def ensemble_config(
    mode: str, variant: Mapping[str, Any], seeds: Sequence[int], budget_s: float
) -> dict[str, Any]:
    """The configuration of a verdict ensemble of the agent runs ``seeds`` (lead first)."""
    agent = agent_variant(**variant)
    return {
        "mode": mode,
        "method": "agent_ensemble",
        "key": "agent" + agent_tag(**agent),
        "agent": agent,
        "seeds": [int(s) for s in seeds],
        "budget_s": round(budget_s),
    }


def run_path(out_dir: Path, config: Mapping[str, Any]) -> Path:
    """Where a run's result is saved: ``<key>_s<seed>_<budget>s.json``."""
    return out_dir / f"{config['key']}_s{config['seed']}_{config['budget_s']}s.json"


def runs(out_dir: Path, **want: Any) -> list[Saved]:
    """The saved runs (not ensembles) in ``out_dir`` whose configuration has ``want``."""
    return [
        s
        for s in load_results(out_dir, STUDY, **want)
        if s.config.get("method") != "agent_ensemble"
    ]


def find_run(out_dir: Path, key: str, seed: int, budget_s: float) -> Saved | None:
    """The saved run ``key`` with ``seed`` at ``budget_s``, or None."""
    found = runs(out_dir, key=key, seed=int(seed), budget_s=round(budget_s))
    return found[0] if found else None


def save_run(path: Path, config: Mapping[str, Any], result: Mapping[str, Any]) -> dict:
    """Save a run's (or an ensemble's) result with its configuration."""
    return save_result(path, STUDY, config, result)
