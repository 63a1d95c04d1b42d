"""profile explain: per-step traces, JSON sums, figure, on every shipped profile."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "reward_profiles").glob("*.yaml"))


def camera_args(profile: Path, magnetic_tile: Path | None) -> list[str]:
    if "magnetic" in profile.name:
        return [
            "--camera",
            "folder",
            "--param",
            f"path={magnetic_tile}",
            "--param",
            "manifest=splits.csv",
            "--param",
            "split=val",
        ]
    return ["--camera", "synthetic", "--param", "size=128"]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_explain_writes_traces_whose_returns_match(profile, tmp_path, request):
    mt = request.getfixturevalue("magnetic_tile") if "magnetic" in profile.name else None
    out, png = tmp_path / "trace.json", tmp_path / "trace.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "main.py"),
            "profile",
            "explain",
            str(profile),
            *camera_args(profile, mt),
            "--episodes",
            "5",
            "--json",
            str(out),
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "return raw" in proc.stdout
    doc = json.loads(out.read_text())
    assert len(doc["episodes"]) == 5
    for ep in doc["episodes"]:
        assert ep["steps"], ep
        for s in ep["steps"]:
            assert {"action", "terms", "raw", "redistributed", "shaped"} <= set(s)
        assert math.isclose(sum(s["raw"] for s in ep["steps"]), ep["return_raw"], abs_tol=1e-9)
        assert math.isclose(ep["return_redistributed"], ep["return_raw"], abs_tol=1e-6)
    assert png.stat().st_size > 5000


def test_learned_redistribution_explained_preserves_returns(tmp_path):
    prof = tmp_path / "learned.yaml"
    text = (ROOT / "reward_profiles" / "lcd_panel.yaml").read_text()
    text = text.replace(
        "redistribution: {method: exponential, lambda: 0.15, window: 20}",
        "redistribution: {method: learned, hidden: 16}",
    )
    assert "method: learned" in text
    prof.write_text(text)
    out = tmp_path / "t.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "main.py"),
            "profile",
            "explain",
            str(prof),
            "--param",
            "size=128",
            "--episodes",
            "4",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for ep in json.loads(out.read_text())["episodes"]:
        assert math.isclose(ep["return_redistributed"], ep["return_raw"], abs_tol=1e-6)
