"""``inspector retrain``: fine-tune a model on a footage store; promote it only if it is better.

``retrain --footage DIR --base MODEL --out DIR [--timesteps N] [--profile FILE]
[--registry DIR] [--min-recall-delta D] [--max-false-alarm-delta D]``
"""

from __future__ import annotations

import argparse
from pathlib import Path

from inspector.commands._args import (
    add_progress_argument,
    add_threads_argument,
    label_map,
    positive_int,
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``retrain`` verb.

    :param subparsers: the CLI's sub-parser collection.
    """
    p = subparsers.add_parser(
        "retrain",
        help="retrain a model on collected footage; promote it only when it is better",
        description=(
            "Fine-tune the base model on the footage store's train split (HybridPPO, the base "
            "as initial weights and KL teacher), evaluate base and candidate on the held-out "
            "frames, write retrain_report.json/.png, and export + register the candidate only "
            "when its defect recall is not lower and its false-alarm rate not higher than the "
            "base's (within the allowed deltas)."
        ),
    )
    p.add_argument("--footage", required=True, type=Path, help="the footage store")
    p.add_argument("--base", required=True, help="the base model (run directory or model.zip)")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument(
        "--timesteps", type=positive_int, default=50_000, help="fine-tuning steps (50000)"
    )
    p.add_argument("--profile", type=Path, help="reward profile (default: the base's)")
    p.add_argument("--config", type=Path, help="TrainConfig YAML")
    p.add_argument(
        "--registry", type=Path, default=Path("registry"), help="model registry (./registry)"
    )
    p.add_argument(
        "--min-recall-delta",
        type=float,
        default=0.0,
        help="candidate recall - base recall must be at least this (default 0)",
    )
    p.add_argument(
        "--max-false-alarm-delta",
        type=float,
        default=0.0,
        help="candidate false-alarm rate - base rate must be at most this (default 0)",
    )
    p.add_argument("--label-map", help="rename store labels for the profile, old:new,...")
    p.add_argument("--seed", type=int, help="random seed (overrides the config)")
    add_progress_argument(p)
    add_threads_argument(p)
    p.set_defaults(func=run_retrain)
    return p


def run_retrain(args: argparse.Namespace) -> int:
    """Run ``retrain``; exit 0 when promoted, 1 when the gate refused."""
    from inspector.errors import InspectorError
    from inspector.train.config import TrainConfig
    from inspector.workflows.retrain import Gate, retrain

    if args.timesteps < 1:
        raise InspectorError(f"--timesteps must be positive, got {args.timesteps}")
    cfg = TrainConfig.load(args.config) if args.config else TrainConfig()
    if args.seed is not None:
        cfg = cfg.replace(seed=args.seed)
    note = cfg.minibatch()[1]
    if note:
        print(f"retrain: note: {note}")
    report = retrain(
        args.footage,
        args.base,
        args.out,
        timesteps=args.timesteps,
        profile=args.profile,
        cfg=cfg,
        registry=args.registry,
        gate=Gate(args.min_recall_delta, args.max_false_alarm_delta),
        label_map=label_map(args.label_map),
        progress=not args.no_progress,
    )
    print_comparison(report)
    if report["promoted"]:
        v = report.get("registry_version")
        print(f"promoted: {report['onnx']}" + (f" -> registry version {v}" if v else ""))
    else:
        print("not promoted: " + "; ".join(report["gate"]["reasons"]))
    print(f"report: {Path(args.out) / 'retrain_report.json'}")
    return 0 if report["promoted"] else 1


def print_comparison(report: dict) -> None:
    """Base against candidate on the held-out frames: the gate's figures, each class's
    recall, and the parts whose verdict was forced at the step budget."""
    from inspector.train.evaluate import forced_line

    view = report["comparison_view"]
    be, ce = report["base_metrics"], report["candidate_metrics"]
    b, c = be[view], ce[view]
    print(f"retrain: {report['initialisation']}")
    judged = ce.get("judged") or {}
    print(f"held-out: {judged.get('about', str(report['heldout_frames']) + ' frames')}")
    shown = "per-class" if view == "full" else "ok vs defect"
    print(f"  compared {shown} (the gate's view)")
    for k in ("accuracy", "balanced_accuracy", "defect_recall", "false_alarm_rate"):
        print(f"  {k:<18} base {_f(b.get(k))}  candidate {_f(c.get(k))}")
    bf, cf = be.get("full") or {}, ce.get("full") or {}
    classes = cf.get("classes") or bf.get("classes") or []
    if classes:
        print("  recall per class (truth -> declared the same class):")
    for cls in classes:
        br = (bf.get("per_class_recall") or {}).get(cls)
        cr = (cf.get("per_class_recall") or {}).get(cls)
        note = "" if bf else " (the base has other classes)"
        print(f"    {cls:<16} base {_f(br)}  candidate {_f(cr)}{note}")
    for who, ev in (("base", be), ("candidate", ce)):
        line = forced_line(ev[view])
        if line:
            named = ", ".join(ev.get("forced_parts", [])[:5])
            print(f"  {who}: {line}" + (f" (e.g. {named})" if named else ""))


def _f(v: float | None) -> str:
    return "  n/a" if v is None else f"{v:.3f}"
