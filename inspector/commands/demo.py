"""``inspector demo``: train, evaluate, export and run a station on synthetic panels."""

from __future__ import annotations

import argparse
from pathlib import Path

from inspector.commands._args import non_negative_int, positive_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="the main job end to end on synthetic panels",
        description="Train (or reuse) a policy on synthetic panels, evaluate it, export it to "
        "ONNX and run a station on synthetic parts reporting over MQTT.",
    )
    p.add_argument("--out", default="demo", help="output folder (default demo/)")
    p.add_argument("--parts", type=positive_int, default=200, help="parts the station inspects")
    p.add_argument(
        "--timesteps", type=positive_int, default=2048, help="HybridPPO steps after cloning"
    )
    p.add_argument(
        "--bc-samples", type=non_negative_int, default=8192, help="teacher steps to clone first"
    )
    p.add_argument(
        "--perception-samples",
        type=non_negative_int,
        default=8000,
        help="mask-labelled crops to pretrain the glimpse CNN on first",
    )
    p.add_argument("--eval-episodes", type=positive_int, default=200, help="evaluation parts")
    p.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="training seed (initialisation, sampling, training panels; default 0); the "
        "station's parts stay the same",
    )
    p.add_argument("--mqtt-host", help="use this broker instead of starting one")
    p.add_argument("--mqtt-port", type=int, help="port of --mqtt-host (default 1883)")
    p.add_argument("--retrain", action="store_true", help="train again even if a run is cached")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from inspector.errors import InspectorError
    from inspector.workflows.demo import DemoOptions, run_demo

    for name in ("parts", "timesteps", "eval_episodes"):
        if getattr(args, name) < 1:
            raise InspectorError(f"--{name.replace('_', '-')} must be positive")
    return run_demo(
        DemoOptions(
            out=Path(args.out),
            timesteps=args.timesteps,
            bc_samples=args.bc_samples,
            perception_samples=args.perception_samples,
            parts=args.parts,
            mqtt_host=args.mqtt_host,
            mqtt_port=args.mqtt_port,
            retrain=args.retrain,
            eval_episodes=args.eval_episodes,
            seed=args.seed,
        )
    )
