"""``inspector run``: the inspection station (see docs/station.md)."""

from __future__ import annotations

import argparse
import dataclasses
import logging

from inspector.commands._args import add_threads_argument, positive_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the inspection station",
        description=(
            "Run the inspection station: camera -> agent -> result -> outbox -> MQTT, with "
            "footage and metrics. SIGTERM/SIGINT finish the current part, flush and exit 0."
        ),
    )
    p.add_argument("--config", required=True, help="station YAML (see stations/example.yaml)")
    p.add_argument(
        "--max-parts", type=positive_int, metavar="N", help="stop after N parts (flush, exit 0)"
    )
    p.add_argument("--camera", metavar="NAME", help="camera driver (its parameters start empty)")
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="camera parameter"
    )
    p.add_argument("--model", metavar="PATH", help="exported model (.onnx, .engine)")
    p.add_argument("--mqtt-host", metavar="H", help="broker host")
    p.add_argument("--mqtt-port", type=int, metavar="P", help="broker port")
    p.add_argument("--station-id", metavar="ID", help="station id")
    p.add_argument("--footage", metavar="DIR", help="footage folder (turns recording on)")
    p.add_argument("--no-mqtt", action="store_true", help="do not publish; keep the outbox")
    add_threads_argument(p, "onnx")
    p.set_defaults(func=run_run)


def run_run(args: argparse.Namespace) -> int:
    from inspector.camera import parse_params
    from inspector.station.config import apply_overrides, load_station_config
    from inspector.station.loop import run_station
    from inspector.threads import ENV as THREADS_ENV
    from inspector.threads import resolve as resolve_threads

    cfg = load_station_config(args.config)
    cfg = apply_overrides(
        cfg,
        camera=args.camera,
        params=parse_params(args.param),
        model=args.model,
        mqtt_host=args.mqtt_host,
        mqtt_port=args.mqtt_port,
        station_id=args.station_id,
        footage=args.footage,
        no_mqtt=args.no_mqtt,
    )
    plan = resolve_threads(args.threads)
    if plan.source in ("--threads", THREADS_ENV):  # they beat the config's model.threads
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, threads=plan.count))
    # The global --log-level wins when given; otherwise the station's log_level applies.
    if str(getattr(args, "log_level", "WARNING")).upper() == "WARNING":
        logging.getLogger().setLevel(str(cfg.log_level).upper())
    return run_station(cfg, max_parts=args.max_parts)
