"""``inspector health`` reads the heartbeat from a real Prometheus endpoint."""

from __future__ import annotations

import socket
import time

import pytest
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from inspector.cli import main
from inspector.errors import StationError
from inspector.station.health import HEARTBEAT, check, heartbeat_age


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def endpoint():
    reg = CollectorRegistry()
    gauge = Gauge(HEARTBEAT, "last turn of the station loop", registry=reg)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
    yield port, gauge
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_fresh_heartbeat_is_alive(endpoint, capsys):
    port, gauge = endpoint
    gauge.set(time.time() - 2.0)
    assert 1.5 < heartbeat_age("127.0.0.1", port) < 60
    assert check("127.0.0.1", port, max_age=60).startswith("ok: heartbeat")
    assert main(["health", "--port", str(port)]) == 0
    assert capsys.readouterr().out.startswith("ok: heartbeat")


def test_stale_heartbeat_fails_in_one_line(endpoint, capsys):
    port, gauge = endpoint
    gauge.set(time.time() - 600.0)
    with pytest.raises(StationError, match=r"station loop stuck: last heartbeat 60\d\.\d s ago"):
        check("127.0.0.1", port, max_age=60)
    assert main(["health", "--port", str(port), "--max-age", "30"]) == 2
    err = capsys.readouterr().err
    assert "station loop stuck" in err and len(err.strip().splitlines()) == 1


def test_no_endpoint_or_no_heartbeat():
    with pytest.raises(StationError, match="no metrics endpoint at http://127.0.0.1"):
        check("127.0.0.1", free_port(), max_age=60, timeout=1)
    reg = CollectorRegistry()
    Gauge("something_else", "not a station", registry=reg)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
    try:
        with pytest.raises(StationError, match=f"no {HEARTBEAT}"):
            check("127.0.0.1", port, max_age=60)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_station_metrics_carry_the_heartbeat():
    from inspector.station.metrics import StationMetrics

    m = StationMetrics()
    port = free_port()
    m.serve(port)
    try:
        with pytest.raises(StationError, match="station loop stuck"):
            check("127.0.0.1", port, max_age=60)  # never turned: the gauge reads 0
        m.beat()
        assert check("127.0.0.1", port, max_age=60).startswith("ok")
    finally:
        m.close()
