"""The inspection station: camera -> agent -> Result -> outbox -> MQTT, footage and metrics.

For each part the station grabs a frame, runs the agent with
:func:`inspector.policy.agent.run_episode` (the same :class:`~inspector.scan.Scanner`
the training environment uses), builds a :class:`~inspector.station.result.Result`,
records the frame in the footage store (the reference goes into the result), and
hands the result to the :class:`~inspector.station.reporter.Reporter`, whose committer
thread commits it to the outbox (group commit) and then publishes it. A corrupt frame,
a camera timeout or a failed inspection becomes an error result, is counted, and the
station carries on. While the outbox is full the station takes no new part (it never
drops a result).

``inspector run --config STATION.yaml`` calls :func:`run_station`; tests and the
benchmark build a :class:`Station` directly and may hand it their own camera,
recorder or reporter.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from inspector.errors import InspectorError, ModelError, StationError
from inspector.files import sha256_file
from inspector.policy.agent import run_episode
from inspector.station.camera_feed import (
    CameraEnded,
    CameraFailed,
    CameraFeed,
    CameraTimeout,
    check_frame,
)
from inspector.station.config import (
    StationConfig,
    check_profile,
    load_station_policy,
)
from inspector.station.metrics import StationMetrics
from inspector.station.mqtt import Publisher, Trigger
from inspector.station.opcua.link import OpcuaLink
from inspector.station.result import Result
from inspector.station.rollout import Rollout, check_successor, is_ref, parse_ref
from inspector.station.services import FootageRecorder, StationServices
from inspector.station.shadow import ShadowRunner
from inspector.station.status import StationStatus

log = logging.getLogger(__name__)


# -- the station --------------------------------------------------------------------------
class Station(StationServices, StationStatus):
    """One station: call :meth:`run`; :meth:`request_stop` (signal-safe) ends it.

    What it opens and closes is in :class:`~inspector.station.services.StationServices`,
    its back-pressure and status line in :class:`~inspector.station.status.StationStatus`;
    this class holds the state and inspects parts.

    :param config: a validated :class:`StationConfig` (checked again here).
    :param camera_factory: opens the camera (default: ``open_camera`` with the config);
        called again to reopen after a failure.
    :param recorder: footage recorder (default: a ``FootageWriter`` when ``footage.path``).
    :param reporter: what commits and publishes (default: outbox + MQTT publisher).
    :param out: where the banner and the status line go (default stderr).
    :raises InspectorError: the model, profile, outbox, broker settings or metrics port
        cannot be used (before any part is taken).
    """

    #: Seconds a triggered station waits for a trigger before it looks after itself
    #: (heartbeat, status line, back-pressure) and waits again. A trigger or a stop wakes
    #: it at once: this is not a poll of the trigger source.
    BEAT_S = 0.2

    def __init__(
        self,
        config: StationConfig,
        *,
        camera_factory: Callable[[], Any] | None = None,
        recorder: FootageRecorder | None = None,
        reporter: Any = None,
        out: TextIO | None = None,
    ) -> None:
        self.cfg = config.check()
        self.out = out if out is not None else sys.stderr
        self._stop = threading.Event()
        self._ended = False
        self.policy: Any = None
        self.rollout = self._rollout()  # None: model.path names a file
        self.policy = self.rollout.policy if self.rollout else load_station_policy(config.model)
        self.meta = self.policy.meta
        self.model_sha256 = sha256_file(self.rollout.path if self.rollout else config.model.path)
        self.profile, warnings = check_profile(self.policy, config.profile)
        for w in warnings:
            log.warning("%s", w)
        self.budget = int(
            self.meta.step_budget or (self.profile.step_budget if self.profile else 0)
        )
        if self.budget < 1:
            raise ModelError(f"{config.model.path}: no step budget in the model; give a profile")
        self.scanner = self._scanner()
        self.profile_name = self.profile.name if self.profile else self.meta.profile_name
        self.profile_sha256 = self.profile.sha256 if self.profile else self.meta.profile_sha256
        # None for a classification-only model: every verdict is a defect.
        self.ok_class = self.profile.ok_class if self.profile else self.meta.ok_class
        self._camera_factory = camera_factory or self._open_configured_camera
        self.feed: CameraFeed | None = None
        self._driver_reconnects = 0
        self._camera_retry_at = 0.0
        self.metrics = StationMetrics()
        if self.rollout is not None:
            self.metrics.model(self.rollout.label, self.rollout.channel)
        self.recorder = recorder if recorder is not None else self._footage()
        self.publisher: Publisher | None = None
        self._jsonl: TextIO | None = None
        self._own_reporter = reporter is None
        self.reporter = reporter if reporter is not None else self._reporter()
        if self.publisher is not None:
            self.publisher.set_model(self.model_doc())
        self.opcua = OpcuaLink.from_config(config) if config.opcua.enabled else None
        self.shadow = ShadowRunner.from_config(config.shadow, self.meta, self.budget, self.ok_class)
        self._last_status = 0.0
        self._full_since: float | None = None
        self._thread_errors: dict[str, int] = {}  # see _count_errors
        self._publishing = False
        self._closed = False
        self.console: Any = None  # the operator console, when config.console.enabled

    # -- set-up ----------------------------------------------------------------------
    def _rollout(self) -> Rollout | None:
        """The registry roll-out ``model.path`` follows, or None when it names a file.

        :raises StationError: no registry folder, nothing promoted, or a version that
            cannot be loaded (at start there is no model to keep).
        """
        m = self.cfg.model
        if not is_ref(m.path):
            return None
        if not Path(m.registry).is_dir():
            raise StationError(f"model {m.path}: model.registry {m.registry} is not a folder")
        return Rollout(m.registry, parse_ref(m.path), self.cfg.station_id, self._load_version)

    def _load_version(self, path: Path) -> Any:
        """Load a registry version; once a model runs, check it can take over from it.

        :raises ModelError: unreadable, its ONNX contract broken (the backend checks the
            graph against its metadata), or it does not fit the running model or profile.
        """
        try:
            policy = load_station_policy(dataclasses.replace(self.cfg.model, path=str(path)))
        except InspectorError:
            raise
        except Exception as exc:  # whatever a broken file makes the backend raise
            raise ModelError(f"{path}: {exc}") from None
        if self.policy is None:
            return policy  # the first: checked against the profile like any model file
        try:
            check_successor(self.meta, policy.meta, path)
            check_profile(policy, self.cfg.profile)
        except InspectorError:
            policy.close()
            raise
        return policy

    def _follow_rollout(self) -> None:
        """Before a part: follow a promotion or rollback (one ``stat`` when there was none).

        A version that cannot take over is logged and counted (``inspector_errors_total
        {kind="model"}``) by :class:`Rollout`; the running model goes on.
        """
        ro = self.rollout
        if ro is None:
            return
        was = f"{ro.label} ({ro.channel})"
        try:
            policy, changed = ro.current()
            if changed and policy is not self.policy:
                sha, old = sha256_file(ro.path), self.policy
                self.policy, self.meta, self.model_sha256 = policy, policy.meta, sha
                if self.profile is None:  # results name the profile the model was trained with
                    self.profile_name = self.meta.profile_name
                    self.profile_sha256 = self.meta.profile_sha256
                old.close()
        except Exception as exc:  # a roll-out must never stop the station
            ro.failures += 1
            changed = False
            log.error("model %s: following the roll-out failed: %s", ro.ref, exc)
        self._count_errors("model", ro.failures)
        if not changed:
            return
        self.metrics.model(ro.label, ro.channel)
        self._say_station(f"model {ro.ref}: {was} -> {ro.label} ({ro.channel})")
        if self.publisher is not None:
            self.publisher.set_model(self.model_doc())
            if self.publisher.connected:
                self.publisher.update_status(self.metrics.counts())

    def model_doc(self) -> dict[str, Any]:
        """The running model as results and the MQTT status name it: ``sha256``, and
        ``version`` and ``channel`` when it comes from a registry."""
        doc: dict[str, Any] = {"sha256": self.model_sha256}
        if self.rollout is not None:
            doc.update(version=self.rollout.label, channel=self.rollout.channel)
        return doc

    def _scanner(self) -> Any:
        from inspector.scan import Scanner

        try:
            return Scanner.from_metadata(self.meta, self.budget)
        except ModelError as exc:
            raise ModelError(f"{self.cfg.model.path}: {exc}") from None

    def _say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def _say_station(self, line: str) -> None:
        self._say(f"[{self.cfg.station_id}] {line}")

    def banner(self) -> list[str]:
        """What the station runs, one line per item (printed at start)."""
        from inspector.station.banner import banner_lines

        return banner_lines(self)

    # -- the loop --------------------------------------------------------------------
    def request_stop(self) -> None:
        """Finish the current part and stop (safe from a signal handler).

        A loop waiting for a trigger is woken, not left to its next beat.
        """
        self._stop.set()
        for source in (self.publisher, self.opcua):
            if source is not None:
                source.wake()

    @property
    def stopping(self) -> bool:
        """A stop was requested."""
        return self._stop.is_set()

    def run(self, max_parts: int | None = None) -> int:
        """Inspect parts until stopped, ``max_parts`` are done or the source ends.

        :param max_parts: stop after this many parts (error results included).
        :returns: 0.
        :raises StationError: outbox commits failed for ``outbox.commit_timeout_s``: the
            station stopped; the message names the results it could not keep.
        """
        if self.feed is None:
            self.start()
        failure = None
        try:
            while not self._stop.is_set() and not self._ended:
                if max_parts is not None and self.metrics.parts >= max_parts:
                    break
                failure = self._commit_failure()
                if failure is not None:
                    break
                self._tick()
                if not self._accepting():
                    self._stop.wait(0.1)
                    continue
                if self.cfg.trigger.mode in ("mqtt", "opcua"):
                    source = self.publisher if self.cfg.trigger.mode == "mqtt" else self.opcua
                    trig = source.next_trigger(timeout=self.BEAT_S) if source else None
                    if trig is not None:
                        self.step(trig)
                else:
                    self.step(None)
        finally:
            self.close()
        if failure is not None:
            lost = list(getattr(self.reporter, "lost", []))
            what = "no result was lost"
            if lost:
                shown = ", ".join(lost[:10]) + (
                    f" and {len(lost) - 10} more" if len(lost) > 10 else ""
                )
                what = f"{len(lost)} results could not be committed and are lost: {shown}"
            raise StationError(f"stopped: {failure}; {what}")
        return 0

    def step(self, trigger: Trigger | None = None) -> Result | None:
        """Inspect one part (free-run: the next frame; trigger: a frame taken now) and report it.

        :returns: the committed result, or None when no part was taken (camera down).
        """
        t0 = time.perf_counter()
        frame, image = None, None
        if self.feed is None and not self._reopen_camera():
            if trigger is None:
                self._stop.wait(0.1)
                return None
            result = self._failed("camera unavailable", trigger, "camera")
        else:
            try:
                frame = self.feed.grab(self.cfg.camera.timeout_s, fresh=trigger is not None)
            except CameraTimeout as exc:
                result = self._failed(str(exc), trigger, "camera_timeout")
            except CameraFailed as exc:
                result = self._failed(f"camera error: {exc}", trigger, "camera")
                self._reopen_camera()
            except CameraEnded:
                if not self.cfg.camera.reopen_on_end:
                    log.warning("camera source ended: stopping")
                    self._ended = True
                    if trigger is None:
                        return None
                    result = self._failed("camera source ended", trigger, "camera")
                else:
                    self._reopen_camera()
                    if trigger is None:
                        return None
                    result = self._failed("camera source ended; reopening", trigger, "camera")
            else:
                self._count_driver_reconnects()
                result, image = self._inspect(frame, trigger)
        self._record(result, image)
        self._report(result)
        self.metrics.part(result, time.perf_counter() - t0)
        if self.console is not None:
            self.console.offer(result, image)  # a deque append: never waits
        return result

    def _ids(self, trigger: Trigger | None) -> dict[str, Any]:
        return {
            "station": self.cfg.station_id,
            "model_sha256": self.model_sha256,
            "profile_name": self.profile_name,
            "profile_sha256": self.profile_sha256,
            "correlation_id": trigger.correlation_id if trigger else None,
            "trigger_part_id": trigger.part_id if trigger else None,
            "model_version": self.rollout.label if self.rollout else None,
            "model_channel": self.rollout.channel if self.rollout else None,
        }

    def _failed(self, error: str, trigger: Trigger | None, kind: str, frame: Any = None) -> Result:
        self.metrics.error(kind)
        log.error("part failed: %s", error)
        part = (trigger.part_id if trigger and trigger.part_id else None) or str(
            getattr(frame, "part_id", "") or ""
        )
        ts = getattr(frame, "timestamp", None)
        return Result.failed(part_id=part, error=error, captured_at=ts, **self._ids(trigger))

    def _inspect(self, frame: Any, trigger: Trigger | None) -> tuple[Result, np.ndarray | None]:
        try:
            image = check_frame(frame)
        except ValueError as exc:
            return self._failed(f"corrupt frame: {exc}", trigger, "corrupt_frame", frame), None
        part = trigger.part_id if trigger and trigger.part_id else str(frame.part_id)
        self._follow_rollout()
        try:
            d = run_episode(
                self.policy, self.scanner, image, self.budget, self.cfg.model.stop_on_defect
            )
            # The shadow starts once the live verdict is in, so it never competes with
            # the live model for the cores while the live model decides.
            ticket = self.shadow.submit(image) if self.shadow is not None else None
            result = Result.decided(
                part_id=part, classes=self.meta.classes, probabilities=d.probabilities,
                label=d.verdict, glimpse_path=d.path, steps=d.steps,
                captured_at=float(frame.timestamp), latency_ms=1e3 * d.latency_s,
                ok_class=self.ok_class, classification_only=self.ok_class is None,
                **self._ids(trigger),
            )  # fmt: skip
            if self.shadow is not None:
                result.shadow = self.shadow.collect(ticket)
        except Exception as exc:  # one bad part (or model output) never stops the station
            log.debug("inspection failed", exc_info=True)
            return self._failed(f"inspection failed: {exc}", trigger, "inspection", frame), image
        return result, image

    def _record(self, result: Result, image: np.ndarray | None) -> None:
        if self.recorder is None:
            return
        try:
            result.footage = self.recorder.record(image, result.to_dict())
        except Exception as exc:  # a full disk must not cost the result
            self.metrics.error("footage")
            log.error("footage not recorded: %s", exc)

    def _report(self, result: Result) -> None:
        for attempt in range(10):
            try:
                self.reporter.report(result)
                break
            except StationError as exc:
                self.metrics.error("outbox")
                log.error("outbox commit failed (attempt %d): %s", attempt + 1, exc)
                if attempt == 9:
                    raise
                time.sleep(0.5)
        if not self._own_reporter:
            self._committed(result)  # a reporter given from outside has no callback


def run_station(config: StationConfig, max_parts: int | None = None) -> int:
    """Run a station in the foreground until SIGTERM/SIGINT, ``max_parts`` or the source ends.

    SIGTERM and SIGINT finish the current part, flush (``outbox.flush_timeout_s``),
    publish status ``offline`` and return 0.

    :raises InspectorError: the station cannot start.
    """
    station = Station(config)

    def _stop(signum: int, _frame: Any) -> None:
        log.warning("signal %d: finishing the current part and stopping", signum)
        station.request_stop()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            station.start()
        except BaseException:
            station.close()
            raise
        return station.run(max_parts)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


__all__ = [
    "CameraFeed",
    "FootageRecorder",
    "Station",
    "check_frame",
    "check_profile",
    "load_station_policy",
    "run_station",
    "sha256_file",
]
