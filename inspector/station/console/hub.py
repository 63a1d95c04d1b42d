"""What the console knows: recent parts with their frames, the review queue, the station's state.

The station loop hands each part over with :meth:`ConsoleHub.offer`: one append to
a bounded deque (and, when the console sleeps, one wake-up), nothing else. The
console's own thread turns parts into documents, keeps the last ``parts`` of them
with their frames, sorts out the review queue and fans the updates out to every
connected page; frames are JPEG-encoded only when a page asks for one. When the
console cannot keep up, the deque drops its oldest parts (counted), never the
station's time. Station state (counters, outbox, broker, camera) is read once a
second from what the station already keeps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.geometry import glimpse_boxes
from inspector.station.console.config import ConsoleSection

log = logging.getLogger(__name__)

#: The page gets at most this many update batches a second (parts are batched, not dropped).
MAX_BATCHES_PER_S = 25
#: Parts listed with a connected page's first message.
BACKLOG = 30


class Part:
    """A part the console holds: its document, its frame and the JPEG once encoded."""

    __slots__ = ("doc", "image", "jpeg", "result")

    def __init__(self, doc: dict[str, Any], image: np.ndarray | None, result: dict[str, Any]):
        self.doc = doc
        self.image = image
        self.jpeg: bytes | None = None
        self.result = result


class ConsoleHub:
    """The console's state, shared by the station thread (offer) and the server's loop.

    :param station: the running station (its ``cfg``, ``meta``, ``metrics``, ``reporter``,
        ``publisher``, ``feed``, ``model_sha256``, ``ok_class`` are read, never changed).
    :param section: the console settings.
    """

    def __init__(self, station: Any, section: ConsoleSection) -> None:
        self.station = station
        self.section = section
        self._incoming: deque[tuple[float, Any, np.ndarray | None]] = deque(
            maxlen=max(section.parts, 8)
        )
        self.offered = 0
        self.taken = 0
        self.parts: OrderedDict[str, Part] = OrderedDict()
        self.review: OrderedDict[str, str] = OrderedDict()  # part id -> why
        self._held: dict[str, Part] = {}  # review parts no longer among the recent ones
        self._idle = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self.clients: set[asyncio.Queue[tuple[str, Any] | None]] = set()
        self._rate: deque[tuple[float, int]] = deque(maxlen=16)
        self._camera_errors: deque[tuple[float, int]] = deque(maxlen=16)
        self.feedback = {"feedback": 0, "confirmed": 0, "corrected": 0,
                         "false_alarms": 0, "misses": 0}  # fmt: skip
        self._store: Any = None
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="console-feedback")
        self.closed = False

    # -- the station thread ------------------------------------------------------------
    def offer(self, result: Any, image: np.ndarray | None) -> None:
        """Hand a reported part to the console (never blocks; called by the station loop).

        :param result: the part's :class:`~inspector.station.result.Result`.
        :param image: its frame, or None (error results without one). Copied: a camera
            may reuse its buffer.
        """
        self._incoming.append((time.time(), result, None if image is None else image.copy()))
        self.offered += 1
        if self._idle and self._loop is not None:
            self._idle = False
            try:
                self._loop.call_soon_threadsafe(self._wake.set)  # type: ignore[union-attr]
            except RuntimeError:  # the loop closed under us: the console is going away
                pass

    # -- the console's loop -------------------------------------------------------------
    async def run(self) -> None:
        """Take offered parts and tell the pages, until :meth:`stop`."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._load_feedback_counts()
        status_at = 0.0
        while not self.closed:
            now = time.monotonic()
            if now >= status_at:
                status_at = now + 1.0
                try:
                    self.broadcast("status", self.status())
                except Exception as exc:  # the page misses one status, the console goes on
                    log.error("console: status: %s", exc)
            if not self._incoming:
                self._idle = True
                if not self._incoming:  # offered between the check and the flag
                    try:
                        wait = max(0.05, status_at - now)
                        await asyncio.wait_for(self._wake.wait(), timeout=wait)
                    except asyncio.TimeoutError:
                        pass
                    self._wake.clear()
                    continue
            self._idle = False
            batch = []
            while self._incoming:
                try:
                    batch.append(self._take(*self._incoming.popleft()))
                except Exception as exc:  # one odd part must not stop the console
                    log.error("console: part not shown: %s", exc)
            self.broadcast("parts", [p.doc for p in batch])
            await asyncio.sleep(1.0 / MAX_BATCHES_PER_S)

    def _take(self, offered_at: float, result: Any, image: np.ndarray | None) -> Part:
        self.taken += 1
        d = result.to_dict()
        doc: dict[str, Any] = {k: d.get(k) for k in (
            "id", "part_id", "verdict", "label", "confidence", "probabilities", "error",
            "steps", "latency_ms", "footage",
        )}  # fmt: skip
        doc["decided_at"] = float(result.decided_at)
        model = d.get("model") or {}
        doc["model_sha256"] = model.get("sha256")
        # A registry model (schema 1.2): the version and channel that decided this part.
        doc["model_version"], doc["model_channel"] = model.get("version"), model.get("channel")
        shadow = d.get("shadow") if isinstance(d.get("shadow"), dict) else {}
        doc["shadow_label"] = shadow.get("label")  # a shadow model's verdict, when one ran
        doc["offered_at"] = offered_at
        doc["has_frame"] = image is not None
        path = d.get("glimpse_path") or []
        if image is not None:
            h, w = image.shape[:2]
            doc["width"], doc["height"] = w, h
            scan = getattr(self.station.meta, "scan", {}) or {}
            doc["glimpses"] = [
                [x0 / w, y0 / h, (x1 - x0) / w, (y1 - y0) / h, p["zoom"]]
                for (x0, y0, x1, y1), p in zip(glimpse_boxes(path, w, h, scan), path)
            ]
        else:
            doc["glimpses"] = []
        doc["review"] = self._why_review(doc)
        doc["feedback"] = None
        part = Part(doc, image, d)
        self.parts[doc["id"]] = part
        if doc["review"] and self.section.review:
            self._queue_review(part, doc["review"])
        while len(self.parts) > self.section.parts:
            pid, old = self.parts.popitem(last=False)
            if pid in self.review:
                self._held[pid] = old
        return part

    def _why_review(self, doc: dict[str, Any]) -> str | None:
        if doc["error"] is not None:
            return "error" if doc["has_frame"] else None
        conf = doc["confidence"]
        if conf is not None and conf < self.section.low_confidence:
            return f"low confidence {conf:.2f}"
        shadow = doc.get("shadow_label")
        if shadow is not None and doc["label"] is not None and shadow != doc["label"]:
            return f"shadow model says {shadow}"
        return None

    def _queue_review(self, part: Part, why: str) -> None:
        pid = part.doc["id"]
        self.review[pid] = why
        self.review.move_to_end(pid)
        part.doc["review"] = why
        while len(self.review) > self.section.review:
            old, _ = self.review.popitem(last=False)
            self._held.pop(old, None)

    def part(self, pid: str) -> Part | None:
        """A part the console still holds (recent or in the review queue)."""
        return self.parts.get(pid) or self._held.get(pid)

    def review_docs(self) -> list[dict[str, Any]]:
        """The review queue, newest first."""
        out = []
        for pid in reversed(self.review):
            p = self.part(pid)
            if p is not None:
                out.append(p.doc)
        return out

    # -- pages -----------------------------------------------------------------------------
    def subscribe(self) -> asyncio.Queue[tuple[str, Any] | None]:
        """A queue of ``(event, data)`` for one page; its first item is ``hello``."""
        q: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue(maxsize=512)
        recent = [p.doc for p in list(self.parts.values())[-BACKLOG:]]
        q.put_nowait(("hello", {"info": self.info(), "status": self.status(), "parts": recent,
                                "review": self.review_docs()}))  # fmt: skip
        self.clients.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue[tuple[str, Any] | None]) -> None:
        """Forget a page that went away."""
        self.clients.discard(q)

    def broadcast(self, event: str, data: Any) -> None:
        """Queue ``(event, data)`` for every page; a page that does not read loses its oldest."""
        for q in list(self.clients):
            if q.full():
                try:
                    q.get_nowait()
                except asyncio.QueueEmpty:  # pragma: no cover - checked just above
                    pass
            q.put_nowait((event, data))

    def stop(self) -> None:
        """End the loop and every page's stream (from the loop's thread)."""
        self.closed = True
        if self._wake is not None:
            self._wake.set()
        for q in list(self.clients):
            if q.full():
                q.get_nowait()
            q.put_nowait(None)

    def close(self) -> None:
        """Finish the feedback still being written and close the store (any thread)."""
        try:
            self._writer.submit(self._close_store)
        except RuntimeError:  # already shut down (or the interpreter is exiting)
            pass
        self._writer.shutdown(wait=True)

    # -- what the station is doing ---------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """What does not change while the station runs: ids, classes, model, camera."""
        s = self.station
        meta = s.meta
        providers = getattr(s.policy, "providers", None)
        ro = getattr(s, "rollout", None)  # a registry model: each part names its version too
        return {
            "station": s.cfg.station_id,
            "classes": list(meta.classes),
            "ok_class": s.ok_class,
            "model": {
                "path": str(s.cfg.model.path),
                "sha256": s.model_sha256,
                "backend": s.policy.backend,
                "providers": list(providers or []),
                "ok_bias": float(meta.ok_bias or 0.0),
                "version": ro.label if ro is not None else None,
                "channel": ro.channel if ro is not None else None,
            },  # fmt: skip
            "profile": s.profile_name,
            "camera": s.cfg.camera.driver,
            "feedback": self.section.store is not None,
            "low_confidence": self.section.low_confidence,
        }

    def status(self) -> dict[str, Any]:
        """A snapshot of the counters, the rate, the link, the camera and the alarms."""
        s = self.station
        m = s.metrics
        now = time.monotonic()
        counts = m.counts()
        self._rate.append((now, counts["parts"]))
        t0, n0 = self._rate[0]
        rate = (counts["parts"] - n0) / (now - t0) if now - t0 > 0.5 else 0.0
        errors = dict(m.errors)
        cam_err = errors.get("camera", 0) + errors.get("camera_timeout", 0)
        self._camera_errors.append((now, cam_err))
        recent_cam = cam_err - next((n for t, n in self._camera_errors if now - t <= 10.0), cam_err)
        link = s.reporter.status() if hasattr(s.reporter, "status") else None
        limit = int(getattr(getattr(s.cfg, "outbox", None), "limit", 0) or 0)
        alarms = []
        outbox: dict[str, Any] = {"depth": None, "limit": limit, "full": False}
        broker: dict[str, Any] = {"state": "off", "error": None}
        if link is not None:
            outbox.update(depth=link.outbox_depth, full=bool(link.outbox_full))
            if link.outbox_full:
                alarms.append(f"outbox full ({link.outbox_depth}): the station takes no parts")
            elif limit and link.outbox_depth >= self.section.outbox_alarm * limit:
                alarms.append(f"outbox filling: {link.outbox_depth} of {limit}")
            if getattr(s, "publisher", None) is not None:
                if link.connected:
                    broker["state"] = "connected"
                else:
                    broker.update(state="down", error=link.last_error)
                    why = f": {link.last_error}" if link.last_error else ""
                    alarms.append("broker down" + why)
        camera = "lost" if getattr(s, "feed", None) is None else "ok"
        if camera == "lost":
            alarms.append("camera lost")
        elif recent_cam:
            camera = "errors"
            alarms.append(f"camera: {recent_cam} errors in the last 10 s")
        dropped = self.offered - self.taken - len(self._incoming)
        return {
            "at": time.time(),
            "parts": counts["parts"],
            "verdicts": {"ok": counts["ok"], "defect": counts["defect"]},
            "labels": dict(m.labels),
            "error_results": counts["errors"],
            "errors": errors,
            "rate": rate,
            "outbox": outbox,
            "broker": broker,
            "camera": {"state": camera, "reconnects": m.camera_reconnects},
            "feedback": dict(self.feedback),
            "review": len(self.review),
            "alarms": alarms,
            "console_skipped": max(0, dropped),
        }

    # -- frames ----------------------------------------------------------------------------
    async def jpeg(self, pid: str) -> bytes | None:
        """The part's frame as JPEG (encoded once, off the loop), or None."""
        part = self.part(pid)
        if part is None or part.image is None:
            return None
        if part.jpeg is None:
            part.jpeg = await asyncio.get_running_loop().run_in_executor(
                None, _encode_jpeg, part.image
            )
        return part.jpeg

    # -- feedback --------------------------------------------------------------------------
    async def give_feedback(self, pid: str, label: str, operator: str, client: str) -> dict:
        """Store an operator's confirmation or correction of part ``pid``.

        :raises LookupError: the console no longer holds the part (or its frame).
        :raises ValueError: an unknown class.
        :raises FootageError: no store configured, a bad operator name, or the store failed.
        """
        if self.section.store is None:
            raise FootageError("feedback is off: set console.store in the station config")
        part = self.part(pid)
        if part is None or part.image is None:
            raise LookupError(f"part {pid} is no longer held by the console (or has no frame)")
        classes = list(self.station.meta.classes)
        if label not in classes:
            raise ValueError(f"unknown class {label!r}; expected one of {', '.join(classes)}")
        loop = asyncio.get_running_loop()
        fb, counts = await loop.run_in_executor(
            self._writer, self._write_feedback, part, label, operator
        )
        log.info("console: operator %s %ss part %s (%s) as %s, from %s", operator, fb.action,
                 part.doc["part_id"], pid, label, client)  # fmt: skip
        part.doc["feedback"] = {"label": label, "operator": operator, "action": fb.action,
                                "outcome": fb.outcome, "frame_id": fb.frame_id}  # fmt: skip
        if fb.action == "correct" and self.section.review:
            self._queue_review(part, f"operator: {part.doc['label']} -> {label}")
        elif pid in self.review:
            del self.review[pid]
            self._held.pop(pid, None)
            part.doc["review"] = None
        self.feedback = counts
        self.broadcast("feedback", part.doc)
        return fb.to_dict()

    def _open_store(self) -> Any:
        if self._store is None:
            from inspector.footage.store import FootageStore

            self._store = FootageStore(self.section.store, create=True)
        return self._store

    def _write_feedback(self, part: Part, label: str, operator: str) -> tuple[Any, dict]:
        from inspector.footage.feedback import feedback_counts, record_feedback

        store = self._open_store()
        fb, _ = record_feedback(store, part.image, part.result, label, operator,
                                ok_class=self.station.ok_class, via="console")  # fmt: skip
        # The counts take the operator's last word per part, as at start.
        return fb, feedback_counts(store, station=self.station.cfg.station_id)

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _load_feedback_counts(self) -> None:
        if self.section.store is None:
            return

        def load() -> dict[str, int]:
            from inspector.footage.feedback import feedback_counts

            return feedback_counts(self._open_store(), station=self.station.cfg.station_id)

        try:
            self.feedback = self._writer.submit(load).result()
        except Exception as exc:  # the page still works without the history
            log.error("console: feedback store %s: %s", self.section.store, exc)


def _encode_jpeg(image: np.ndarray, max_side: int = 768) -> bytes:
    import cv2

    h, w = image.shape[:2]
    if max(h, w) > max_side:
        f = max_side / max(h, w)
        image = cv2.resize(image, (max(1, round(w * f)), max(1, round(h * f))),
                           interpolation=cv2.INTER_AREA)  # fmt: skip
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 88])
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 image
        raise ValueError("JPEG encoding failed")
    return buf.tobytes()
