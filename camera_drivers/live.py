"""The ``opencv`` camera: a live source that drops, reconnects and carries on.

One code path for every source OpenCV opens: a device index (``0``), an RTSP or
HTTP URL, a GStreamer pipeline (a string with ``!``) or a video file. When a
read fails the capture is released and reopened with exponential back-off
(``backoff``, doubling up to ``max_backoff``); each successful reopen counts in
``stats.reconnects``. The caller never sees an exception from a dropped stream:
iteration just goes on, or ends after ``max_reconnects`` failed attempts in a
row. A video file therefore replays endlessly, each end being a "drop".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from inspector import (
    CameraDriver,
    CameraError,
    Frame,
    hookimpl,
    import_cv2,
)

log = logging.getLogger(__name__)


def parse_source(source: str) -> tuple[int | str, str]:
    """Turn ``source`` into what ``cv2.VideoCapture`` takes, and its kind.

    :param source: ``"0"`` (device index), a URL, a GStreamer pipeline or a file path.
    :returns: (index or string, one of ``device``, ``gstreamer``, ``url``, ``file``).
    """
    s = source.strip()
    if s.isdigit():
        return int(s), "device"
    if "!" in s:
        return s, "gstreamer"
    if "://" in s:
        return s, "url"
    return s, "file"


class LiveCamera(CameraDriver):
    """A live camera through OpenCV, with reconnect and a frame-rate cap.

    :param source: device index (``0``), RTSP/HTTP URL, GStreamer pipeline or video file.
    :param fps: cap on the frame rate (frames per second); None yields as fast as the
        source delivers.
    :param reconnect: reopen the source when a read fails (else the iteration ends).
    :param backoff: first wait before reopening, in seconds; doubles each failed attempt.
    :param max_backoff: longest wait between attempts, in seconds.
    :param max_reconnects: failed reopen attempts in a row before giving up; None
        retries forever.
    :param width: ask the device for this frame width (devices only honour some).
    :param height: ask the device for this frame height.
    :param timeout: open and read timeout for network streams, in seconds.
    :param grayscale: convert frames to one channel (else BGR).
    """

    def __init__(
        self,
        source: str,
        fps: float | None = None,
        reconnect: bool = True,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        max_reconnects: int | None = None,
        width: int | None = None,
        height: int | None = None,
        timeout: float = 5.0,
        grayscale: bool = True,
    ) -> None:
        super().__init__()
        if fps is not None and fps <= 0:
            raise CameraError(f"opencv: fps must be > 0 or none, got {fps}")
        if backoff < 0 or max_backoff < backoff:
            raise CameraError(
                f"opencv: expected 0 <= backoff <= max_backoff, got {backoff} and {max_backoff}"
            )
        if max_reconnects is not None and max_reconnects < 0:
            raise CameraError(f"opencv: max_reconnects must be >= 0 or none, got {max_reconnects}")
        if timeout <= 0:
            raise CameraError(f"opencv: timeout must be > 0, got {timeout}")
        self.source = str(source)
        self.target, self.kind = parse_source(self.source)
        self.fps = fps
        self.reconnect = bool(reconnect)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_reconnects = max_reconnects
        self.width = width
        self.height = height
        self.timeout = float(timeout)
        self.grayscale = bool(grayscale)
        #: Reopen attempts that failed, in all (the station shows it; tests watch it).
        self.failed_attempts = 0
        #: Waits go through here so that a caller can interrupt them (the station's stop).
        self.sleep: Callable[[float], Any] = time.sleep
        self._seq = 0
        self._cap = self._open()
        if self._cap is None:
            # A first open that fails is a configuration mistake far more often than a
            # drop: say so now instead of retrying a typo forever.
            raise CameraError(
                f"opencv: cannot open source {self.source!r} ({self.kind}); check the device "
                "index, URL or pipeline"
            )

    def describe(self) -> str:
        """One line for start-up banners."""
        cap = f", capped at {self.fps:g} fps" if self.fps else ""
        return f"opencv {self.kind} {self.source}{cap}"

    def _open(self) -> Any:
        """Open the source; the capture, or None when it does not open."""
        cv2 = import_cv2("the opencv camera")
        try:
            if self.kind == "gstreamer":
                cap = cv2.VideoCapture(self.target, cv2.CAP_GSTREAMER)
            elif self.kind in ("url", "file"):
                ms = int(self.timeout * 1000)
                params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, ms]
                cap = cv2.VideoCapture(self.target, cv2.CAP_ANY, params)
            else:
                cap = cv2.VideoCapture(self.target)
        except cv2.error as exc:
            log.warning("opencv %s: open failed: %s", self.source, exc)
            return None
        if not cap.isOpened():
            cap.release()
            return None
        if self.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, float(self.width))
        if self.height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, float(self.height))
        return cap

    def _release(self) -> None:
        if self._cap is not None:
            try:
                self._cap.release()
            except Exception as exc:  # a dying device must not stop us
                log.debug("opencv %s: release failed: %s", self.source, exc)
            self._cap = None

    def _reopen(self) -> bool:
        """Reopen with exponential back-off; False when giving up."""
        delay = self.backoff
        attempts = 0
        while self.max_reconnects is None or attempts < self.max_reconnects:
            self.sleep(delay)
            attempts += 1
            cap = self._open()
            if cap is not None:
                self._cap = cap
                self.stats.reconnects += 1
                log.warning(
                    "opencv %s: reconnected after %d attempt(s) (%d reconnects so far)",
                    self.source,
                    attempts,
                    self.stats.reconnects,
                )
                return True
            self.failed_attempts += 1
            log.warning(
                "opencv %s: reconnect attempt %d failed; next in %.2f s",
                self.source,
                attempts,
                min(self.max_backoff, delay * 2),
            )
            delay = min(self.max_backoff, delay * 2 if delay > 0 else 0.0)
        log.error("opencv %s: giving up after %d failed reconnect attempts", self.source, attempts)
        return False

    def _read(self) -> Any:
        """One image, or None when the read failed (for whatever reason)."""
        if self._cap is None:
            return None
        try:
            ok, img = self._cap.read()
        except Exception as exc:  # backends raise odd things on a drop
            log.warning("opencv %s: read raised %s", self.source, exc)
            return None
        return img if ok and img is not None and img.size else None

    def frames(self) -> Iterator[Frame]:
        """Frames as they come; reconnects on a drop; paced to ``fps`` when set."""
        cv2 = import_cv2("the opencv camera")
        interval = 1.0 / self.fps if self.fps else 0.0
        next_due = time.monotonic()
        while True:
            img = self._read()
            if img is None:
                log.warning("opencv %s: read failed (stream dropped or ended)", self.source)
                self._release()
                if not self.reconnect or not self._reopen():
                    return
                continue
            if interval:
                now = time.monotonic()
                if now < next_due:
                    self.sleep(next_due - now)
                # Do not bank lost time: after a stall, pace from now, not from the past.
                next_due = max(next_due + interval, time.monotonic())
            if self.grayscale and img.ndim == 3:
                img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
            self.stats.frames_read += 1
            seq = self._seq
            self._seq += 1
            yield Frame(
                image=img,
                part_id=f"live-{seq}",
                timestamp=time.time(),
                source=f"opencv:{self.source}",
                meta={"seq": seq, "reconnects": self.stats.reconnects},
            )

    def close(self) -> None:
        """Release the device (idempotent)."""
        self._release()


@hookimpl
def register_camera_drivers(register: Callable[..., None]) -> None:
    """Register the ``opencv`` driver."""
    register("opencv", LiveCamera)
