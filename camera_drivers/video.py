"""The ``video`` camera: frames of a video file through OpenCV.

For recorded line footage. A live stream (device, RTSP, GStreamer) is the
``opencv`` driver, which reconnects when the stream drops; this one stops at the
end of the file or starts it again (``loop``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from inspector import (
    CameraDriver,
    CameraError,
    Frame,
    hookimpl,
    import_cv2,
)

log = logging.getLogger(__name__)


class VideoCamera(CameraDriver):
    """Replay a video file.

    :param path: the video file (anything the OpenCV build decodes: avi, mp4, mkv, ...).
    :param loop: start again at the end instead of stopping.
    :param every: yield every n-th frame (1 = all).
    :param grayscale: convert frames to one channel (else BGR as decoded).
    """

    def __init__(
        self, path: str, loop: bool = False, every: int = 1, grayscale: bool = True
    ) -> None:
        super().__init__()
        cv2 = import_cv2("the video camera")
        self.path = Path(path).expanduser()
        if not self.path.is_file():
            what = "is not a file" if self.path.exists() else "does not exist"
            raise CameraError(f"video: {self.path} {what}")
        if every < 1:
            raise CameraError(f"video: every must be >= 1, got {every}")
        self.loop = bool(loop)
        self.every = int(every)
        self.grayscale = bool(grayscale)
        self._cap = cv2.VideoCapture(str(self.path))
        if not self._cap.isOpened():
            self._cap.release()
            raise CameraError(f"video: OpenCV cannot open {self.path} (not a video it can decode)")
        self.fps = float(self._cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self.frame_count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)

    def describe(self) -> str:
        """One line for start-up banners."""
        return f"video {self.path} ({self.frame_count} frames at {self.fps:g} fps)"

    def _rewind(self) -> bool:
        cv2 = import_cv2("the video camera")
        # Seeking is unreliable for some containers; reopening always starts at frame 0.
        self._cap.release()
        self._cap = cv2.VideoCapture(str(self.path))
        return bool(self._cap.isOpened())

    def frames(self) -> Iterator[Frame]:
        """Frames in file order (every ``every``-th), again from the start when ``loop``."""
        cv2 = import_cv2("the video camera")
        n = 0  # frame index within the file
        yielded_this_pass = False
        while True:
            ok, img = self._cap.read() if self._cap is not None else (False, None)
            if not ok or img is None:
                if not self.loop or not yielded_this_pass:
                    # End of the file, or a looping file that yields nothing: stop.
                    return
                log.debug("video %s: end of file, starting again", self.path)
                if not self._rewind():
                    log.warning("video %s: cannot reopen to loop; stopping", self.path)
                    return
                n, yielded_this_pass = 0, False
                continue
            index = n
            n += 1
            if index % self.every:
                continue
            if self.grayscale and img.ndim == 3:
                img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
            self.stats.frames_read += 1
            yielded_this_pass = True
            yield Frame(
                image=img,
                part_id=f"{self.path.stem}-{index}",
                timestamp=time.time(),
                source=f"video:{self.path}",
                meta={"index": index},
            )

    def close(self) -> None:
        """Release the file (idempotent)."""
        if self._cap is not None:
            self._cap.release()
            self._cap = None


@hookimpl
def register_camera_drivers(register: Callable[..., None]) -> None:
    """Register the ``video`` driver."""
    register("video", VideoCamera)
