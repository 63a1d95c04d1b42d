"""What a station opens and closes around its loop: the camera (and reopening it), the
footage recorder, the reporter (outbox and MQTT publisher), the OPC UA link, the console,
the metrics endpoint and the results log.

:class:`StationServices` is a part of :class:`~inspector.station.loop.Station` (a mixin:
it reads the attributes ``Station.__init__`` sets); it holds no state of its own.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from inspector.errors import InspectorError
from inspector.station.camera_feed import CameraFeed
from inspector.station.mqtt import Publisher
from inspector.station.reporter import Reporter
from inspector.station.result import Result

log = logging.getLogger("inspector.station.loop")


class FootageRecorder(Protocol):
    """What the station needs from a footage store (``FootageWriter`` is one)."""

    def record(self, image: np.ndarray | None, result: dict[str, Any]) -> str | None:
        """Keep the frame if the keep policy says so; return its reference or None.

        A recorder may write in the background; the station calls its ``close()`` (when
        it has one) at shutdown and counts its ``errors`` attribute (when it has one).
        """


class StationServices:
    """Opening, reopening and closing what the station loop uses (see the module docstring)."""

    # -- set-up ----------------------------------------------------------------------
    def _open_configured_camera(self) -> Any:
        from inspector.camera import open_camera

        return open_camera(self.cfg.camera.driver, self.cfg.camera.params or {})

    def _footage(self) -> FootageRecorder | None:
        f = self.cfg.footage
        if not f.path:
            return None
        from inspector.footage.writer import FootageWriter

        return FootageWriter(
            f.path,
            keep_ok_every=f.keep.ok_one_in,
            low_confidence=f.keep.low_confidence_below,
            max_bytes=int(f.max_size_mb * 1024 * 1024),
            keep_errors=f.keep.errors,
            background=True,
            queue_frames=f.queue_frames,
        )

    def _reporter(self) -> Reporter:
        from inspector.station.outbox import Outbox

        o = self.cfg.outbox
        outbox = Outbox(o.path, limit=o.limit, synchronous=o.synchronous)
        try:
            if self.cfg.mqtt.enabled:
                self.publisher = Publisher(self.cfg.mqtt_config(), outbox)
        except BaseException:
            outbox.close()
            raise
        # Background commit: the outbox's fsync overlaps the next part; the results log
        # gets a line once a result is durable (on the committer thread).
        return Reporter(outbox, self.publisher, background=True, on_committed=self._committed)

    def _committed(self, result: Result) -> None:
        """A result is durable: log it, then show it to the PLC (committer thread)."""
        self._log_result(result)
        if self.opcua is not None and not self.opcua.show(result.to_dict(), self.metrics):
            self.request_stop()  # the PLC cannot be shown results: take no more parts

    def _log_result(self, result: Result) -> None:
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(result.to_dict(), separators=(",", ":")) + "\n")
            self._jsonl.flush()

    def start(self) -> None:
        """Open the camera, start the publisher and the metrics endpoint, print the banner.

        :raises CameraError: the camera cannot be opened at start.
        """
        self._open_camera()
        if self.publisher is not None:
            self.publisher.start()
            self._publishing = True
        if self.opcua is not None:
            self.opcua.start()
        if self.cfg.metrics_port:
            url = self.metrics.serve(self.cfg.metrics_port, self.cfg.metrics_host)
            log.info("metrics on %s", url)
        if self.cfg.results_jsonl:
            p = Path(self.cfg.results_jsonl)
            p.parent.mkdir(parents=True, exist_ok=True)
            self._jsonl = open(p, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if self.cfg.console.enabled:
            from inspector.station.console import start_console

            self.console = start_console(self)
        for line in self.banner():
            self._say(line)
        if self.cfg.metrics_port:
            self._say(f"  metrics  http://{self.cfg.metrics_host}:{self.cfg.metrics_port}/metrics")
        if self.console is not None:
            self._say(f"  console  {self.console.url}")
        self._last_status = time.monotonic()

    def _open_camera(self) -> None:
        driver = self._camera_factory()
        self.feed = CameraFeed(driver)
        self._driver_reconnects = 0

    def _reopen_camera(self) -> bool:
        """Try to reopen the camera (rate-limited); True when it is open again."""
        if self.feed is not None:
            self.feed.close()
            self.feed = None
        now = time.monotonic()
        if now < self._camera_retry_at:
            return False
        self._camera_retry_at = now + self.cfg.camera.reopen_delay_s
        try:
            self._open_camera()
        except InspectorError as exc:
            self.metrics.error("camera")
            log.error("camera %s cannot be reopened: %s; retrying", self.cfg.camera.driver, exc)
            return False
        self.metrics.camera_reconnect()
        log.warning("camera %s reopened", self.cfg.camera.driver)
        return True

    def _count_driver_reconnects(self) -> None:
        stats = getattr(self.feed.driver, "stats", None) if self.feed else None
        n = int(getattr(stats, "reconnects", 0) or 0)
        if n > self._driver_reconnects:
            self.metrics.camera_reconnect(n - self._driver_reconnects)
            self._driver_reconnects = n

    # -- shutdown --------------------------------------------------------------------
    def close(self) -> bool:
        """Flush (bounded), publish status offline, close everything. Idempotent.

        :returns: True when every result was acknowledged (or MQTT is off and nothing failed).
        """
        if self._closed:
            return True
        self._closed = True
        if self.console is not None:
            self.console.close()  # first: it reads the station, never after it is closed
        if self.feed is not None:
            self.feed.close()
        if self.recorder is not None and hasattr(self.recorder, "close"):
            try:
                self.recorder.close()  # writes the frames still queued
            except Exception as exc:
                log.error("footage not closed cleanly: %s", exc)
        ok, st = True, None
        if hasattr(self.reporter, "drain"):
            # Every decided part committed before the final flush and status.
            ok = self.reporter.drain(self.cfg.outbox.flush_timeout_s)
        if self.publisher is not None and self.publisher.connected:
            self.publisher.update_status(self.metrics.counts())
        if self.publisher is not None and self._publishing:
            ok = self.publisher.flush(self.cfg.outbox.flush_timeout_s) and ok
        if hasattr(self.reporter, "status"):
            st = self.reporter.status()  # before the outbox closes: the final depth
        if hasattr(self.reporter, "close"):
            # Already flushed above; this publishes "offline" and closes the outbox.
            ok = self.reporter.close(flush_timeout=0.0) and ok
        for link in (self.opcua, self.shadow):  # after the drain: every result was shown
            if link is not None:
                link.close()
        if self._jsonl is not None:
            self._jsonl.close()
        self.metrics.close()
        self.policy.close()
        last = self.status_text(st, word="stopped:")
        lost = list(getattr(self.reporter, "lost", []))
        if lost:
            # Never claim they were kept: they were not committed anywhere.
            last += f" ({len(lost)} results could not be committed and are LOST)"
        elif not ok:
            last += " (unacknowledged results kept in the outbox for the next start)"
        self._say(last)
        return ok
