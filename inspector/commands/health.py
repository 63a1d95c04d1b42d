"""``inspector health``: exit 0 while the station's heartbeat is fresh (liveness probes)."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``health`` verb.

    :param sub: the CLI's sub-parser collection.
    """
    p = sub.add_parser(
        "health",
        help="check that a running station's loop is alive (for liveness probes)",
        description="Read the station's heartbeat from its metrics endpoint; exit 0 when it "
        "is at most --max-age seconds old, else print why and exit 2.",
    )
    p.add_argument("--port", type=int, required=True, help="the station's metrics_port")
    p.add_argument("--host", default="127.0.0.1", help="its metrics_host (default 127.0.0.1)")
    p.add_argument(
        "--max-age", type=float, default=60.0, help="seconds a heartbeat stays fresh (60)"
    )
    p.add_argument("--timeout", type=float, default=3.0, help="seconds to wait for the page")
    p.set_defaults(func=run_health)


def run_health(args: argparse.Namespace) -> int:
    """Print one line; 0 alive, 2 (an InspectorError) not."""
    from inspector.station.health import check

    print(check(args.host, args.port, args.max_age, args.timeout))
    return 0
