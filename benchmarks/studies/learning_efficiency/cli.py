"""The command line: train the missing runs, then write the report."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import find_result, non_negative_int, parser, write_section
from benchmarks.studies import learning_efficiency as study
from benchmarks.studies.learning_efficiency.arms import ARMS, MAIN_ARMS, run_one
from benchmarks.studies.learning_efficiency.outcomes import (
    control_notes,
    long_baseline_notes,
    ratio_notes,
    steps_to,
    summarise,
    variants_table,
)
from benchmarks.studies.learning_efficiency.probes import (
    payoff_note,
    perception_probe,
    point_visibility,
    search_ceiling,
    verdict_payoffs,
)
from benchmarks.studies.learning_efficiency.runs import (
    arm_variant,
    probe_config,
    probe_path,
    run_config,
    run_path,
    save,
)
from benchmarks.studies.learning_efficiency.tasks import (
    DEFAULT_TASK,
    STUDY,
    TASKS,
    current,
    results_dir,
    use_task,
)


def add_run_options(ap: argparse.ArgumentParser) -> None:
    """The options of the runs (which variant of the arms to train)."""
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


def build_parser() -> argparse.ArgumentParser:
    """The command line's options."""
    ap = parser(study.__doc__, quick="1 seed, small budget (< 10 min)", full_doc=True)
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
    add_run_options(ap)
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="write the table from the saved runs only (the section keeps its Measured line)",
    )
    return ap


def check(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[float] | None:
    """Refuse bad or inconsistent flags (argparse exits); return ``--weights`` parsed."""
    unknown = sorted(set(args.arms) - set(ARMS))
    if unknown or not args.arms:
        ap.error(f"--arms takes letters of {''.join(ARMS)}, got {args.arms!r}")
    if args.freeze_perception and not args.perception:
        ap.error("--freeze-perception needs --perception N (there is nothing pretrained to keep)")
    if args.all_levels and not args.perception:
        ap.error("--all-levels needs --perception N (it chooses where those crops come from)")
    if args.overview_evidence and not args.evidence:
        ap.error("--overview-evidence needs --evidence (the head it reuses)")
    if not args.weights:
        return None
    try:
        weights = [float(v) for v in args.weights.split(",")]
    except ValueError:
        weights = []
    if len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0:
        ap.error(f"--weights wants three non-negative numbers RL,SL,KD, got {args.weights!r}")
    return weights


@dataclass
class Plan:
    """The runs one invocation covers (derived from the flags and the task)."""

    mode: str
    seeds: int
    budget: int
    eval_every: int
    eval_parts: int
    out_dir: Path
    weights: list[float] | None

    @classmethod
    def of(cls, args: argparse.Namespace, weights: list[float] | None) -> Plan:
        # 64-px glimpses cost about three times the 32-px ones per step: a smaller quick budget.
        quick_budget = 6144 if current().name == "grid16" else 4096
        mode = "quick" if args.quick else "full"
        return cls(
            mode=mode,
            seeds=args.seeds or (1 if args.quick else 5),
            budget=args.budget or (quick_budget if args.quick else 30_000),
            eval_every=1024 if args.quick else 2048,
            eval_parts=60 if args.quick else 150,
            out_dir=results_dir(mode),
            weights=weights,
        )


def options(args: argparse.Namespace, weights: list[float] | None) -> dict[str, Any]:
    """The run options the flags name (keys of :data:`runs.VARIANT_DEFAULTS`)."""
    return {
        "bc_samples": args.bc_samples,
        "fine_cnn": args.fine_cnn,
        "balanced_verdict": args.balanced_verdict,
        "perception": args.perception,
        "all_levels": args.all_levels,
        "freeze_perception": args.freeze_perception,
        "weights": weights,
        "critic_warmup": args.critic_warmup,
        "memory": args.memory,
        "evidence": args.evidence,
        "overview_evidence": args.overview_evidence,
        "calibrate": args.calibrate,
    }


def train_missing(args: argparse.Namespace, plan: Plan) -> list[dict]:
    """Every run of ``--seeds`` x ``--arms``: saved ones read, missing ones trained and
    saved (none with ``--report-only``; with ``--only-seeds`` only those seeds)."""
    results = []
    only = {int(v) for v in args.only_seeds.split(",")} if args.only_seeds else None
    opts = options(args, plan.weights)
    for seed in range(plan.seeds):
        for arm in args.arms:
            config = run_config(plan.mode, arm, seed, plan.budget, arm_variant(arm, **opts))
            saved = find_result(plan.out_dir, STUDY, **config)
            if saved is not None and not args.force:
                results.append(saved.data)
                continue
            if args.report_only or (only is not None and seed not in only):
                continue
            print(f"arm {arm} seed {seed}: training {plan.budget} steps", flush=True)
            # The flags as given (as before configurations were saved): run_one applies
            # the full stack's options to arm (e) only.
            run_kw = {k: v for k, v in opts.items() if k != "weights"}
            run_kw["weights"] = tuple(plan.weights) if plan.weights is not None else None
            r = run_one(arm, seed, plan.budget, plan.eval_every, plan.eval_parts, n_envs=4,
                        **run_kw)  # fmt: skip
            r = save(run_path(plan.out_dir, config), config, r)
            last = r["curve"][-1]
            print(
                f"  final accuracy {last['accuracy']:.3f}, native share {last['native_share']:.2f},"
                f" {r['wall_s']:.0f} s",
                flush=True,
            )
            results.append(r)
    return results


def load_or_probe(args: argparse.Namespace, plan: Plan) -> dict:
    """The perception probe: saved, or run and saved (it does not depend on the runs)."""
    epochs = 3 if args.quick else 12
    config = probe_config(plan.mode, epochs)
    saved = find_result(plan.out_dir, STUDY, **config)
    if saved is not None and not args.force:
        return saved.data
    # The full-resolution CNN matters on the full-depth grid only (and costs minutes).
    fine = current().name == "grid16"
    probe = perception_probe(epochs=epochs, variants=("fast", "fine") if fine else ("fast",))
    return save(probe_path(plan.out_dir, config), config, probe)


def task_notes(args: argparse.Namespace, plan: Plan, seeds_done: dict[str, int]) -> list[str]:
    """The notes on the task itself: its ceiling without learning, point visibility, the
    perception probe, the run settings and which PPO the arms use."""
    task, camera = current(), current().camera
    ceiling = search_ceiling(plan.eval_parts)
    vis = point_visibility()
    probe = load_or_probe(args, plan)
    rc = ceiling["per_class_recall"]
    return [
        "",
        f"Task `{task.name}` (`--task {task.name}`): synthetic panels"
        f" {camera['size']}x{camera['size']}, 1-px points invisible at the"
        f" {camera['invisible_at']}-px overview (`invisible_at={camera['invisible_at']}`),"
        f" {task.about}; step budget {task.step_budget}.",
        f"Search ceiling (no learning): the non-privileged searching teacher, declaring the"
        f" true class once the defect is in sight and ok otherwise, reaches accuracy"
        f" {ceiling['accuracy']:.3f} (recall ok / line / point "
        + " / ".join(f"{rc.get(c) or 0:.2f}" for c in ("ok", "line", "point"))
        + f", {ceiling['mean_steps']:.1f} steps/part) on {plan.eval_parts} parts: the"
        f" {args.target:.0%} target is "
        + ("reachable" if ceiling["accuracy"] >= args.target else "NOT reachable")
        + " within the budget, for a searcher that never misjudges a glimpse.",
        f"Point visibility at native resolution (no learning; largest residual in a"
        f" {task.glimpse}x{task.glimpse} glimpse, {vis['points']} points, threshold at"
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
        f"Mode: {plan.mode}; seeds per arm: {seeds_done}; {plan.budget:,} env steps per run;"
        f" evaluation every {plan.eval_every:,} steps on {plan.eval_parts} fixed parts"
        " (deterministic policy). Runs that never reached the target count as the budget"
        " ('(cap)'). Arm (e) first behaviour-clones the scripted teacher on its own env steps"
        " (counted in its step numbers, taken from the same budget).",
        "Arm (a) is plain SB3 PPO; (b)-(f)"
        + (" and the controls" if {"g", "h"} & set(seeds_done) else "")
        + " train with `HybridPPO` (extra loss weights 0 but in (e)), "
        + (
            "whose PPO ratio counts the verdict's probability on stop steps only"
            " (`verdict_on_stop`, where the environment reads it)."
            if task.name != "grid16"
            else "in these runs (before 2026-12-05) with the verdict's probability counted on"
            " every step, as plain PPO does; `verdict_on_stop` came later."
        ),
    ]


def variant_notes(plan: Plan, target: float) -> list[str]:
    """The full stack's configurations table and its note (none when no (e) run is saved)."""
    vbody, variants = variants_table(plan.out_dir, plan.budget, target)
    if not vbody:
        return []
    notes = [
        "",
        f"Full stack (e) configurations at {plan.budget:,} steps (every saved run; flags"
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
    return notes


def report_notes(
    args: argparse.Namespace, plan: Plan, results: list[dict], med: dict[str, float]
) -> list[str]:
    """Every note under the arm table."""
    seeds_done = {a: sum(r["arm"] == a for r in results) for a in args.arms}
    notes = task_notes(args, plan, seeds_done)
    notes.append(payoff_note({a: verdict_payoffs(a) for a in ("a", "b")}))
    notes += control_notes(results)
    reached = {
        a: any(steps_to(r["curve"], args.target) is not None for r in results if r["arm"] == a)
        for a in med
    }
    notes += ratio_notes(med, reached, args.target, plan.budget)
    med_e = med["e"] if reached.get("e") else None
    notes += long_baseline_notes(plan.out_dir, plan.budget, args.target, med_e)
    return notes + variant_notes(plan, args.target)


def write_report(args: argparse.Namespace, argv: list[str] | None, text: str) -> None:
    """Write the task's section (the command without ``--report-only``)."""
    section = "learning_efficiency"
    title = "Learning efficiency (synthetic panels, points invisible at overview)"
    if current().name != DEFAULT_TASK:
        section, title = f"{section}_{current().name}", f"{title}: task {current().name}"
    given = argv if argv is not None else sys.argv[1:]
    skip = {"--report-only", "--no-write"}
    words, doc_next = [], False
    for a in given:  # the report's own options are no part of the measured command
        if doc_next or a in skip or a.startswith("--doc="):
            doc_next = False
            continue
        if a == "--doc":
            doc_next = True
            continue
        words.append(a)
    command = " ".join(["python -m benchmarks.studies.learning_efficiency", *words])
    write_section(
        section, title, text, command=command, doc=args.doc, keep_measured=args.report_only
    )


def main(argv: list[str] | None = None) -> int:
    """Train the missing runs, then print and write the report; 1 when nothing is saved."""
    ap = build_parser()
    args = ap.parse_args(argv)
    weights = check(ap, args)
    use_task(args.task)
    plan = Plan.of(args, weights)
    plan.out_dir.mkdir(parents=True, exist_ok=True)
    results = train_missing(args, plan)
    if not results:
        print("no saved runs to report", file=sys.stderr)
        return 1
    body, med = summarise(results, args.target, plan.budget)
    notes = report_notes(args, plan, results, med)
    if not set(MAIN_ARMS) <= set(args.arms):
        # The arm table would hold only these arms: keep the published one.
        print(body, flush=True)
        print(
            "docs/benchmarks.md not written (--arms is a subset): rerun without --arms and"
            " with --report-only to rewrite it from every saved run",
            file=sys.stderr,
        )
        return 0
    if not args.no_write:
        write_report(args, argv, body + "\n".join(notes) + "\n")
    print(body)
    print("\n".join(notes))
    return 0
