"""A tiny station for the crash tests: puts results and publishes them; killed from outside.

Run: ``python tests/integration/_mqtt_station_proc.py OUTBOX PORT START COUNT [PACE_S]``.
Prints ``seq <seq> <id>`` after each commit (the result is durable by then), then
``flushed <True|False>`` and exits 0. With PORT 0 it only commits (no broker).
"""

from __future__ import annotations

import logging
import sys
import time

from inspector.station.mqtt import MqttConfig, Publisher
from inspector.station.outbox import Outbox
from inspector.station.reporter import Reporter
from inspector.station.result import Result


def main(argv: list[str]) -> int:
    outbox_path, port, start, count = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    pace = float(argv[4]) if len(argv) > 4 else 0.0
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    outbox = Outbox(outbox_path, limit=100_000)
    publisher = None
    if port:
        cfg = MqttConfig(
            station="crash", port=port, reconnect_min_delay=0.1, reconnect_max_delay=0.5
        )
        publisher = Publisher(cfg, outbox).start()
    reporter = Reporter(outbox, publisher)
    for i in range(start, start + count):
        r = Result.decided(
            station="crash",
            part_id=f"part-{i}",
            classes=["ok", "crack"],
            probabilities=[0.8, 0.2],
            label="ok",
            glimpse_path=[(0.5, 0.5, 0)],
            steps=1,
            captured_at=time.time(),
        )
        seq = reporter.report(r)
        print(f"seq {seq} {r.id}", flush=True)
        if pace:
            time.sleep(pace)
    ok = reporter.close(flush_timeout=30.0)
    print(f"flushed {ok}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
