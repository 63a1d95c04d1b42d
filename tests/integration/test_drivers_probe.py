"""``python main.py camera probe`` end to end, in a subprocess like a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.commands.camera import CELL, contact_sheet
from inspector.frames import Frame, Truth

REPO = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "main.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_probe_synthetic_writes_a_sheet(tmp_path):
    sheet = tmp_path / "out" / "sheet.png"
    r = run(
        "camera", "probe", "--camera", "synthetic", "--param", "size=256", "--param", "seed=4",
        "--frames", "9", "--sheet", str(sheet),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "frames read: 9" in out and "frames skipped: 0" in out and "frames/s:" in out
    assert "labels:" in out
    img = cv2.imread(str(sheet))
    assert img is not None and img.shape[0] > 3 * CELL and img.shape[1] > 3 * CELL
    # Masks are outlined in red: some pixels are clearly red.
    b, g, rr = (img[..., k].astype(int) for k in range(3))
    assert ((rr > 180) & (g < 100) & (b < 100)).sum() > 10


def test_probe_counts_skipped_files(tmp_path):
    data = tmp_path / "footage"
    data.mkdir()
    cv2.imwrite(str(data / "a.jpg"), np.full((30, 40), 100, np.uint8))
    (data / "b.jpg").write_bytes(b"")
    r = run("camera", "probe", "--camera", "folder", "--param", f"path={data}")
    assert r.returncode == 0, r.stderr
    assert "frames read: 1" in r.stdout and "frames skipped: 1" in r.stdout
    assert "b.jpg: empty file" in r.stdout


def test_probe_magnetic_tile(magnetic_tile, tmp_path):
    r = run(
        "camera", "probe", "--camera", "folder",
        "--param", f"path={magnetic_tile}", "--param", "manifest=splits.csv",
        "--param", "split=test",
        "--frames", "300", "--sheet", str(tmp_path / "mt.png"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "frames read: 263" in r.stdout and "frames skipped: 0" in r.stdout
    assert (tmp_path / "mt.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--camera", "synthtic"], "unknown camera driver 'synthtic' (did you mean 'synthetic'?)"),
        (["--camera", "synthetic", "--param", "siz=3"], "has no parameter 'siz'"),
        (["--camera", "synthetic", "--param", "size=big"], "size: expected int, got 'big'"),
        (["--camera", "synthetic", "--param", "size"], "--param expects KEY=VALUE"),
        (["--camera", "folder", "--param", "path=/no/such/folder"], "does not exist"),
        (["--camera", "synthetic", "--frames", "0"], "expected a positive integer"),
        (["--camera", "synthetic", "--sheet", "x.jpg"], "--sheet expects a .png"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, text):
    r = run("camera", "probe", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], r.stderr


def test_the_old_spelling_still_works_with_a_deprecation_note():
    r = run(
        "camera", "probe", "--driver", "synthetic", "--param", "size=128", "seed=4",
        "--frames", "2",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "frames read: 2" in r.stdout
    notes = r.stderr.strip().splitlines()
    assert notes == [
        "inspector: note: --driver synthetic is deprecated; write --camera synthetic",
        "inspector: note: --param size=128 seed=4 is deprecated; write --param size=128 "
        "--param seed=4 (one per flag)",
    ]


def test_probe_needs_a_camera():
    r = run("camera", "probe")
    assert r.returncode == 2 and "camera probe needs --camera NAME" in r.stderr


def test_camera_list_names_every_driver():
    r = run("camera", "list")
    assert r.returncode == 0, r.stderr
    for name in ("synthetic", "folder", "video", "opencv"):
        assert f"{name}  (camera_drivers." in r.stdout
    assert "path: required" in r.stdout and "size: default 512" in r.stdout


def test_contact_sheet_draws_boxes_and_handles_color():
    img = np.full((50, 80, 3), 90, np.uint8)
    from inspector import Box

    f = Frame(img, "p", 0.0, "test", Truth("dent", boxes=(Box(10, 10, 40, 30, "dent"),)))
    g = Frame(np.zeros((20, 20), np.uint8), "q", 0.0, "test")
    sheet = contact_sheet([f, g])
    assert sheet.ndim == 3 and sheet.shape[1] >= 2 * CELL
    with pytest.raises(ValueError):
        contact_sheet([])
