"""Export: ONNX parity with torch on recorded episodes, int8 agreement, refusal, same actions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from inspector.env import InspectionEnv
from inspector.errors import ModelError
from inspector.export.onnx import compare, export_onnx, record_observations
from inspector.policy.agent import run_episode
from inspector.policy.load import load_policy
from inspector.policy.onnx_backend import OrtPolicy
from inspector.scan import STOP, Scanner
from inspector.train.torch_policy import TorchPolicy, load_any_policy, load_trained, meta_for_model

ROOT = Path(__file__).resolve().parents[2]
SYN = {"size": 128, "invisible_at": 32, "point_size": "1,1"}


def tiny_run(
    tmp: Path, profile: str, camera: str, params: dict[str, str], seed: int | None = None
) -> Path:
    cfg = tmp / "cfg.yaml"
    cfg.write_text(
        "n_envs: 1\nn_steps: 64\nbatch_size: 64\nn_epochs: 1\nfinal_eval_episodes: 0\n"
        "bc_samples: 256\nbc_epochs: 2\n"
        "perception_samples: 64\nperception_epochs: 1\nperception_freeze: true\n"
        "perception_levels: all\nglimpse_evidence: true\noverview_evidence: true\n"
        "verdict_balance: true\nverdict_stop_weight: 4.0\n"
    )
    out = tmp / "run"
    args = [sys.executable, str(ROOT / "main.py"), "train", "--profile", profile]
    args += ["--camera", camera, "--timesteps", "64", "--out", str(out), "--config", str(cfg)]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    if seed is not None:
        args += ["--seed", str(seed)]
    proc = subprocess.run(args + ["--no-progress"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def syn_run(tmp_path_factory) -> Path:
    return tiny_run(
        tmp_path_factory.mktemp("syn"), "reward_profiles/lcd_panel.yaml", "synthetic", SYN
    )


def test_the_run_pretrained_perception_and_cloned_with_the_weighted_verdict_loss(syn_run):
    perception = json.loads((syn_run / "perception.json").read_text())
    assert perception["perception/samples"] == 64
    assert 0.0 <= perception["perception/accuracy"] <= 1.0
    assert perception["perception/frozen_weights"] > 0
    bc = json.loads((syn_run / "bc.json").read_text())
    assert "bc/stop_verdict_accuracy" in bc
    # The saved model rebuilds its per-glimpse evidence head, on the overview too (every
    # export test below runs through it).
    model, _, _ = load_trained(syn_run)
    assert model.policy.features_extractor.evidence.out_features == 3
    assert model.policy.features_extractor.overview_evidence  # also judges the overview


def test_onnx_graph_checks_and_carries_metadata(syn_run, tmp_path):
    path = export_onnx(syn_run, tmp_path / "m.onnx")
    m = onnx.load(str(path))
    onnx.checker.check_model(m)
    assert m.opset_import[0].version >= 17
    props = {p.key: json.loads(p.value) for p in m.metadata_props}
    assert props["inspector.classes"] == ["ok", "line", "point"]
    assert props["inspector.scan"]["glimpse"] == 32
    assert props["inspector.profile_name"] == "lcd_panel"
    assert len(props["inspector.profile_sha256"]) == 64
    assert len(props["inspector.model_sha256"]) == 64
    assert props["inspector.exporter_version"]
    # dynamic batch axis
    dim = m.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param


def _parity(run: Path, tmp: Path, camera: str, params: dict):
    model, profile, sha = load_trained(run)
    torch_pol = TorchPolicy(model, meta_for_model(model, profile, sha))
    ort_pol = OrtPolicy(export_onnx(run, tmp / "p.onnx"))
    obs = record_observations(torch_pol, camera, params, 1000)
    return compare(torch_pol, ort_pol, obs)


def test_onnx_matches_torch_on_1000_synthetic_observations(syn_run, tmp_path):
    r = _parity(syn_run, tmp_path, "synthetic", SYN)
    assert r["observations"] == 1000
    assert r["max_abs_diff_action_logits"] < 1e-4
    assert r["max_abs_diff_class_probs"] < 1e-4
    assert r["max_abs_diff_value"] < 1e-4
    assert r["action_agreement"] == 1.0


def test_onnx_matches_torch_on_1000_magnetic_tile_observations(magnetic_tile, tmp_path):
    params = {"path": str(magnetic_tile), "manifest": "splits.csv", "split": "val"}
    run = tiny_run(tmp_path, "reward_profiles/magnetic_tile.yaml", "folder", params)
    r = _parity(run, tmp_path, "folder", params)
    assert r["observations"] == 1000
    assert r["max_abs_diff_action_logits"] < 1e-4
    assert r["action_agreement"] == 1.0


def test_int8_export_reports_agreement_and_accuracy_change(syn_run, tmp_path):
    out = tmp_path / "q.onnx"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "main.py"),
            "export",
            str(syn_run),
            "--out",
            str(out),
            "--int8",
            "--observations",
            "300",
            "--eval-episodes",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.with_suffix(".export.json").read_text())
    assert 0.0 <= rep["int8_vs_fp32"]["action_agreement"] <= 1.0
    assert "change" in rep["eval_accuracy"]
    assert "int8 action agreement" in proc.stdout
    assert OrtPolicy(out).meta.classes == ("ok", "line", "point")


def test_station_backends_refuse_trained_zip_files(syn_run):
    with pytest.raises(ModelError, match="export first"):
        load_policy(syn_run / "model.zip")
    with pytest.raises(ModelError, match="unknown model kind"):
        load_policy(syn_run / "config.yaml")


def test_env_with_torch_and_station_path_with_onnx_take_the_same_actions(syn_run, tmp_path):
    model, profile, sha = load_trained(syn_run)
    torch_pol = TorchPolicy(model, meta_for_model(model, profile, sha))
    ort_pol = load_policy(export_onnx(syn_run, tmp_path / "s.onnx"))
    env = InspectionEnv(profile, "synthetic", SYN)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        env_actions = []
        for _ in range(profile.step_budget):
            a, probs = torch_pol.act(obs)
            env_actions.append(a)
            v = profile.classes.index(torch_pol.verdict(probs))
            obs, _, term, trunc, _ = env.step([a, v])
            if term or trunc:
                break
        scanner = Scanner(profile.scan, profile.step_budget)
        d = run_episode(ort_pol, scanner, env.frame.image, profile.step_budget)
        assert d.actions == env_actions
        if env_actions[-1] == STOP:
            assert d.stopped
        assert np.isfinite(d.probabilities).all()


def _cli(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(ROOT / "main.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_calibrated_operating_point_travels_from_run_to_onnx(syn_run, tmp_path):
    import re
    import shutil

    from inspector.policy.operating_point import FILE, shift_ok

    run = tmp_path / "run"
    shutil.copytree(syn_run, run)
    cam = ["--camera", "synthetic", "--episodes", "24"]
    for k, v in SYN.items():
        cam += ["--param", f"{k}={v}"]
    dry = _cli("calibrate", str(run), *cam, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "24 parts" in dry.stdout and not (run / FILE).exists()
    # A ceiling of 1.0 is always met.
    proc = _cli("calibrate", str(run), *cam, "--max-false-alarms", "1.0")
    assert proc.returncode == 0, proc.stderr
    point = json.loads((run / FILE).read_text())
    assert point["objective"] == "max_false_alarms" and point["target"] == 1.0
    assert point["frames"] == 24 and point["at_bias"]["false_alarm_rate"] <= 1.0
    assert load_any_policy(run).meta.ok_bias == point["ok_bias"]
    # A known bias, to follow it through: torch policy, verdict, ONNX metadata.
    (run / FILE).write_text(json.dumps({**point, "ok_bias": 0.75}))
    torch_pol = load_any_policy(run)
    assert torch_pol.meta.ok_bias == 0.75
    for p in (np.array([0.5, 0.3, 0.2]), np.array([0.3, 0.6, 0.1]), np.array([0.2, 0.35, 0.45])):
        want = int(np.argmax(torch_pol.meta.outcome_matrix @ shift_ok(p, 0.75)))
        assert torch_pol.verdict(p) == torch_pol.classes[want]
    onnx_path = export_onnx(run, tmp_path / "c.onnx")
    assert OrtPolicy(onnx_path).meta.ok_bias == 0.75
    # An ONNX file is calibrated in place; an engine is refused with what to do instead.
    again = _cli("calibrate", str(onnx_path), *cam)
    assert again.returncode == 0, again.stderr
    chosen = float(re.search(r"ok bias ([+-][0-9.]+) written", again.stdout).group(1))
    assert OrtPolicy(onnx_path).meta.ok_bias == pytest.approx(chosen, abs=0.005)
    engine = _cli("calibrate", str(tmp_path / "x.engine"), *cam)
    assert engine.returncode == 2 and "calibrate the ONNX file" in engine.stderr
    # A search depth chosen with the bias travels the same way, and the agent obeys it.
    proc = _cli("calibrate", str(run), *cam, "--search-depth", "1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run / FILE).read_text())["max_zoom"] == 1
    assert "zoom level 1 of 0..2 at most" in proc.stdout
    deep = export_onnx(run, tmp_path / "d.onnx")
    ort = OrtPolicy(deep)
    assert ort.meta.max_zoom == 1 and load_any_policy(run).meta.max_zoom == 1
    img = np.random.default_rng(0).integers(0, 256, (128, 128), dtype=np.uint8)
    d = run_episode(ort, Scanner.from_metadata(ort.meta), img, 12)
    assert max(p.zoom for p in d.path) <= 1 and d.native_glimpses == 0
    from inspector.export.onnx import write_ok_bias

    write_ok_bias(deep, 0.5, None)  # calibrated again to the full depth: the key goes
    assert OrtPolicy(deep).meta.max_zoom is None and OrtPolicy(deep).meta.ok_bias == 0.5
    # Trained on in place: the stale calibration no longer applies.
    (run / FILE).write_text(json.dumps({**point, "model_sha256": "0" * 64}))
    assert load_any_policy(run).meta.ok_bias == 0.0


def test_a_verdict_ensemble_exports_as_one_graph_that_matches_torch(syn_run, tmp_path):
    from inspector.export.onnx import torch_reference

    other = tiny_run(tmp_path, "reward_profiles/lcd_panel.yaml", "synthetic", SYN, seed=1)
    out = tmp_path / "ens.onnx"
    cam = []
    for k, v in SYN.items():
        cam += ["--param", f"{k}={v}"]
    proc = _cli(
        "export",
        str(syn_run),
        "--ensemble",
        str(other),
        "--out",
        str(out),
        "--observations",
        "300",
        "--camera",
        "synthetic",
        *cam,
    )
    assert proc.returncode == 0, proc.stderr
    assert "verdict ensemble of 2 runs" in proc.stdout
    rep = json.loads(out.with_suffix(".export.json").read_text())
    assert rep["ensemble"] == [str(syn_run), str(other)]
    assert rep["parity_fp32"]["max_abs_diff_class_probs"] < 1e-4
    assert rep["parity_fp32"]["action_agreement"] == 1.0
    ens = OrtPolicy(out)
    lead, _, _ = torch_reference(syn_run)
    second, _, _ = torch_reference(other)
    assert ens.meta.ensemble == (lead.meta.model_sha256, second.meta.model_sha256)
    assert ens.meta.ok_bias == 0.0
    # The lead's moves and value; the verdict is neither member's alone but their
    # normalised geometric mean.
    obs = record_observations(lead, "synthetic", SYN, 200)
    a, p, v = ens.forward(obs)
    la, lp, lv = lead.forward(obs)
    _, sp, _ = second.forward(obs)
    np.testing.assert_allclose(a, la, atol=1e-4)
    np.testing.assert_allclose(v, lv, atol=1e-4)
    assert not np.allclose(lp, sp, atol=1e-3)  # two different members
    want = np.sqrt(lp * sp)
    np.testing.assert_allclose(p, want / want.sum(1, keepdims=True), atol=1e-4)
    # Calibrated like any exported model.
    cal = _cli("calibrate", str(out), "--camera", "synthetic", "--episodes", "24", *cam)
    assert cal.returncode == 0, cal.stderr
    assert "written into" in cal.stdout


def test_an_ensemble_of_runs_with_other_scan_settings_is_refused(syn_run, tmp_path):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(syn_run, other)
    prof = other / "profile.yaml"
    prof.write_text(prof.read_text().replace("glimpse: 32", "glimpse: 16", 1))
    proc = _cli("export", str(syn_run), "--ensemble", str(other), "--out", str(tmp_path / "x.onnx"))
    assert proc.returncode != 0
    assert "scan settings" in proc.stderr and not (tmp_path / "x.onnx").exists()
