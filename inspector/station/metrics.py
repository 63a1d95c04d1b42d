"""The station's counters: the status line, the status message and the Prometheus endpoint.

:class:`StationMetrics` keeps plain counters (always) and mirrors them into a
private prometheus-client ``CollectorRegistry`` when prometheus-client is
installed, so two stations in one process (tests, benchmarks) never collide in
the global registry. :meth:`StationMetrics.serve` starts the HTTP endpoint.

Prometheus names: ``inspector_parts_total``, ``inspector_verdicts_total{verdict,label}``,
``inspector_errors_total{kind}``, ``inspector_decision_latency_seconds`` and
``inspector_part_latency_seconds`` (histograms), ``inspector_outbox_depth``,
``inspector_outbox_full``, ``inspector_broker_connected``,
``inspector_camera_reconnects_total``, and for a model from the registry
``inspector_model_info{version,channel}`` (1 for the version running) and
``inspector_model_switches_total``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any

from inspector.errors import MissingDependencyError, StationError

log = logging.getLogger(__name__)

#: Error kinds counted in ``inspector_errors_total{kind}``.
ERROR_KINDS = ("camera", "camera_timeout", "corrupt_frame", "inspection", "footage", "outbox",
               "broker", "model")  # fmt: skip
_LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class StationMetrics:
    """Counters of one station.

    :param prometheus: mirror into a private prometheus-client registry (when installed).
    """

    def __init__(self, prometheus: bool = True) -> None:
        self._lock = threading.Lock()
        self.parts = 0
        self.verdicts: Counter[str] = Counter()  # ok / defect
        self.labels: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.error_results = 0
        self.camera_reconnects = 0
        #: (version, channel) of the registry model running, and how often it changed.
        self.model_running: tuple[str, str] | None = None
        self.model_switches = 0
        self.started = time.monotonic()
        self._window: tuple[float, int] = (self.started, 0)
        self.registry: Any = None
        self._server: Any = None
        self._p: dict[str, Any] = {}
        if prometheus:
            self._make_prometheus()

    def _make_prometheus(self) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError:
            return  # serve() says what to install; the plain counters still work
        reg = CollectorRegistry()
        self.registry = reg
        self._p = {
            "parts": Counter("inspector_parts", "Parts inspected (error results included)",
                             registry=reg),
            "verdicts": Counter("inspector_verdicts", "Decided parts by verdict and label",
                                ["verdict", "label"], registry=reg),
            "errors": Counter("inspector_errors", "Errors by kind", ["kind"], registry=reg),
            "decision": Histogram("inspector_decision_latency_seconds",
                                  "Agent decision time (scan, focus, declare)",
                                  buckets=_LATENCY_BUCKETS, registry=reg),
            "part": Histogram("inspector_part_latency_seconds",
                              "Frame grabbed to result committed", buckets=_LATENCY_BUCKETS,
                              registry=reg),
            "depth": Gauge("inspector_outbox_depth", "Results not yet acknowledged", registry=reg),
            "full": Gauge("inspector_outbox_full", "1 while the outbox is full (no new parts)",
                          registry=reg),
            "connected": Gauge("inspector_broker_connected", "1 while the broker link is up",
                               registry=reg),
            "dead": Gauge("inspector_outbox_dead_letters",
                          "Results moved aside because the broker would not take them",
                          registry=reg),
            "reconnects": Counter("inspector_camera_reconnects", "Camera reopens and reconnects",
                                  registry=reg),
            "model": Gauge("inspector_model_info",
                           "1 for the registry version running and its channel",
                           ["version", "channel"], registry=reg),
            "switches": Counter("inspector_model_switches",
                                "Registry model changes followed (promotions, rollbacks)",
                                registry=reg),
            "heartbeat": Gauge("inspector_heartbeat_timestamp_seconds",
                               "Unix time of the station loop's last turn (inspector health)",
                               registry=reg),
        }  # fmt: skip
        for kind in ERROR_KINDS:
            self._p["errors"].labels(kind=kind)  # export zeros, so alerts see the series

    # -- updates ---------------------------------------------------------------------
    def part(self, result: Any, part_latency_s: float) -> None:
        """Count one reported part.

        :param result: the :class:`~inspector.station.result.Result` that was committed.
        :param part_latency_s: frame grabbed to result committed, seconds.
        """
        with self._lock:
            self.parts += 1
            if result.error is None:
                self.verdicts[result.verdict] += 1
                self.labels[result.label] += 1
            else:
                self.error_results += 1
        if self._p:
            self._p["parts"].inc()
            if result.error is None:
                self._p["verdicts"].labels(verdict=result.verdict, label=result.label).inc()
                self._p["decision"].observe(result.latency_ms / 1e3)
            self._p["part"].observe(part_latency_s)

    def error(self, kind: str) -> None:
        """Count an error of ``kind`` (one of :data:`ERROR_KINDS`)."""
        with self._lock:
            self.errors[kind] += 1
        if self._p:
            self._p["errors"].labels(kind=kind).inc()

    def camera_reconnect(self, n: int = 1) -> None:
        """Count ``n`` camera reopens (the station's, and the driver's own reconnects)."""
        if n <= 0:
            return
        with self._lock:
            self.camera_reconnects += n
        if self._p:
            self._p["reconnects"].inc(n)

    def model(self, version: str, channel: str) -> None:
        """The registry model running is ``version`` from ``channel`` (a change is a switch)."""
        with self._lock:
            before, self.model_running = self.model_running, (version, channel)
            switched = before is not None and before != self.model_running
            self.model_switches += int(switched)
        if self._p:
            if before is not None:
                self._p["model"].remove(*before)
            self._p["model"].labels(version=version, channel=channel).set(1)
            if switched:
                self._p["switches"].inc()

    def beat(self) -> None:
        """The station loop turned (the liveness heartbeat, see inspector.station.health)."""
        if self._p:
            self._p["heartbeat"].set_to_current_time()

    def link(self, depth: int, full: bool, connected: bool, dead_letters: int = 0) -> None:
        """Set the outbox and broker gauges."""
        if self._p:
            self._p["dead"].set(dead_letters)
            self._p["depth"].set(depth)
            self._p["full"].set(1 if full else 0)
            self._p["connected"].set(1 if connected else 0)

    # -- reading ---------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """``{"parts", "ok", "defect", "errors"}`` for the status message."""
        with self._lock:
            return {
                "parts": self.parts,
                "ok": self.verdicts["ok"],
                "defect": self.verdicts["defect"],
                "errors": self.error_results,
            }

    def rate(self) -> float:
        """Parts per second since the previous call (since start for the first)."""
        now = time.monotonic()
        with self._lock:
            t0, n0 = self._window
            self._window = (now, self.parts)
            n = self.parts - n0
        return n / (now - t0) if now > t0 else 0.0

    # -- the endpoint ----------------------------------------------------------------
    def serve(self, port: int, host: str = "127.0.0.1") -> str:
        """Start the Prometheus endpoint; returns its URL.

        :raises MissingDependencyError: prometheus-client is not installed.
        :raises StationError: the port cannot be bound.
        """
        if self.registry is None:
            raise MissingDependencyError(
                "prometheus-client", "the metrics endpoint", "pip install prometheus-client"
            )
        from prometheus_client import start_http_server

        try:
            started = start_http_server(int(port), addr=host, registry=self.registry)
        except OSError as exc:
            raise StationError(f"metrics_port {port}: cannot listen on {host}: {exc}") from None
        # prometheus-client >= 0.17 returns (server, thread); keep the server to shut it down.
        self._server = started[0] if isinstance(started, tuple) else None
        return f"http://{host}:{port}/metrics"

    def close(self) -> None:
        """Stop the endpoint (idempotent)."""
        if self._server is not None:
            try:
                self._server.shutdown()
                self._server.server_close()
            except Exception as exc:  # shutting down must not fail the station's exit
                log.warning("metrics endpoint: %s", exc)
            self._server = None
