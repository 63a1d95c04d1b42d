"""Verdict ensembles of saved agent runs: scored, and their table."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import load_results, table
from benchmarks.studies.quality_magnetic_tile.agent import agent_name
from benchmarks.studies.quality_magnetic_tile.operating import policy_test_figures
from benchmarks.studies.quality_magnetic_tile.runs import find_run
from benchmarks.studies.quality_magnetic_tile.settings import GOAL_PIXELS, STUDY, fmt, goals_met
from benchmarks.studies.quality_magnetic_tile.tables import median_text


# -- verdict ensembles of saved agents ------------------------------------------------------
def ensemble_path(out_dir: Path, key: str, seeds: Sequence[int], budget_s: float) -> Path:
    """Where :func:`run_ensemble` saves its result (a folder of its own, beside the runs)."""
    joined = "-".join(str(s) for s in seeds)
    return out_dir / "ensembles" / f"{key}_seeds{joined}_{budget_s:.0f}s.json"


def run_ensemble(
    out_dir: Path,
    runs_dir: Path,
    key: str,
    seeds: Sequence[int],
    budget_s: float,
    root: str | Path,
    val_episodes: int = 100_000,
    test_episodes: int = 100_000,
) -> dict[str, Any]:
    """The verdict ensemble (:mod:`inspector.policy.ensemble`) of the saved agent runs
    ``key`` with ``seeds`` (lead first) at ``budget_s``: test figures and the goal's
    operating point (its own bias, chosen on val), training nothing.

    The ensemble is what ``inspector export <lead> --ensemble <other> ...`` exports: the
    lead's moves (so its pixels), the members' geometric-mean verdict. Its training cost is
    the members' together (``spent_s``).

    :raises RuntimeError: a member's run or saved result is missing.
    """
    from inspector.policy.ensemble import EnsemblePolicy
    from inspector.train.torch_policy import load_any_policy

    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise RuntimeError(f"an ensemble needs two or more different seeds, got {list(seeds)}")
    members, saved = [], []
    for seed in seeds:
        name = f"{key}_s{seed}_{budget_s:.0f}s"
        best, result = runs_dir / name / "best", find_run(out_dir, key, seed, budget_s)
        if not (best / "model.zip").is_file() or result is None:
            raise RuntimeError(
                f"ensemble: no saved run {name} (its best/ model and result); train it first"
                f" with --seed {seed} --budget-min {budget_s / 60:g} and the same agent flags"
            )
        members.append(load_any_policy(best))
        saved.append(result.data)
    policy = EnsemblePolicy(members, names=[f"seed {s}" for s in seeds])
    test, op = policy_test_figures(policy, root, val_episodes, test_episodes)

    def alone(r: dict[str, Any]) -> dict[str, Any]:
        op = r.get("operating_point") or {}
        return {"auroc_test": op.get("auroc_test"), "test": op.get("test"), "as_trained": r["test"]}

    return {
        "method": "agent_ensemble",
        "key": key,
        "seeds": list(seeds),
        "budget_s": budget_s,
        "spent_s": sum(r["spent_s"] for r in saved),
        "models": [r["model"] for r in saved],
        "members": [alone(r) for r in saved],
        "test": test,
        "operating_point": op,
    }


def _goals_cell(at: dict[str, Any], pixels: float, tiling_pixels: float | None) -> str:
    """ "met" or which goals are missed, for test figures at an operating point."""
    if not at:
        return "—"
    missed = [k.replace("_", " ") for k, ok in goals_met(at).items() if not ok]
    if tiling_pixels and pixels / tiling_pixels > GOAL_PIXELS:
        missed.append("pixels")
    return "missed: " + ", ".join(missed) if missed else "met"


def ensemble_row(r: dict[str, Any], goals: str) -> list[str]:
    """One ensemble's row: its figures at the operating point and as combined, and each
    member's alone."""
    op, m = r["operating_point"], r["test"]
    at = op.get("test") or {}
    each = "; ".join(
        f"{s}: {fmt(a['auroc_test'])} / {fmt((a['test'] or {}).get('defect_recall'), 2)}"
        f" / {fmt((a['test'] or {}).get('false_alarm_rate'), 2)}"
        for s, a in zip(r["seeds"], r["members"])
    )
    return [
        ",".join(str(s) for s in r["seeds"]),
        f"{len(r['seeds'])} x {r['budget_s'] / 60:g} / {r['spent_s'] / 60:.0f}",
        fmt(op.get("auroc_test")),
        f"{fmt(at.get('defect_recall'), 2)} / {fmt(at.get('false_alarm_rate'), 2)}",
        fmt(at.get("balanced_accuracy")),
        f"{fmt(m['balanced_accuracy'])} / {fmt(m['defect_recall'], 2)}"
        f" / {fmt(m['false_alarm_rate'], 2)}",
        fmt(m["pixel_fraction"], 4),
        goals,
        each,
    ]


def summary_row(size: int, budget: float, ops: list[tuple[dict, str]]) -> list[str]:
    """The medians of the ensembles of one size and budget, and how many meet the goals."""

    def med(get: Callable[[dict], Any]) -> str:
        return median_text([get(op) for op, _ in ops])

    return [
        f"{size} x {budget / 60:g}",
        str(len(ops)),
        med(lambda op: op.get("auroc_test")),
        med(lambda op: (op.get("test") or {}).get("defect_recall")),
        med(lambda op: (op.get("test") or {}).get("false_alarm_rate")),
        med(lambda op: (op.get("test") or {}).get("balanced_accuracy")),
        f"{sum(g == 'met' for _, g in ops)} / {len(ops)}",
    ]


def ensembles_table(
    ens_dir: Path, names: dict[str, str], tiling_pixels: float | None = None
) -> str:
    """Markdown: every saved verdict ensemble beside its members alone, one table per
    members' method, then a summary by budget and size (medians, sets meeting the goals).

    :param tiling_pixels: the tiling baseline's test pixel fraction, for the pixel goal
        (without it the goals column leaves the pixels out).
    """
    saved = [s.data for s in load_results(ens_dir, STUDY, method="agent_ensemble")]
    if not saved:
        return ""
    saved.sort(key=lambda r: (r["key"], r["budget_s"], len(r["seeds"]), r["seeds"]))
    header = [
        "seeds (lead first)",
        "training: runs x budget / spent min",
        "test AUROC",
        "recall / false alarms at the operating point",
        "balanced acc there",
        "as combined (bias 0): balanced / recall / false alarms",
        "pixel fraction",
        "goals at the operating point",
        "each seed alone: AUROC / recall / false alarms at its operating point",
    ]
    tables, groups = [], {}
    for key in dict.fromkeys(r["key"] for r in saved):
        rows = []
        for r in (r for r in saved if r["key"] == key):
            op = r["operating_point"]
            goals = _goals_cell(op.get("test") or {}, r["test"]["pixel_fraction"], tiling_pixels)
            groups.setdefault((key, r["budget_s"], len(r["seeds"])), []).append((op, goals))
            rows.append(ensemble_row(r, goals))
        tables.append(f"Members: {names.get(key) or agent_name(key)}.\n\n" + table(header, rows))

    summary = [summary_row(size, budget, ops) for (_, budget, size), ops in groups.items()]
    conf = np.asarray(saved[0]["test"]["confusion"])  # rows: truth, the ok class first
    n_good, n_bad = int(conf[0].sum()), int(conf[1:].sum())
    return (
        "\nVerdict ensembles of saved agents (`--ensemble-seeds A,B,... --budget-min N` with"
        " the members' flags; trains nothing; what `inspector export <lead run> --ensemble"
        " <run> ...` exports): the lead seed's agent chooses every glimpse, each member's"
        " verdict head reads the lead's observation, and the class probabilities are their"
        " normalised geometric mean, so the pixels examined are the lead's and the cost is one"
        " forward pass per member and step. The operating point is the ensemble's own ok bias"
        " chosen on val (as above); the goals are judged there (pixels against this table's"
        " tiling run). Training cost is the members' together."
        + (
            f" The test split has {n_bad} defective and {n_good} good frames: one frame moves"
            f" recall by {1 / n_bad:.3f} and false alarms by {1 / n_good:.3f}."
            if n_bad and n_good
            else ""
        )
        + "\n\n"
        + "\n".join(tables)
        + "\nBy size and budget (every saved set of members and lead; sets share seeds, so"
        " they are not independent):\n\n"
        + table(
            [
                "members x budget min",
                "ensembles",
                "median test AUROC",
                "median recall",
                "median false alarms",
                "median balanced acc",
                "goals met",
            ],
            summary,
        )
    )
