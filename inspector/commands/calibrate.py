"""``inspector calibrate``: choose a model's operating point on labelled footage."""

from __future__ import annotations

import argparse
from pathlib import Path

from inspector.commands._args import (
    NO_CONFIDENCE,
    add_search_depth_argument,
    add_threads_argument,
    confidence,
    default_store_split,
    fraction,
    positive_int,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` verb.

    :param sub: the CLI's sub-parser collection.
    """
    p = sub.add_parser(
        "calibrate",
        help="choose how readily a model calls a part defective (its operating point)",
        description=(
            "Run the model once on labelled parts (the validation split, not the test split) "
            "and choose the ok bias, the log-odds added to the ok class before the verdict: "
            "by default for the best balanced accuracy, or for the highest defect recall at "
            "a false-alarm ceiling, or the fewest false alarms at a recall floor. A run "
            "directory keeps it in operating_point.json (export carries it into the ONNX "
            "metadata); an .onnx file gets it in its metadata."
        ),
    )
    p.add_argument(
        "model",
        help="run directory, model.zip, .onnx, or a train --members run's student or"
        " ensemble directory (as eval and export take them)",
    )
    p.add_argument("--camera", required=True, help="camera driver (folder, synthetic, ...)")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="driver parameter"
    )
    p.add_argument(
        "--episodes",
        type=positive_int,
        help="parts to inspect (default: every frame of a finite source once, as eval; "
        "100 synthetic panels)",
    )
    goal = p.add_mutually_exclusive_group()
    goal.add_argument(
        "--max-false-alarms",
        type=fraction,
        metavar="F",
        help="highest defect recall with at most this false-alarm rate (e.g. 0.05)",
    )
    goal.add_argument(
        "--min-recall",
        type=fraction,
        metavar="R",
        help="fewest false alarms with at least this defect recall (e.g. 0.95)",
    )
    p.add_argument(
        "--confidence",
        type=confidence,
        metavar="C",
        help="with --max-false-alarms or --min-recall: the confidence at which the target "
        "holds on these parts (default 0.8: the rate's one-sided Clopper-Pearson bound meets "
        "it, so fewer parts need a wider margin); none: the rate these parts show",
    )
    add_search_depth_argument(p, "auto")
    p.add_argument("--dry-run", action="store_true", help="print the choice, store nothing")
    add_threads_argument(p)
    p.set_defaults(func=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    """Choose the ok bias and store it with the model."""
    from inspector.camera import parse_params
    from inspector.errors import InspectorError

    path = Path(args.model)
    suffix = path.suffix.lower()
    if suffix in (".engine", ".plan"):
        raise InspectorError(
            f"{path}: calibrate the ONNX file (or the run) and build the engine from it again; "
            "the engine's sidecar takes the ONNX metadata"
        )
    if not (path.is_dir() or suffix in (".zip", ".onnx")):
        raise InspectorError(
            f"{path}: expected a run directory, model.zip, .onnx or an ensemble directory"
        )
    default_store_split(args, "calibrate", "val", "frames for choosing, not for judging")
    params = parse_params(args.param)
    if str(params.get("split", "")).lower() in ("test", "heldout"):
        print(
            f"calibrate: warning: choosing the operating point on the {params['split']} split "
            "makes the final figures optimistic; use the validation split (split=val)"
        )
    objective, target, held = goal(args)

    from inspector.train.calibration import choose_operating_point, store_in_run, trained_depth
    from inspector.train.torch_policy import load_any_policy

    policy = load_any_policy(path)
    deepest = trained_depth(path) if args.search_depth == "auto" else None
    if deepest is not None:
        print(
            f"calibrate: search depth auto: no level deeper than {deepest}, the depth the "
            "model was trained at (its run's config.yaml; --search-depth full or a LEVEL to choose)"
        )
    cal = choose_operating_point(
        policy,
        args.camera,
        params,
        args.episodes,
        objective,
        target,
        args.search_depth,
        deepest,
        held,
    )
    bias = cal.ok_bias
    levels = int(policy.meta.scan.get("zoom_levels", 1))
    for line in choice_lines(cal, levels):
        print(line)
    if args.dry_run:
        print("calibrate: --dry-run, nothing stored")
        return 0
    if suffix == ".onnx":
        from inspector.export.onnx import write_ok_bias

        write_ok_bias(path, bias, cal.max_zoom)
        print(
            f"calibrate: ok bias {bias:+.2f} written into {path}'s metadata, with the search"
            f" depth ({cal.depth_words(levels)})"
        )
        return 0
    out = store_in_run(path if path.is_dir() else path.parent, cal)
    print(f"calibrate: wrote {out} (export carries it into the ONNX metadata)")
    return 0


def goal(args: argparse.Namespace) -> tuple[str, float | None, float | None]:
    """(objective, target, confidence) of calibrate's arguments: a ceiling or floor holds
    at ``--confidence`` (default 0.8; ``none``: the rate the parts show).

    :raises InspectorError: ``--confidence`` without a ceiling or floor.
    """
    from inspector.errors import InspectorError
    from inspector.policy.operating_point import DEFAULT_CONFIDENCE

    if args.max_false_alarms is not None:
        objective, target = "max_false_alarms", args.max_false_alarms
    elif args.min_recall is not None:
        objective, target = "min_recall", args.min_recall
    else:
        if args.confidence is not None:
            raise InspectorError(
                "calibrate: --confidence goes with --max-false-alarms or --min-recall"
            )
        return "balanced", None, None
    if args.confidence == NO_CONFIDENCE:
        return objective, target, None
    return objective, target, DEFAULT_CONFIDENCE if args.confidence is None else args.confidence


def choice_lines(cal, levels: int) -> list[str]:
    """What calibrate prints about its choice: the parts and objective, each depth tried,
    the figures as trained and at the chosen bias, the bound held, the search depth."""
    lines = [
        f"calibrate: {cal.frames} parts from {cal.source}, objective {cal.objective}"
        + (f" {cal.target:g}" if cal.target is not None else "")
        + (f" at {cal.confidence:g} confidence" if cal.confidence is not None else ""),
        *depth_lines(cal),
    ]
    for name, r, b in (("as trained", cal.at_zero, 0.0), ("chosen", cal.at_bias, cal.ok_bias)):
        lines.append(
            f"  {name:10s} ok bias {b:+6.2f}: balanced {_f(r['balanced_accuracy'])}, "
            f"defect recall {_f(r['defect_recall'])}, false alarms {_f(r['false_alarm_rate'])}"
        )
    if cal.bound_words():
        lines.append(f"  held to the target:{cal.bound_words()}")
    lines.append(f"  search depth: {cal.depth_words(levels)}")
    return lines


def depth_lines(cal) -> list[str]:
    """One line per search depth tried (none when only one was)."""
    lines = []
    for e in cal.depths:
        head = f"  depth {e['max_zoom']}: {e['mean_actions']:5.2f} actions/part, "
        if "error" in e:
            lines.append(head + f"objective not met ({e['error']})")
            continue
        r = e["at_bias"]
        lines.append(
            head + f"ok bias {e['ok_bias']:+6.2f}: balanced {_f(r['balanced_accuracy'])}, "
            f"defect recall {_f(r['defect_recall'])}, false alarms {_f(r['false_alarm_rate'])}"
        )
    return lines


def _f(v: float) -> str:
    return "n/a" if v != v else f"{v:.3f}"
