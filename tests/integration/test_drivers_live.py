"""The live ``opencv`` camera: drops, reconnects with back-off, never crashes the caller.

The local stream is a video file the test writes; a file goes through the same
code path as a device or an RTSP URL. Its end is a drop; renaming it away and
back is a stream that goes down and comes up again.
"""

from __future__ import annotations

import itertools
import threading
import time

import cv2
import numpy as np
import pytest

from camera_drivers.live import LiveCamera, parse_source
from inspector import CameraError
from inspector.camera import open_camera

N = 8


@pytest.fixture()
def stream(tmp_path):
    path = tmp_path / "stream.avi"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (32, 24))
    assert w.isOpened()
    for i in range(N):
        w.write(np.full((24, 32, 3), 20 * i, np.uint8))
    w.release()
    return path


def test_parse_source():
    assert parse_source("0") == (0, "device")
    assert parse_source("rtsp://127.0.0.1:8554/cam")[1] == "url"
    assert parse_source("videotestsrc ! videoconvert ! appsink")[1] == "gstreamer"
    assert parse_source("/data/line.avi")[1] == "file"


def test_end_of_stream_reconnects_and_carries_on(stream):
    cam = open_camera("opencv", {"source": str(stream), "backoff": "0.001", "max_backoff": "0.01"})
    frames = list(itertools.islice(cam, 3 * N + 2))
    cam.close()
    assert len(frames) == 3 * N + 2
    assert cam.stats.reconnects == 3  # each end of the file is a drop
    assert cam.stats.frames_read == 3 * N + 2
    levels = [round(float(f.image.mean()) / 20) for f in frames]
    assert levels[: N + 1] == list(range(N)) + [0]
    assert frames[-1].meta["reconnects"] == 3
    assert len({f.part_id for f in frames}) == len(frames)


def test_drop_and_reconnect_when_the_source_comes_back(stream, tmp_path):
    gone = tmp_path / "gone.avi"
    cam = LiveCamera(str(stream), backoff=0.005, max_backoff=0.02)
    it = iter(cam)
    first = [next(it) for _ in range(N)]
    stream.rename(gone)  # the stream goes down

    def bring_back():
        # Wait (bounded) until the driver has failed to reconnect twice, then restore.
        deadline = time.monotonic() + 20
        while cam.failed_attempts < 2 and time.monotonic() < deadline:
            time.sleep(0.002)
        gone.rename(stream)

    t = threading.Thread(target=bring_back)
    t.start()
    after = next(it)  # blocks inside the driver's back-off loop until the file returns
    t.join()
    cam.close()
    assert len(first) == N
    assert cam.failed_attempts >= 2
    assert cam.stats.reconnects == 1
    assert round(float(after.image.mean()) / 20) == 0  # the stream starts again


def test_backoff_doubles_and_gives_up_without_raising(stream):
    cam = LiveCamera(str(stream), backoff=0.01, max_backoff=0.04, max_reconnects=4)
    waits: list[float] = []
    cam.sleep = waits.append  # record instead of sleeping
    it = iter(cam)
    for _ in range(N):
        next(it)
    stream.unlink()  # gone for good
    assert list(it) == []  # the iteration ends; nothing is raised
    assert waits == [0.01, 0.02, 0.04, 0.04]
    assert cam.failed_attempts == 4 and cam.stats.reconnects == 0


def test_no_reconnect_stops_at_the_drop(stream):
    cam = LiveCamera(str(stream), reconnect=False)
    assert len(list(cam)) == N and cam.stats.reconnects == 0


def test_fps_cap_paces_the_frames(stream):
    cam = LiveCamera(str(stream), fps=20.0)
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        time.sleep(s)

    cam.sleep = sleep
    assert len(list(itertools.islice(cam, 4))) == 4
    # The first frame is due at once; the others wait for their slot, never more than
    # one interval (a decoded 32x24 frame takes far less than 1/20 s).
    assert len(waits) >= 1 and all(0 < w <= 0.05 + 1e-9 for w in waits)


def test_open_errors(tmp_path):
    with pytest.raises(CameraError, match="cannot open source"):
        open_camera("opencv", {"source": str(tmp_path / "missing.avi")})
    with pytest.raises(CameraError, match="needs parameter"):
        open_camera("opencv", {})
    with pytest.raises(CameraError, match="fps must be > 0"):
        open_camera("opencv", {"source": "0", "fps": "-1"})
    with pytest.raises(CameraError, match="backoff"):
        open_camera("opencv", {"source": "0", "backoff": "5", "max_backoff": "1"})
