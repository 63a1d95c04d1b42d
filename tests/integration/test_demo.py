"""The demo's steps at a tiny scale, so that `make demo` cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration._mqtt_harness import mosquitto_binary

ROOT = Path(__file__).resolve().parents[2]


def test_demo_end_to_end_at_a_tiny_scale(tmp_path):
    if mosquitto_binary() is None:
        pytest.skip("mosquitto is not installed: apt-get install mosquitto (make test does)")
    out = tmp_path / "demo"
    args = [sys.executable, str(ROOT / "main.py"), "demo", "--out", str(out)]
    args += ["--parts", "20", "--timesteps", "256", "--bc-samples", "256", "--eval-episodes", "10"]
    args += ["--perception-samples", "128"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parts inspected"].startswith("20 ")
    assert summary["results received by the subscriber"] == "20 of 20"
    for key in (
        "defect recall",
        "point recall (1-px points, invisible in the overview)",
        "false-alarm rate",
        "mean glimpses per part",
        "parts/s (station loop)",
    ):
        assert key in summary
    assert len((out / "results.jsonl").read_text().splitlines()) == 20
    assert (out / "report.png").stat().st_size > 10_000
    assert (out / "model.onnx").is_file() and (out / "station.yaml").is_file()
    # A second run reuses the trained policy.
    again = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "reusing the trained policy" in again.stdout
    report = json.loads((out / "run" / "report.json").read_text())
    assert report["kept"]["frames"]["count"] == 10  # held-out panels chose the kept model
    assert report["operating_point"]["frames"]["source"].startswith("synthetic panels")
