"""``inspector train`` and ``inspector eval``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from inspector.commands._args import positive_int
from inspector.commands._members import add_members_arguments


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a policy with HybridPPO",
        description="Train a scan-focus-classify policy with HybridPPO (PPO + cross-entropy + KL).",
    )
    p.add_argument("--profile", required=True, help="reward profile YAML")
    p.add_argument("--camera", required=True, help="camera driver (synthetic, folder, ...)")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="driver parameter"
    )
    p.add_argument(
        "--timesteps", type=positive_int, required=True, help="environment steps to train"
    )
    p.add_argument("--out", required=True, help="run directory (model, config, report)")
    p.add_argument("--config", help="TrainConfig YAML (see docs: every field documented)")
    p.add_argument("--teacher", help="teacher model for the KL term ('scripted', 'none' or a run)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--seed", type=int, help="random seed (overrides the config)")
    p.add_argument(
        "--n-envs", type=positive_int, help="parallel environments (overrides the config)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_members_arguments(p)
    p.set_defaults(func=run_train)

    e = sub.add_parser(
        "eval",
        help="evaluate a model (.zip run, .onnx or .engine)",
        description="Evaluate a trained run or an exported .onnx/.engine on fixed parts.",
    )
    e.add_argument("model", help="run directory, model.zip, .onnx or .engine")
    e.add_argument("--camera", required=True, help="camera driver")
    e.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="driver parameter"
    )
    e.add_argument(
        "--episodes", type=positive_int, default=100, help="parts to inspect (default 100)"
    )
    e.add_argument("--json", help="write the metrics as JSON here")
    e.add_argument("--plot", help="write the confusion matrix and glimpse paths here (PNG)")
    e.set_defaults(func=run_eval)


def run_train(args: argparse.Namespace) -> int:
    from inspector.camera import parse_params
    from inspector.errors import InspectorError
    from inspector.train.config import TrainConfig
    from inspector.train.runner import train_run

    if not Path(args.profile).is_file():
        raise InspectorError(f"profile not found: {args.profile}")
    cfg = TrainConfig.load(args.config) if args.config else TrainConfig()
    changes = {}
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.n_envs is not None:
        changes["n_envs"] = args.n_envs
    if changes:
        try:
            cfg = cfg.replace(**changes)
        except ValueError as exc:
            raise InspectorError(str(exc)) from None
    if args.members > 1 or args.ray:
        from inspector.commands._members import run_members

        return run_members(args, cfg)
    res = train_run(
        args.profile,
        args.camera,
        parse_params(args.param),
        args.timesteps,
        args.out,
        cfg,
        teacher_path=args.teacher,
        resume=args.resume,
        progress=not args.no_progress,
    )
    print(f"trained {res.timesteps} steps -> {res.model_path}")
    if res.report:
        r = res.report
        print(
            f"eval: accuracy {r['accuracy']:.3f}, balanced {r['balanced_accuracy']:.3f}, "
            f"mean steps {r['mean_steps']:.1f}, native share {r['native_share']:.2f}"
        )
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from inspector.camera import parse_params
    from inspector.errors import InspectorError
    from inspector.runtime.backends import load_policy
    from inspector.train.evaluate import evaluate, write_report

    if args.episodes < 1:
        raise InspectorError(f"--episodes must be positive, got {args.episodes}")
    policy = load_policy(args.model, allow_torch=True)
    result, kept = evaluate(policy, args.camera, parse_params(args.param), args.episodes, keep=6)
    result["model"] = str(args.model)
    result["backend"] = policy.backend
    result["scan"] = dict(policy.meta.scan)
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
    print(json.dumps(summary))
    return 0
