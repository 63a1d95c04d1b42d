"""``inspector train`` and ``inspector eval``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from inspector.commands._args import (
    NO_CONFIDENCE,
    add_progress_argument,
    add_search_depth_argument,
    add_threads_argument,
    confidence,
    default_store_split,
    fraction,
    positive_int,
)
from inspector.commands._members import add_members_arguments


def add_parser(sub: argparse._SubParsersAction) -> None:
    from inspector.train.presets import PRESETS, preset_names

    presets = "; ".join(f"{k}: {v.about} ({v.timesteps:,} steps)" for k, v in PRESETS.items())
    p = sub.add_parser(
        "train",
        help="train a policy with HybridPPO",
        description="Train a scan-focus-classify policy with HybridPPO (PPO + cross-entropy + "
        "KL) with the best recipe known for the kind of data (--preset, chosen from the camera "
        "by default). With held-out labelled frames (the val split of a manifest; synthetic "
        "panels of another seed) the run keeps its best model on them, not the last, and "
        "ends by choosing the operating point there, as calibrate does. Its closing "
        "evaluation is on held-out frames (a manifest's test split, a footage store's heldout "
        "split), never on the frames it trained or chose on; without any, it says so.",
    )
    p.add_argument("--profile", required=True, help="reward profile YAML")
    p.add_argument("--camera", required=True, help="camera driver (synthetic, folder, ...)")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="driver parameter"
    )
    p.add_argument(
        "--timesteps",
        type=positive_int,
        help="environment steps of PPO (default: the preset's)",
    )
    p.add_argument("--out", required=True, help="run directory (model, config, report)")
    p.add_argument(
        "--preset",
        choices=preset_names(),
        help=f"the recipe (default auto: synthetic for the synthetic camera, footage for "
        f"every other; with --config and no --preset, the config file alone); {presets}",
    )
    p.add_argument(
        "--config",
        help="TrainConfig YAML (docs/training.md): alone, the whole recipe over the bare "
        "defaults; with --preset, its keys go on top of the preset",
    )
    goal = p.add_mutually_exclusive_group()
    goal.add_argument(
        "--max-false-alarms",
        type=fraction,
        metavar="F",
        help="operating point: highest val defect recall with at most this false-alarm rate",
    )
    goal.add_argument(
        "--min-recall",
        type=fraction,
        metavar="R",
        help="operating point: fewest val false alarms with at least this defect recall",
    )
    goal.add_argument(
        "--no-calibrate", action="store_true", help="end without choosing an operating point"
    )
    p.add_argument(
        "--confidence",
        type=confidence,
        metavar="C",
        help="with --max-false-alarms or --min-recall: the confidence at which the target "
        "holds on the val frames (default 0.8, TrainConfig operating_confidence); none: the "
        "rate they show (calibrate --confidence)",
    )
    add_search_depth_argument(p, None, trains=True)
    p.add_argument("--teacher", help="teacher model for the KL term ('scripted', 'none' or a run)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--seed", type=int, help="random seed (overrides the config)")
    p.add_argument(
        "--n-envs", type=positive_int, help="parallel environments (overrides the config)"
    )
    add_progress_argument(p)
    add_threads_argument(p)
    add_members_arguments(p)
    p.set_defaults(func=run_train)
    _add_eval_parser(sub)


def _add_eval_parser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "eval",
        help="evaluate a model (.zip run, .onnx or .engine)",
        description="Evaluate a trained run or an exported .onnx/.engine on fixed parts.",
    )
    e.add_argument(
        "model", help="run directory, model.zip, .onnx, .engine or a train --members ensemble"
    )
    e.add_argument("--camera", required=True, help="camera driver")
    e.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="driver parameter"
    )
    e.add_argument(
        "--episodes",
        type=positive_int,
        help="parts to inspect (default: every frame of a finite source once, e.g. a split or "
        "a footage store; 100 synthetic panels)",
    )
    e.add_argument("--json", help="write the metrics as JSON here")
    e.add_argument("--plot", help="write the confusion matrix and glimpse paths here (PNG)")
    add_threads_argument(e)
    e.set_defaults(func=run_eval)


def run_train(args: argparse.Namespace) -> int:
    from inspector.camera import parse_params
    from inspector.errors import InspectorError
    from inspector.profile import load_profile
    from inspector.train import presets
    from inspector.train.config import TrainConfig
    from inspector.train.runner import train_run

    default_store_split(args, "train", "train", "val chooses the kept model, heldout judges")
    if not Path(args.profile).is_file():
        raise InspectorError(f"profile not found: {args.profile}")
    profile = load_profile(args.profile)
    depth = args.search_depth
    levels = int(profile.scan.zoom_levels)
    if isinstance(depth, int) and depth >= levels:  # before training, not at calibration
        raise InspectorError(
            f"--search-depth {depth}: {args.profile} has zoom levels 0..{levels - 1}"
        )
    given_depth = depth not in (None, "auto")  # full or a level: trained where it will run
    if args.config and args.preset is None:  # a config file alone is the whole recipe
        preset, cfg, notes = presets.resolve(presets.NONE, args.camera)
        cfg = TrainConfig.load(args.config)
    else:
        preset, cfg, notes = presets.resolve(
            args.preset, args.camera, profile, rollout_depth=not given_depth
        )
        if args.config:
            cfg = presets.with_config_file(cfg, args.config)
    changes: dict = {}
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.n_envs is not None:
        changes["n_envs"] = args.n_envs
    changes.update(operating_changes(args))
    if depth is not None:
        changes["search_depth"] = depth
    if given_depth:
        changes["rollout_max_zoom"] = None if depth == "full" else depth
    if changes:
        try:
            cfg = cfg.replace(**changes)
        except ValueError as exc:
            raise InspectorError(str(exc)) from None
    timesteps = args.timesteps or preset.timesteps
    notes = [*notes, *filter(None, [cfg.minibatch()[1]])]
    recipe = presets.describe(preset, cfg)
    if args.config and args.preset is None:
        recipe = {**recipe, "name": "config", "about": f"the config file {args.config} alone"}
    print(f"recipe {recipe['name']}: {recipe['about']}; {timesteps:,} steps of PPO")
    for note in notes:
        print(f"  {note}")
    if args.members > 1 or args.ray:
        from inspector.commands._members import run_members

        args.timesteps = timesteps
        if args.distill_timesteps is None and not cfg.distill_timesteps:
            args.distill_timesteps = max(1, round(timesteps * preset.distill_share))
        return run_members(args, cfg)
    res = train_run(
        args.profile,
        args.camera,
        parse_params(args.param),
        timesteps,
        args.out,
        cfg,
        teacher_path=args.teacher,
        resume=args.resume,
        progress=not args.no_progress,
        recipe={**recipe, "notes": notes},
    )
    print(f"trained {res.timesteps} steps -> {res.model_path}")
    if res.report:
        print_report(res.report)
    return 0


def operating_changes(args: argparse.Namespace) -> dict:
    """The TrainConfig changes of ``--max-false-alarms``, ``--min-recall``,
    ``--no-calibrate`` and ``--confidence`` (``none``: the rate the val frames show)."""
    changes: dict = {}
    if args.max_false_alarms is not None:
        changes.update(operating_point="max_false_alarms", operating_target=args.max_false_alarms)
    elif args.min_recall is not None:
        changes.update(operating_point="min_recall", operating_target=args.min_recall)
    elif args.no_calibrate:
        changes.update(operating_point="none", operating_target=None)
    if args.confidence is not None:
        given = None if args.confidence == NO_CONFIDENCE else float(args.confidence)
        changes["operating_confidence"] = given
    return changes


def print_report(r: dict) -> None:
    """The end of ``train``: the kept model, the operating point, the evaluation."""
    kept, op = r.get("kept"), r.get("operating_point")
    if kept:
        print(f"kept: {kept['why']}")
    if op and op.get("frames"):
        f, a = op["frames"], op["at_bias"]
        print(
            f"operating point: ok bias {op['ok_bias']:+.2f} ({op['objective']}) on "
            f"{f['count']} val parts: balanced {a['balanced_accuracy']:.3f}, defect recall "
            f"{_f(a['defect_recall'])}, false alarms {_f(a['false_alarm_rate'])}"
            + (f" (held to the target: {op['held_at']})" if op.get("held_at") else "")
        )
        if op.get("max_zoom") is not None:
            print(
                f"search depth: zoom level {op['max_zoom']} at most, chosen on val (a shallower"
                " search met the objective better; deeper glimpses are cut)"
            )
    elif op:
        print(f"operating point: {op['why']}")
    from inspector.train.evaluate import forced_line

    ev = r.get("evaluation") or {}
    if ev.get("ran") is False:  # no held-out frames: no figure on the training frames
        print(f"eval: none ({ev.get('why')})")
        return
    frames = r.get("eval_frames") or {}
    print(f"eval on {frames.get('about', str(r['episodes']) + ' parts')}:")
    print(
        f"  ok bias {r.get('ok_bias', 0.0):+.2f}: accuracy "
        f"{r['accuracy']:.3f}, balanced {r['balanced_accuracy']:.3f}, "
        f"mean steps {r['mean_steps']:.1f}, native share {r['native_share']:.2f}"
    )
    if "ok_class" in r and r["ok_class"] is None:
        # Classification only: no false alarms to count, so per-class recall instead.
        recall = r.get("per_class_recall") or {}
        print("  per-class recall: " + ", ".join(f"{c} {_f(v)}" for c, v in recall.items()))
    if forced_line(r):
        print(f"  {forced_line(r)}")
    if frames.get("camera") == "synthetic":
        print(
            "  for a held-out figure: inspector eval RUN --camera synthetic --param seed=S "
            "(another seed than training's and validation's)"
        )
    elif not frames.get("held_out"):
        print(
            "  for a held-out figure: inspector eval RUN --camera ... --param split=test "
            "(frames never trained or chosen on)"
        )


def _f(v: float | None) -> str:
    return "n/a" if v is None or v != v else f"{v:.3f}"


def run_eval(args: argparse.Namespace) -> int:
    from inspector.camera import parse_params
    from inspector.errors import InspectorError
    from inspector.train.evaluate import evaluate, write_report
    from inspector.train.torch_policy import load_any_policy

    if args.episodes is not None and args.episodes < 1:
        raise InspectorError(f"--episodes must be positive, got {args.episodes}")
    default_store_split(args, "eval", "heldout", "frames no model was trained or chosen on",
                        err=True)  # fmt: skip
    from inspector.train.evaluate import depth_line, forced_line, trained_source

    policy = load_any_policy(args.model)  # also train --members' ensemble directory
    run_dir = Path(args.model) if Path(args.model).is_dir() else Path(args.model).parent
    result, kept = evaluate(
        policy,
        args.camera,
        parse_params(args.param),
        args.episodes,
        keep=6,
        trained_on=trained_source(run_dir),
    )
    result["model"] = str(args.model)
    result["backend"] = policy.backend
    result["scan"] = dict(policy.meta.scan)
    print(f"eval: judged {result['frames']['about']}", file=sys.stderr)
    for line in filter(None, (forced_line(result), depth_line(result))):
        print(f"eval: {line}", file=sys.stderr)
    if args.json:
        write_report(result, kept, Path(args.json), Path(args.plot) if args.plot else None)
    elif args.plot:
        from inspector.report import plot_eval

        plot_eval(result, kept, Path(args.plot))
    summary = {
        k: result[k]
        for k in (
            "episodes",
            "accuracy",
            "balanced_accuracy",
            "defect_recall",
            "false_alarm_rate",
            "defect_auroc",
            "mean_steps",
            "pixel_fraction",
        )
    }
    summary["ok_bias"] = policy.meta.ok_bias
    if policy.meta.classification_only:
        # No ok class: no false alarms, no defect recall, no operating point to report.
        for k in ("defect_recall", "false_alarm_rate", "defect_auroc", "ok_bias"):
            summary.pop(k)
        summary["classification_only"] = True
        summary["per_class_recall"] = result["per_class_recall"]
    summary["forced_verdicts"] = result["forced_verdicts"]["count"]
    summary["frames"] = {k: result["frames"][k] for k in ("role", "split", "count", "about")}
    print(json.dumps(summary))
    return 0
