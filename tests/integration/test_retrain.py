"""retrain: the gate refuses a candidate that really is worse; a promoted one is registered.

The worse candidate is honest, not staged: an operator's label CSV marks every
train-split frame ``ok`` (a labelling accident), so the candidate learns to pass
defective parts. Its held-out defect recall is measured below the base's, and
the gate must refuse it with that reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector.cli import main
from inspector.footage.store import FootageStore
from tests.unit.footage._helpers import ensure_store_driver, write_synthetic_manifest

CONFIG = """\
n_envs: 2
n_steps: 64
batch_size: 64
n_epochs: 1
learning_rate: 0.002
final_eval_episodes: 0
bc_samples: 0
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    ensure_store_driver()
    from inspector.train.config import TrainConfig
    from inspector.train.runner import train_run

    root = tmp_path_factory.mktemp("retrain")
    (root / "cfg.yaml").write_text(CONFIG)
    man = write_synthetic_manifest(root / "syn", 80)
    for name in ("clean", "poisoned"):
        assert (
            main(
                [
                    "footage",
                    "import",
                    str(man),
                    "--format",
                    "csv",
                    "--store",
                    str(root / name),
                    "--no-progress",
                ]
            )
            == 0
        )
    with FootageStore(root / "poisoned") as s:
        rows = [f"{r.frame_id},ok" for r in s.records(split="train")]
        held = s.records(split="heldout", labelled_only=True)
    assert any(r.label != "ok" for r in held), "the held-out frames need defects"
    (root / "accident.csv").write_text("frame_id,label\n" + "\n".join(rows) + "\n")
    assert (
        main(
            [
                "footage",
                "label",
                "--store",
                str(root / "poisoned"),
                "--csv",
                str(root / "accident.csv"),
            ]
        )
        == 0
    )
    cfg = TrainConfig.load(root / "cfg.yaml")
    train_run(
        "reward_profiles/lcd_panel.yaml",
        "synthetic",
        {"size": 128},
        512,
        root / "base",
        cfg,
        progress=False,
        evaluate_after=False,
    )
    return root


def test_gate_refuses_a_candidate_trained_on_mislabelled_footage(setup, capsys):
    root = setup
    rc = main(
        [
            "retrain",
            "--footage",
            str(root / "poisoned"),
            "--base",
            str(root / "base"),
            "--out",
            str(root / "bad"),
            "--timesteps",
            "1024",
            "--config",
            str(root / "cfg.yaml"),
            "--registry",
            str(root / "reg_bad"),
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    rep = json.loads((root / "bad" / "retrain_report.json").read_text())
    assert rep["comparison_view"] == "full" and not rep["classes_changed"]
    base, cand = rep["base_metrics"]["full"], rep["candidate_metrics"]["full"]
    # Both were judged on the same held-out frames, and the candidate really is worse.
    assert base["episodes"] == cand["episodes"] == rep["heldout_frames"]
    assert cand["defect_recall"] < base["defect_recall"]
    assert rep["gate"]["passed"] is False and rep["promoted"] is False
    assert any("defect recall" in r and "lower than the base" in r for r in rep["gate"]["reasons"])
    assert "not promoted: defect recall" in out
    assert rep["onnx"] is None and not (root / "bad" / "candidate.onnx").exists()
    assert not (root / "reg_bad").exists() or not list((root / "reg_bad").iterdir())
    assert (root / "bad" / "retrain_report.png").stat().st_size > 0


def test_a_promoted_candidate_is_listed_with_its_metrics_and_onnx(setup, capsys):
    root = setup
    reg = root / "registry"
    rc = main(
        [
            "retrain",
            "--footage",
            str(root / "clean"),
            "--base",
            str(root / "base"),
            "--out",
            str(root / "good"),
            "--timesteps",
            "256",
            "--config",
            str(root / "cfg.yaml"),
            "--registry",
            str(reg),
            "--no-progress",
            # Permissive on purpose: this test is about registration, not about the gate.
            "--min-recall-delta",
            "-1",
            "--max-false-alarm-delta",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    rep = json.loads((root / "good" / "retrain_report.json").read_text())
    assert rep["promoted"] and rep["registry_version"] == 1
    assert main(["models", "list", "--registry", str(reg), "--json"]) == 0
    versions = json.loads(capsys.readouterr().out)
    assert len(versions) == 1
    v = versions[0]
    onnx = Path(v["path"]) / "model.onnx"
    assert onnx.is_file()
    from inspector.files import sha256_file

    assert v["model_sha256"] == sha256_file(onnx)
    assert v["metrics"]["defect_recall"] == rep["candidate_metrics"]["full"]["defect_recall"]
    assert v["profile_sha256"] == rep["profile_sha256"]
    assert v["footage_manifest_sha256"] == sha256_file(Path(v["path"]) / "footage_manifest.csv")
    assert main(["models", "list", "--registry", str(reg)]) == 0
    text = capsys.readouterr().out
    assert "v0001" in text and "model.onnx" in text and "recall" in text
    # The ONNX file is what a station loads.
    from inspector.policy.load import load_policy

    assert load_policy(onnx).classes == ("ok", "line", "point")
