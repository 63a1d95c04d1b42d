"""What the saved runs say: steps to the target, the arm and variant tables, the notes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.harness import table
from benchmarks.studies.learning_efficiency.arms import ARMS
from benchmarks.studies.learning_efficiency.runs import arm_variant, runs, variant_tag
from benchmarks.studies.learning_efficiency.tasks import current
from benchmarks.studies.shared import BALANCED_STOP_WEIGHT


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
    plain = arm_variant("a")
    for saved in runs(out_dir, arm="a", step_budget=current().step_budget, variant=plain):
        if saved.config["budget"] <= budget:
            continue
        r = saved.data
        n, curve = saved.config["budget"], r["curve"]
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
    for saved in runs(out_dir, arm="e", budget=budget, step_budget=current().step_budget):
        groups.setdefault(variant_tag(saved.config["variant"]), []).append(saved.data)
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
