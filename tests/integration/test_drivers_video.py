"""The video camera on a video file the test writes with OpenCV."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from inspector import CameraError
from inspector.camera import open_camera

N = 12


@pytest.fixture()
def video(tmp_path):
    """An MJPG .avi of N frames whose brightness encodes the frame number."""
    path = tmp_path / "line.avi"
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    assert w.isOpened()
    for i in range(N):
        w.write(np.full((48, 64, 3), 10 + 20 * i, np.uint8))
    w.release()
    return path


def brightness(frames):
    return [round((float(f.image.mean()) - 10) / 20) for f in frames]


def test_reads_every_frame_in_order(video):
    cam = open_camera("video", {"path": str(video)})
    frames = list(cam)
    cam.close()
    assert len(frames) == N and cam.stats.frames_read == N
    assert brightness(frames) == list(range(N))
    assert frames[0].image.shape == (48, 64) and frames[3].part_id == "line-3"
    color = list(open_camera("video", {"path": str(video), "grayscale": "false"}))
    assert color[0].image.shape == (48, 64, 3)


def test_every_and_loop(video):
    frames = list(open_camera("video", {"path": str(video), "every": "5"}))
    assert brightness(frames) == [0, 5, 10]
    cam = open_camera("video", {"path": str(video), "loop": "true", "every": "4"})
    it = iter(cam)
    got = [next(it) for _ in range(7)]
    assert brightness(got) == [0, 4, 8, 0, 4, 8, 0]


def test_video_errors(tmp_path):
    with pytest.raises(CameraError, match="does not exist"):
        open_camera("video", {"path": str(tmp_path / "none.avi")})
    (tmp_path / "junk.avi").write_bytes(b"not a video" * 100)
    with pytest.raises(CameraError, match="cannot open"):
        open_camera("video", {"path": str(tmp_path / "junk.avi")})
    with pytest.raises(CameraError, match="every must be >= 1"):
        open_camera("video", {"path": str(tmp_path / "junk.avi"), "every": "0"})
