"""The command line: which runs to train or score, then the report."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    find_result,
    magnetic_tile_root,
    non_negative_int,
    parser,
    torch_threads,
    write_section,
)
from benchmarks.studies import quality_magnetic_tile as study
from benchmarks.studies.quality_magnetic_tile.agent import (
    agent_config,
    reselect,
    run_agent,
    variant_profile,
)
from benchmarks.studies.quality_magnetic_tile.baselines import run_fullframe, run_tiling
from benchmarks.studies.quality_magnetic_tile.data import Sample, load_split
from benchmarks.studies.quality_magnetic_tile.ensembles import ensemble_path, run_ensemble
from benchmarks.studies.quality_magnetic_tile.report import report
from benchmarks.studies.quality_magnetic_tile.rescore import rescore
from benchmarks.studies.quality_magnetic_tile.runs import (
    agent_variant,
    ensemble_config,
    find_run,
    run_config,
    run_path,
    runs,
    save_run,
)
from benchmarks.studies.quality_magnetic_tile.settings import (
    METHODS,
    PROFILE,
    RESULTS,
    RUNS,
    STUDY,
    fmt,
)
from benchmarks.studies.quality_magnetic_tile.tables import results_by_seed
from benchmarks.studies.shared import BALANCED_STOP_WEIGHT


def _public(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if not k.startswith("_")}


def seed_list(text: str) -> list[int]:
    """argparse type: "0,1,2" -> [0, 1, 2] (two or more different non-negative seeds)."""
    try:
        seeds = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1, got {text!r}") from None
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(
            f"expected two or more different non-negative seeds, got {text!r}"
        )
    return seeds


def add_agent_flags(ap: argparse.ArgumentParser) -> None:
    """The agent variant's options (``--agent-...``)."""
    ap.add_argument(
        "--agent-perception",
        type=non_negative_int,
        default=0,
        help="the agent first pretrains its glimpse CNN on this many mask-labelled native"
        " crops of the train split (TrainConfig.perception_samples; inside its budget)",
    )
    ap.add_argument(
        "--agent-freeze",
        action="store_true",
        help="keep the agent's glimpse CNN fixed after that (TrainConfig.perception_freeze)",
    )
    ap.add_argument(
        "--agent-memory",
        type=non_negative_int,
        default=0,
        help="glimpses the agent's observation remembers (the profile's scan.memory, default 4)",
    )
    ap.add_argument(
        "--agent-evidence",
        action="store_true",
        help="the agent's per-glimpse evidence head (TrainConfig.glimpse_evidence;"
        " pretrained with --agent-perception)",
    )
    ap.add_argument(
        "--agent-balanced-verdict",
        action="store_true",
        help="class-balanced verdict cross-entropy, stop steps weighted"
        f" {BALANCED_STOP_WEIGHT:g} (TrainConfig.verdict_balance / verdict_stop_weight)",
    )
    ap.add_argument(
        "--agent-all-levels",
        action="store_true",
        help="perception crops from every zoom level, not only native"
        " (TrainConfig.perception_levels: all; needs --agent-perception)",
    )
    ap.add_argument(
        "--agent-overview-evidence",
        action="store_true",
        help="the evidence head judges the overview too (TrainConfig.overview_evidence;"
        " needs --agent-evidence)",
    )
    ap.add_argument(
        "--agent-select-auroc",
        action="store_true",
        help="keep the chunk with the best val defect AUROC (default: val balanced accuracy)",
    )
    ap.add_argument(
        "--agent-perception-epochs",
        type=non_negative_int,
        default=0,
        help="epochs of that pretraining (TrainConfig.perception_epochs; 0: its default, 12)",
    )
    ap.add_argument(
        "--agent-cnn-channels",
        type=non_negative_int,
        default=0,
        help="width of the agent's glimpse CNN (TrainConfig.cnn_channels; 0: its default, 8)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line's options."""
    ap = parser(study.__doc__, quick="2.5 min a method (< 10 min in all)", full_doc=True)
    ap.add_argument("--budget-min", type=float, help="minutes a method (default 20, quick 2.5)")
    ap.add_argument("--seed", type=int, default=0, help="seed of all three methods (default 0)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (at most 2)")
    ap.add_argument(
        "--data", help="magnetic-tile folder (default: benchmarks.harness.magnetic_tile_root)"
    )
    ap.add_argument("--force", action="store_true", help="rerun methods whose results exist")
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from the saved results only (trains, scores and rescores"
        " nothing; the section keeps its Measured line)",
    )
    add_agent_flags(ap)
    ap.add_argument(
        "--rescore",
        action="store_true",
        help="add the goal's operating point to this seed's saved results from their saved"
        " models (agents' best/, the baselines' .pt), training nothing",
    )
    ap.add_argument(
        "--reselect",
        action="store_true",
        help="with --agent-select-auroc: derive that run from the saved one with the same"
        " flags (kept by val balanced accuracy), re-picking among its chunk checkpoints"
        " (training does not depend on the choice), training nothing",
    )
    ap.add_argument(
        "--ensemble-seeds",
        type=seed_list,
        help="comma-separated seeds, lead first (e.g. 0,1): score the verdict ensemble of the"
        " saved agent runs with the agent flags and --budget-min given, training nothing",
    )
    return ap


def check(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse flags that need another flag (argparse exits with the message)."""
    if args.agent_all_levels and not args.agent_perception:
        ap.error("--agent-all-levels needs --agent-perception N (it chooses the crops' levels)")
    if args.agent_overview_evidence and not args.agent_evidence:
        ap.error("--agent-overview-evidence needs --agent-evidence (the head it reuses)")
    if args.reselect and not args.agent_select_auroc:
        ap.error("--reselect needs --agent-select-auroc (the choice it re-makes)")
    if args.agent_perception_epochs and not args.agent_perception:
        ap.error("--agent-perception-epochs needs --agent-perception N (the pretraining it sets)")
    if args.agent_freeze and not args.agent_perception:
        ap.error("--agent-freeze needs --agent-perception N (there is nothing pretrained to keep)")


def variant_of(args: argparse.Namespace) -> dict[str, Any]:
    """The agent variant the ``--agent-...`` flags name (:func:`runs.agent_variant`)."""
    return agent_variant(
        perception=args.agent_perception,
        freeze=args.agent_freeze,
        memory=args.agent_memory,
        evidence=args.agent_evidence,
        balanced=args.agent_balanced_verdict,
        all_levels=args.agent_all_levels,
        overview_evidence=args.agent_overview_evidence,
        cnn_channels=args.agent_cnn_channels,
        perception_epochs=args.agent_perception_epochs,
        select_auroc=args.agent_select_auroc,
    )


@dataclass
class Context:
    """What one invocation works on.

    :param root: the magnetic-tile folder; ``mode``: quick or full; ``budget_s``: seconds
        a method; ``out_dir``: its saved results; ``runs_dir``: its models.
    """

    args: argparse.Namespace
    root: Path
    mode: str
    budget_s: float
    out_dir: Path
    runs_dir: Path
    classes: list[str]
    ok_class: str
    data: dict[str, list[Sample]] = field(default_factory=dict)

    def frames(self, split: str) -> list[Sample]:
        """The frames of ``split``, loaded once."""
        if split not in self.data:
            t = time.perf_counter()
            self.data[split] = load_split(self.root, split)
            print(
                f"loaded {len(self.data[split])} {split} frames in {time.perf_counter() - t:.1f} s"
            )
        return self.data[split]

    def config(self, method: str, variant: dict[str, Any]) -> dict[str, Any]:
        """The configuration of this seed's run of ``method``."""
        return run_config(self.mode, method, self.args.seed, self.budget_s, variant)


def score_ensemble(ctx: Context, variant: dict[str, Any]) -> None:
    """Score and save the verdict ensemble of ``--ensemble-seeds`` unless it is saved."""
    args = ctx.args
    config = ensemble_config(ctx.mode, variant, args.ensemble_seeds, ctx.budget_s)
    key = config["key"]
    if not args.force and find_result(ctx.out_dir / "ensembles", STUDY, **config) is not None:
        return
    print(f"{key}: verdict ensemble of seeds {args.ensemble_seeds}", flush=True)
    r = run_ensemble(ctx.out_dir, ctx.runs_dir, key, args.ensemble_seeds, ctx.budget_s, ctx.root)
    save_run(ensemble_path(ctx.out_dir, key, args.ensemble_seeds, ctx.budget_s), config, r)
    op = r["operating_point"]
    print(
        f"  ensemble test: AUROC {fmt(op['auroc_test'])}, at the val-chosen bias recall"
        f" {fmt((op.get('test') or {}).get('defect_recall'))}, false alarms"
        f" {fmt((op.get('test') or {}).get('false_alarm_rate'))}; pixel fraction"
        f" {r['test']['pixel_fraction']:.4f}",
        flush=True,
    )


def train_agent(ctx: Context, key: str, suffix: str) -> dict[str, Any]:
    """Train this seed's agent variant (or re-select it, ``--reselect``)."""
    args = ctx.args
    if args.reselect:
        base_key = key.removesuffix("_sauc")
        src = find_run(ctx.out_dir, base_key, args.seed, ctx.budget_s)
        return reselect(src and src.data, ctx.runs_dir, base_key, suffix, ctx.root)
    run_dir = ctx.runs_dir / f"{key}{suffix}"
    if args.force and run_dir.exists():
        shutil.rmtree(run_dir)
    cfg = agent_config(
        args.seed,
        perception_samples=args.agent_perception,
        perception_freeze=args.agent_freeze,
        glimpse_evidence=args.agent_evidence,
        overview_evidence=args.agent_overview_evidence,
        perception_levels="all" if args.agent_all_levels else "native",
        **({"cnn_channels": args.agent_cnn_channels} if args.agent_cnn_channels else {}),
        **(
            {"perception_epochs": args.agent_perception_epochs}
            if args.agent_perception_epochs
            else {}
        ),
        **(
            {"verdict_balance": True, "verdict_stop_weight": BALANCED_STOP_WEIGHT}
            if args.agent_balanced_verdict
            else {}
        ),
    )
    prof_path = (
        variant_profile(args.agent_memory, run_dir / "profile_variant.yaml")
        if args.agent_memory
        else PROFILE
    )
    return run_agent(
        ctx.root,
        ctx.budget_s,
        args.seed,
        run_dir,
        chunk=2048 if args.quick else 16384,
        cfg=cfg,
        profile_path=prof_path,
        select="defect_auroc" if args.agent_select_auroc else "balanced_accuracy",
    )


def train_baseline(ctx: Context, method: str, suffix: str) -> dict[str, Any]:
    """Train this seed's tiling or full-frame baseline; its net is kept under runs/."""
    import torch

    run = run_tiling if method == "tiling" else run_fullframe
    r = run(
        ctx.frames("train"),
        ctx.frames("val"),
        ctx.frames("test"),
        ctx.budget_s,
        ctx.args.seed,
        ctx.classes,
        ctx.ok_class,
        select_every_s=15.0 if ctx.args.quick else 60.0,
    )
    ctx.runs_dir.mkdir(parents=True, exist_ok=True)
    torch.save(r["_net"].state_dict(), ctx.runs_dir / f"{method}{suffix}.pt")
    return r


def run_methods(ctx: Context, variant: dict[str, Any], methods: list[str]) -> dict[str, dict]:
    """This seed's result of every method: saved ones read, missing ones of ``methods``
    trained and saved (none with ``--report-only``); keyed by results key."""
    args, results = ctx.args, {}
    suffix = f"_s{args.seed}_{ctx.budget_s:.0f}s"
    for meth in METHODS:
        config = ctx.config(meth, variant)
        key = config["key"]
        saved = find_run(ctx.out_dir, key, args.seed, ctx.budget_s)
        if saved is not None and not args.force:
            results[key] = saved.data
            continue
        if meth not in methods or args.report_only:
            continue
        print(f"{key}: {ctx.budget_s:.0f} s budget, seed {args.seed}", flush=True)
        if meth == "agent":
            r = train_agent(ctx, key, suffix)
        else:
            r = train_baseline(ctx, meth, suffix)
        r = save_run(run_path(ctx.out_dir, config), config, _public(r))
        m = r["test"]
        print(
            f"  {meth} test: bal.acc {m['balanced_accuracy']:.3f}, defect recall "
            f"{fmt(m['defect_recall'])}, false alarms {fmt(m['false_alarm_rate'])}, "
            f"pixel fraction {m['pixel_fraction']:.4f}, {r['spent_s']:.0f} s",
            flush=True,
        )
        results[key] = r
    # Every other saved agent variant of this seed and budget goes in the table too.
    for other in runs(ctx.out_dir, method="agent", seed=args.seed, budget_s=round(ctx.budget_s)):
        results.setdefault(other.config["key"], other.data)
    return results


def write_report(ctx: Context, results: dict[str, dict], keys: list[str]) -> None:
    """Print the section; write it when ``keys`` (this seed's methods) all have results."""
    args = ctx.args
    body = report(
        results,
        ctx.mode,
        ctx.classes,
        ctx.ok_class,
        threads=max(1, min(2, args.threads)),
        by_seed=results_by_seed(ctx.out_dir, ctx.budget_s),
        op_by_seed=results_by_seed(ctx.out_dir, ctx.budget_s, "operating_point"),
        out_dir=ctx.out_dir,
    )
    print(body)
    if args.no_write or not all(k in results for k in keys):
        return
    cmd = "python -m benchmarks.studies.quality_magnetic_tile" + (" --quick" if args.quick else "")
    if args.budget_min:
        cmd += f" --budget-min {args.budget_min:g}"
    cmd += f" --seed {args.seed}"
    write_section(
        "quality_magnetic_tile",
        "Quality on real footage (magnetic tiles): agent vs tiling vs full-frame CNN",
        body,
        command=cmd,
        doc=args.doc,
        keep_measured=args.report_only,
    )


def main(argv: list[str] | None = None) -> int:
    """Train or score what is asked and missing, then write the report; 2 on bad input."""
    ap = build_parser()
    args = ap.parse_args(argv)
    check(ap, args)
    from inspector.profile import load_profile

    torch_threads(max(1, min(2, args.threads)), interop=1)
    root = Path(args.data) if args.data else magnetic_tile_root()
    if root is None or not (root / "splits.csv").is_file():
        print("magnetic-tile footage not found: set INSPECTOR_DATA or pass --data", file=sys.stderr)
        return 2
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        print(f"unknown method(s) {unknown}; expected {', '.join(METHODS)}", file=sys.stderr)
        return 2
    mode = "quick" if args.quick else "full"
    profile = load_profile(PROFILE)
    ctx = Context(
        args,
        root,
        mode,
        60.0 * (args.budget_min or (2.5 if args.quick else 20.0)),
        RESULTS / mode,
        RUNS / mode,
        list(profile.classes),
        profile.ok_class,
    )
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    variant = variant_of(args)
    if args.rescore and not args.report_only:
        rescore(ctx.out_dir, ctx.runs_dir, args.seed, ctx.budget_s, root, ctx.frames, args.force)
    if args.ensemble_seeds and not args.report_only:
        score_ensemble(ctx, variant)
    results = run_methods(ctx, variant, methods)
    write_report(ctx, results, [ctx.config(m, variant)["key"] for m in METHODS])
    return 0
