"""The station's camera feed: one driver read on its own thread, one frame per request.

A driver's iterator can block forever (a hung USB camera, a stalled stream); reading
it on a helper thread turns that into a :class:`CameraTimeout` the station reports
as an error result, instead of a station that hangs. :func:`check_frame` rejects
frames the agent cannot inspect (a corrupt frame becomes an error result too).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


class CameraTimeout(Exception):
    """No frame within the timeout."""


class CameraFailed(Exception):
    """The driver raised while reading; it has to be reopened."""


class CameraEnded(Exception):
    """The source has no more frames."""


class CameraFeed:
    """Reads one driver on its own thread, one frame per request, so a hung camera
    becomes a timeout instead of a hung station.

    :param driver: an opened :class:`~inspector.camera.CameraDriver`.
    """

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self._it = iter(driver)
        self._req: queue.Queue[bool] = queue.Queue()
        self._resp: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._pending = False
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._work, name="inspector-camera", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while not self._closed.is_set():
            try:
                self._req.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                frame = next(self._it)
            except StopIteration:
                self._resp.put(("end", None))
                return
            except Exception as exc:  # a driver bug or a device error: reopen, carry on
                self._resp.put(("error", exc))
                return
            self._resp.put(("frame", frame))

    def grab(self, timeout: float, fresh: bool = False) -> Any:
        """The next frame.

        :param timeout: seconds to wait.
        :param fresh: drop a frame that arrived late for an earlier request (trigger mode
            wants a frame taken after the trigger).
        :raises CameraTimeout: nothing within ``timeout`` (the request stays open).
        :raises CameraFailed: the driver raised.
        :raises CameraEnded: the source ended.
        """
        if fresh and self._pending is False:
            while True:  # late answers to requests that timed out
                try:
                    kind, value = self._resp.get_nowait()
                except queue.Empty:
                    break
                if kind != "frame":
                    return self._answer(kind, value)
        if not self._pending:
            self._req.put(True)
            self._pending = True
        try:
            kind, value = self._resp.get(timeout=timeout)
        except queue.Empty:
            raise CameraTimeout(f"camera timeout after {timeout:g} s") from None
        self._pending = False
        return self._answer(kind, value)

    @staticmethod
    def _answer(kind: str, value: Any) -> Any:
        if kind == "frame":
            return value
        if kind == "end":
            raise CameraEnded("the camera source ended")
        raise CameraFailed(f"{type(value).__name__}: {value}")

    def close(self) -> None:
        """Stop the reader and close the driver (a reader stuck in the driver is abandoned)."""
        self._closed.set()
        try:
            self.driver.close()
        except Exception as exc:
            log.warning("camera close: %s", exc)


def check_frame(frame: Any) -> np.ndarray:
    """The frame's image if it is one the agent can inspect.

    :raises ValueError: why it is corrupt (not an array, wrong dtype or shape, empty).
    """
    image = getattr(frame, "image", None)
    if not isinstance(image, np.ndarray):
        raise ValueError(f"no image array (got {type(image).__name__})")
    if image.dtype != np.uint8:
        raise ValueError(f"expected uint8 pixels, got {image.dtype}")
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 3)):
        raise ValueError(f"expected (H, W) or (H, W, 3) pixels, got shape {image.shape}")
    if min(image.shape[:2]) < 8:
        raise ValueError(f"frame of {image.shape[1]}x{image.shape[0]} pixels is too small")
    return image
