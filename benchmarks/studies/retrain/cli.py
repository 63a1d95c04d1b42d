"""Measure the retraining (or read it back) and write its section of the report."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    RESULTS,
    ROOT,
    find_result,
    magnetic_tile_root,
    parser,
    save_result,
    table,
    write_section,
)
from benchmarks.studies import retrain as study

STUDY = "retrain"
KEYS = ("balanced_accuracy", "accuracy", "defect_recall", "false_alarm_rate")


def build_parser() -> argparse.ArgumentParser:
    """The command line's options."""
    ap = parser(study.__doc__, quick="small step counts (minutes)")
    ap.add_argument("--base", help="reuse this base run instead of training one")
    ap.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="write the section from the saved figures of this configuration (the section"
        " keeps its Measured line)",
    )
    return ap


def config_of(args: argparse.Namespace) -> dict[str, Any]:
    """What a result is selected by: the mode, whether the base was given, the steps."""
    base_steps, retrain_steps = (4096, 8192) if args.quick else (50_000, 100_000)
    return {
        "mode": "quick" if args.quick else "full",
        "base_given": bool(args.base),
        "base_steps": 0 if args.base else base_steps,
        "retrain_steps": retrain_steps,
    }


def result_path(config: dict[str, Any]) -> Path:
    """Where the figures of ``config`` are saved."""
    name = config["mode"] + ("_given_base" if config["base_given"] else "")
    return RESULTS / STUDY / f"{name}.json"


def measure(args: argparse.Namespace, config: dict[str, Any], mt: Path) -> dict[str, Any]:
    """Train the base (unless given), import the footage, retrain, evaluate both on test."""
    from inspector.footage.importers import import_footage
    from inspector.footage.store import FootageStore
    from inspector.train.config import TrainConfig
    from inspector.train.runner import train_run
    from inspector.train.torch_policy import load_any_policy
    from inspector.workflows.retrain import evaluate_all, retrain

    work = args.work or Path(tempfile.mkdtemp(prefix="bench_retrain_"))
    work.mkdir(parents=True, exist_ok=True)
    cfg = TrainConfig(n_envs=2, n_steps=128, batch_size=128, n_epochs=2, final_eval_episodes=0)
    t0 = time.time()
    base = Path(args.base) if args.base else work / "base"
    if not args.base:
        profile = str(ROOT / "reward_profiles" / "lcd_panel.yaml")
        train_run(profile, "synthetic", {"size": 256}, config["base_steps"], base, cfg,
                  progress=False, evaluate_after=False)  # fmt: skip
    t_base = time.time() - t0
    with FootageStore(work / "store", create=True) as store:
        imp = import_footage(store, mt / "splits.csv", "csv", split="train", progress=False)
        summary = store.summary()
    t0 = time.time()
    rep = retrain(
        work / "store",
        base,
        work / "out",
        timesteps=config["retrain_steps"],
        profile=ROOT / "reward_profiles" / "magnetic_tile.yaml",
        cfg=cfg,
        registry=work / "registry",
        progress=False,
    )
    t_retrain = time.time() - t0
    test = {"path": str(mt), "manifest": "splits.csv", "split": "test"}

    def on_test(run: Path) -> dict:
        policy = load_any_policy(run)
        return evaluate_all(policy, "folder", test, truth_ok_class="free")

    record = {
        "base_test": on_test(base),
        "candidate_test": on_test(rep["candidate"]),
        "imported": imp.new,
        "store_splits": dict(summary["splits"]),
        "report": rep,
        "wall_s": {"base": t_base, "retrain": t_retrain},
    }
    return json.loads(json.dumps(record, default=str))  # paths as text


def fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def report(config: dict[str, Any], r: dict[str, Any]) -> str:
    """The section's markdown from a saved result."""
    base_t, cand_t, rep = r["base_test"], r["candidate_test"], r["report"]
    rows = [
        ["base (synthetic panels), ok vs defect"] + [fmt(base_t["binary"][k]) for k in KEYS],
        ["retrained, ok vs defect"] + [fmt(cand_t["binary"][k]) for k in KEYS],
        ["retrained, six classes"] + [fmt(cand_t["full"][k]) for k in KEYS],
    ]
    base = "given" if config["base_given"] else f"{config['base_steps']} steps"
    if not config["base_given"]:
        base += " on synthetic 256 px panels"
    splits, gate = r["store_splits"], rep["gate"]
    return (
        f"Magnetic-tile test split ({cand_t['frames']} frames, never imported). Base: {base}"
        f" (classes ok, line, point). Footage: the train split, {r['imported']} frames imported"
        f" ({splits.get('train', 0)} train / {splits.get('heldout', 0)} held out by hash)."
        f" Retrained {rep['timesteps']} steps with the magnetic_tile profile.\n\n"
        + table(["model / view", *KEYS], rows)
        + f"\nInitialisation: {rep['initialisation']}.\n\n"
        "The base cannot name the six tile classes, so its only comparable figures are "
        "the two-class ones (free against any defect).\n\n"
        f"Gate on the store's held-out frames ({rep['heldout_frames']} frames, "
        f"{rep['comparison_view']} view): {'promoted' if rep['promoted'] else 'refused'}"
        f" ({'; '.join(gate['reasons'])}).\n\n"
        f"Wall time: base {r['wall_s']['base']:.0f} s, retrain + gate"
        f" {r['wall_s']['retrain']:.0f} s.\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure (or with ``--report-only`` read back) and write the section; 2 when the
    footage or the saved figures are missing."""
    args = build_parser().parse_args(argv)
    config = config_of(args)
    if args.report_only:
        saved = find_result(RESULTS / STUDY, STUDY, **config)
        if saved is None:
            print(f"no saved retrain result for {config}", file=sys.stderr)
            return 2
        result = saved.data
    else:
        mt = magnetic_tile_root()
        if mt is None:
            print("magnetic-tile footage not found (set INSPECTOR_DATA)", file=sys.stderr)
            return 2
        result = save_result(result_path(config), STUDY, config, measure(args, config, mt))
    body = report(config, result)
    print(body)
    if not args.no_write:
        command = "python -m benchmarks.studies.retrain" + (" --quick" if args.quick else "")
        if args.base:
            command += " --base RUN"
        title = "Retraining from collected footage"
        write_section("retrain", title, body, command, doc=args.doc, keep_measured=args.report_only)
    return 0
