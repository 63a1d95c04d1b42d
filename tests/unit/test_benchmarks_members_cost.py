"""benchmarks.studies.members_cost: records a finished train --members run, renders it."""

from __future__ import annotations

import json

import pytest

import benchmarks.studies.members_cost.cli as mc


def _run(tmp_path, status: str):
    run = tmp_path / "run"
    rows = []
    for name, cpu in (("m0", 60.0), ("m1", 90.0), ("ensemble", 3.0), ("student", 30.0)):
        d = run / (f"members/{name}" if name[0] == "m" and name[1:].isdigit() else name)
        d.mkdir(parents=True, exist_ok=True)
        (d / "cost.json").write_text(json.dumps({"cpu_s": cpu}))
        rows.append(
            {
                "name": name,
                "path": str(d),
                "balanced_accuracy": 0.5,
                "defect_recall": None,
                "cpu_min": 1.0,
                "cpu_min_to_deployable": 2.5,
            }
        )
    spec = {
        "profile": "/somewhere/magnetic_tile.yaml",
        "camera": "folder",
        "params": {"path": "/somewhere/footage", "split": "train"},
        "config": {"seed": 0, "perception_samples": 8000, "n_envs": 4},
    }
    (run / "members" / "m0" / "member.json").write_text(json.dumps(spec))
    asked = {"members": 2, "timesteps": 100, "distill_timesteps": 50, "seed": 0}
    (run / "members.json").write_text(json.dumps({"asked": asked, "status": status, "rows": rows}))
    return run


def test_an_unfinished_run_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "FOLDER", tmp_path / "results")
    with pytest.raises(SystemExit, match="not finished"):
        mc.record(_run(tmp_path, "student"), "x")


def test_a_run_is_saved_with_its_configuration_and_rendered_without_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(mc, "FOLDER", tmp_path / "results")
    data = mc.record(_run(tmp_path, "done"), "x", note="what it shows")
    cfg = data["benchmark"]["config"]
    assert cfg["train_config"] == {"perception_samples": 8000} and cfg["members"] == 2
    assert "--members 2 --distill-timesteps 50" in data["command"]
    text = mc.report([data])
    assert "| student | - | 0.500 | - |" in text and "what it shows" in text
    assert "/somewhere" not in text and "--param path=FOOTAGE" in text
    assert all("path" not in r for r in data["rows"])
