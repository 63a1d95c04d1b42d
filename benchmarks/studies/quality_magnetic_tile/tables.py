"""The report's tables over saved runs: seeds, operating points, other budgets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import table
from benchmarks.studies.quality_magnetic_tile.agent import agent_name
from benchmarks.studies.quality_magnetic_tile.runs import find_run, runs
from benchmarks.studies.quality_magnetic_tile.settings import METHODS, fmt


def ordered_keys(results: dict[str, dict]) -> list[str]:
    """Agent variants first (defaults, then by tag), then the baselines."""
    agents = sorted((k for k in results if k.startswith("agent")), key=lambda k: (len(k), k))
    return agents + [m for m in METHODS if m != "agent" and m in results]


def saved_results(out_dir: Path) -> list[tuple[str, int, int, dict]]:
    """Every saved run in ``out_dir`` as (key, seed, budget seconds, result), in file-name
    order; each read from the configuration its file carries."""
    return [
        (s.config["key"], s.config["seed"], s.config["budget_s"], s.data) for s in runs(out_dir)
    ]


def results_by_seed(
    out_dir: Path, budget_s: float, field: str = "test"
) -> dict[str, dict[int, dict]]:
    """One field (default the test metrics) of every saved result of this budget:
    {results key: {seed: value}}; results without the field are left out."""
    out: dict[str, dict[int, dict]] = {}
    for key, seed, budget, data in saved_results(out_dir):
        if budget == round(budget_s):
            value = data.get(field)
            if value is not None:
                out.setdefault(key, {})[seed] = value
    return out


def median_text(vals: Sequence[float | None]) -> str:
    """The median of the values that are there, formatted ("—" when none is)."""
    present = [v for v in vals if v is not None]
    return fmt(float(np.median(present))) if present else "—"


def _seed_row(
    label: str,
    runs: dict[int, dict],
    shown: Sequence[tuple[Callable[[dict], Any], int]],
    medians: Sequence[Callable[[dict], Any]],
) -> list[str]:
    """A table row of one method over seeds: its name, the seeds, each seed's ``shown``
    figures (getter, digits) as "seed: a / b / c", then the median of each of ``medians``."""
    runs = dict(sorted(runs.items()))
    per = ", ".join(
        f"{s}: " + " / ".join(fmt(get(r), digits) for get, digits in shown) for s, r in runs.items()
    )
    cells = [median_text([get(r) for r in runs.values()]) for get in medians]
    return [label, ",".join(str(s) for s in runs), per, *cells]


def operating_table(by_seed: dict[str, dict[int, dict]], names: dict[str, str]) -> str:
    """Markdown: every method's defect AUROC and its test figures at the val-chosen bias
    for the goal's false-alarm ceiling (:func:`operating_point`), per seed and median."""
    keys = ordered_keys(by_seed)
    if not keys:
        return ""

    def at(name: str) -> Callable[[dict], Any]:
        return lambda op: (op.get("test") or {}).get(name)

    def auroc(op: dict) -> Any:
        return op.get("auroc_test")

    recall, fa = at("defect_recall"), at("false_alarm_rate")
    rows = [
        _seed_row(
            names.get(k) or agent_name(k),
            by_seed[k],
            shown=[(auroc, 3), (recall, 2), (fa, 2)],
            medians=[auroc, recall, fa, at("balanced_accuracy")],
        )
        for k in keys
    ]
    ceiling = next(iter(next(iter(by_seed.values())).values()))["false_alarm_ceiling"]
    header = [
        "method",
        "seeds",
        "per seed: test AUROC / recall / false alarms",
        "median AUROC",
        "median recall",
        "median false alarms",
        "median balanced acc",
    ]
    return (
        f"\nAt the goal's operating point (test split): each model's decision shifted by the"
        f" ok bias (`inspector calibrate --max-false-alarms {ceiling:g} --confidence none`;"
        " tiling: its threshold)"
        f" that gives the highest val recall with val false alarms <= {ceiling:g}. AUROC: the"
        " chance that a defective test frame scores above a good one (score 1 - p(ok); tiling:"
        " its top tile's defect probability), free of any threshold. `--rescore` adds this to"
        " saved runs from their models.\n\n" + table(header, rows)
    )


def seeds_table(by_seed: dict[str, dict[int, dict]], names: dict[str, str]) -> str:
    """Markdown: every method run with more than one seed, each seed's figures and the median."""
    keys = [k for k in ordered_keys(by_seed) if len(by_seed[k]) > 1]
    if not keys:
        return ""

    figures = [itemgetter(n) for n in ("balanced_accuracy", "defect_recall", "false_alarm_rate")]
    rows = [
        _seed_row(
            names.get(k) or agent_name(k),
            by_seed[k],
            shown=[(get, 3) for get in figures],
            medians=figures,
        )
        for k in keys
    ]
    header = [
        "method (more than one seed)",
        "seeds",
        "per seed: balanced acc / defect recall / false alarms",
        "median balanced acc",
        "median defect recall",
        "median false alarms",
    ]
    return (
        "\nAcross seeds (same budget, test split; `--seed N` with the row's flags re-creates"
        " each run, `--methods tiling` / `--methods fullframe` each baseline's):\n\n"
        + table(header, rows)
    )


def budgets_table(out_dir: Path, budget_s: float, names: dict[str, str]) -> str:
    """Markdown: the runs saved at other budgets than ``budget_s``, each beside the same
    method and seed at ``budget_s``: does more training time move the figures?

    Per run: test AUROC and recall / false alarms at the goal's operating point (its val-
    chosen bias, as in :func:`operating_table`), then the as-trained balanced accuracy;
    the same for that method and seed at the table's own budget ("—" where missing).
    """
    runs = [
        (key, budget, seed, data)
        for key, seed, budget, data in saved_results(out_dir)
        if budget != round(budget_s)
    ]
    if not runs:
        return ""

    def figures(r: dict | None) -> str:
        if r is None:
            return "—"
        op = r.get("operating_point") or {}
        at = op.get("test") or {}
        return " / ".join(
            [
                fmt(op.get("auroc_test"), 3),
                fmt(at.get("defect_recall"), 2),
                fmt(at.get("false_alarm_rate"), 2),
                fmt(r["test"]["balanced_accuracy"], 3),
            ]
        )

    rows = []
    order = {k: i for i, k in enumerate(ordered_keys({k: None for k, *_ in runs}))}
    for key, budget, seed, r in sorted(runs, key=lambda t: (t[1], order[t[0]], t[2])):
        same = find_run(out_dir, key, seed, budget_s)
        base = same.data if same is not None else None
        rows.append(
            [
                names.get(key) or agent_name(key),
                str(seed),
                f"{budget / 60:g} / {r['spent_s'] / 60:.0f}",
                figures(r),
                figures(base),
            ]
        )
    header = [
        "method",
        "seed",
        "budget / spent min",
        "test AUROC / recall / false alarms at the operating point / as-trained balanced acc",
        f"the same at {budget_s / 60:g} min",
    ]
    return (
        f"\nOther budgets (each run beside the same method and seed at {budget_s / 60:g} min;"
        " `--budget-min N --seed S` with the row's flags re-creates it; the operating point"
        " as above):\n\n" + table(header, rows)
    )
