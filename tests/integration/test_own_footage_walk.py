"""The README's "Your own footage" walk, at a tiny scale, on data sets written here.

Two annotated sets as data sets ship them: a Pascal VOC set with a defect-free class
(frames without boxes are ``ok``; some ``<filename>`` without an extension) and a COCO
set of two defect classes and no defect-free frame (classification only). Each goes
through import, footage list/frames, profile check --strict, train on the store's
train split (the val split chooses the kept model), calibrate on the val split,
eval on the held-out split, and export. Tiny images, few frames, very few steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from inspector.cli import main

SIZE = 48
N = 40
#: The tiny recipe: every stage runs, each one barely.
TINY = (
    "n_envs: 1\nn_steps: 32\nbatch_size: 32\nn_epochs: 1\nselect_interval: 32\n"
    "select_episodes: 6\nfinal_eval_episodes: 4\ncheckpoint_interval: 64\n"
    "cnn_channels: 8\nfeatures_dim: 32\nnet_arch: [32]\n"
)
PROFILE = """\
name: {name}
classes: [{classes}]
{ok_line}step_budget: 4
scan: {{glimpse: 16, overview: 16, zoom_levels: 2}}
terms:
  - term: correct_class
    reward: 1.0
  - term: wrong_class
    reward: -1.0
  - term: step_cost
    reward: -0.01
"""


def run(capsys, *args: object) -> tuple[int, str]:
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out + out.err


def _panel(rng: np.random.Generator, kind: str | None) -> tuple[np.ndarray, tuple | None]:
    """A gray panel; ``kind`` adds a bright (crazing, scratch) or dark (patches) block."""
    img = rng.integers(90, 110, (SIZE, SIZE), dtype=np.uint8)
    if kind is None:
        return img, None
    x0, y0 = (int(v) for v in rng.integers(4, SIZE - 16, 2))
    img[y0 : y0 + 10, x0 : x0 + 10] = 30 if kind == "patches" else 230
    return img, (x0, y0, x0 + 10, y0 + 10)


def write_voc(root: Path) -> Path:
    """VOC: Annotations/ + JPEGImages/, half ``ok`` (no boxes), half ``scratch``."""
    rng = np.random.default_rng(1)
    (root / "Annotations").mkdir(parents=True)
    (root / "JPEGImages").mkdir()
    for i in range(N):
        img, box = _panel(rng, "scratch" if i % 2 else None)
        cv2.imwrite(str(root / "JPEGImages" / f"panel_{i}.png"), img)
        obj = ""
        if box:
            x0, y0, x1, y1 = box
            obj = (
                f"<object><name>scratch</name><bndbox><xmin>{x0 + 1}</xmin><ymin>{y0 + 1}"
                f"</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>"
            )
        name = f"panel_{i}" if i % 3 == 0 else f"panel_{i}.png"  # some without extension
        (root / "Annotations" / f"panel_{i}.xml").write_text(
            f"<annotation><filename>{name}</filename><size><width>{SIZE}</width>"
            f"<height>{SIZE}</height><depth>1</depth></size>{obj}</annotation>"
        )
    return root


def write_coco(root: Path) -> Path:
    """COCO: annotations/instances.json + images/, every frame defective (2 classes)."""
    rng = np.random.default_rng(2)
    (root / "images").mkdir(parents=True)
    (root / "annotations").mkdir()
    images, anns = [], []
    for i in range(N):
        kind = "crazing" if i % 2 else "patches"
        img, (x0, y0, x1, y1) = _panel(rng, kind)
        cv2.imwrite(str(root / "images" / f"{kind}_{i}.png"), img)
        images.append({"id": i, "file_name": f"images/{kind}_{i}.png", "width": SIZE,
                       "height": SIZE})  # fmt: skip
        anns.append({"id": i, "image_id": i, "category_id": 1 if kind == "crazing" else 2,
                     "bbox": [x0, y0, x1 - x0, y1 - y0]})  # fmt: skip
    doc = {"images": images, "annotations": anns,
           "categories": [{"id": 1, "name": "crazing"}, {"id": 2, "name": "patches"}]}  # fmt: skip
    path = root / "annotations" / "instances.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def _walk(capsys, tmp: Path, store: Path, profile: Path, cfg: Path) -> dict:
    """check, train, calibrate (val), eval (held-out), export; returns eval's figures."""
    rc, out = run(capsys, "profile", "check", "--strict", profile)
    assert rc == 0 and out.startswith("ok "), out
    rc, out = run(capsys, "footage", "list", "--store", store)
    assert rc == 0 and "val " in out and "heldout " in out, out
    run_dir = tmp / f"run-{store.name}"
    rc, out = run(
        capsys, "train", "--profile", profile, "--camera", "store", "--param", f"path={store}",
        "--param", "split=train", "--preset", "none", "--config", cfg, "--timesteps", "64",
        "--out", run_dir, "--seed", "1", "--no-progress",
    )  # fmt: skip
    assert rc == 0, out
    report = json.loads((run_dir / "report.json").read_text())
    assert report["kept"]["frames"]["split"] == "val"  # checkpoints chosen on val frames
    return {"run": run_dir, "train_out": out}


def _eval(capsys, run_dir: Path, store: Path, tmp: Path) -> dict:
    rc = main([str(a) for a in (
        "eval", run_dir, "--camera", "store", "--param", f"path={store}",
        "--episodes", "1000", "--json", tmp / "eval.json",
    )])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out
    assert "eval: store without split=: using its heldout split" in out.err
    assert "eval: judged" in out.err and "held-out frames from store" in out.err, out.err
    return json.loads([line for line in out.out.splitlines() if line.startswith("{")][-1])


def test_voc_footage_with_an_ok_class(tmp_path, capsys, tiny_config):
    voc = write_voc(tmp_path / "voc")
    store = tmp_path / "store-voc"
    rc, out = run(
        capsys, "footage", "import", voc, "--format", "voc", "--store", store,
        "--label-rule", "largest-area", "--heldout-percent", "20", "--val-percent", "20",
        "--json", tmp_path / "import.json", "--no-progress",
    )  # fmt: skip
    assert rc == 0 and f"{N} new, 0 already present, 0 skipped" in out, out
    assert "frame labels by largest-area" in out
    rc, out = run(capsys, "footage", "frames", store, "--split", "val", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and rows and all(r["split"] == "val" for r in rows)
    assert {r["source_format"] for r in rows} == {"voc"}
    profile = tmp_path / "voc.yaml"
    profile.write_text(PROFILE.format(name="voc", classes="ok, scratch", ok_line=""))
    run_dir = _walk(capsys, tmp_path, store, profile, tiny_config)["run"]
    rc, out = run(capsys, "calibrate", run_dir, "--camera", "store", "--param", f"path={store}")
    assert rc == 0 and "using its val split" in out and "operating_point.json" in out, out
    figures = _eval(capsys, run_dir, store, tmp_path)
    with_heldout = sum(1 for r in _frames(capsys, store) if r["split"] == "heldout")
    assert figures["episodes"] == with_heldout
    assert "false_alarm_rate" in figures and "ok_bias" in figures
    rc, out = run(capsys, "export", run_dir, "--out", tmp_path / "voc.onnx")
    assert rc == 0 and (tmp_path / "voc.onnx").is_file(), out


def test_coco_footage_without_an_ok_class(tmp_path, capsys, tiny_config):
    ann = write_coco(tmp_path / "coco")
    store = tmp_path / "store-coco"
    rc, out = run(
        capsys, "footage", "import", ann, "--format", "coco", "--images", tmp_path / "coco",
        "--store", store, "--label-rule", "filename-pattern", "--heldout-percent", "20",
        "--val-percent", "20", "--no-progress",
    )  # fmt: skip
    assert rc == 0 and f"{N} new, 0 already present, 0 skipped" in out, out
    labels = {r["label"] for r in _frames(capsys, store)}
    assert labels == {"crazing", "patches"}
    profile = tmp_path / "coco.yaml"
    # Without ok_class, and no class named ok: refused with what to write.
    profile.write_text(PROFILE.format(name="coco", classes="crazing, patches", ok_line=""))
    rc, out = run(capsys, "profile", "check", "--strict", profile)
    assert rc == 2 and "ok_class: none" in out, out
    profile.write_text(
        PROFILE.format(name="coco", classes="crazing, patches", ok_line="ok_class: none\n")
    )
    walked = _walk(capsys, tmp_path, store, profile, tiny_config)
    run_dir = walked["run"]
    assert "per-class recall: crazing" in walked["train_out"]
    assert "operating point: not chosen" in walked["train_out"]
    rc, out = run(capsys, "calibrate", run_dir, "--camera", "store", "--param", f"path={store}")
    assert rc == 2 and "has no ok class" in out, out
    figures = _eval(capsys, run_dir, store, tmp_path)
    assert figures["classification_only"] is True
    assert "false_alarm_rate" not in figures and "defect_recall" not in figures
    assert set(figures["per_class_recall"]) == {"crazing", "patches"}
    rc, out = run(capsys, "export", run_dir, "--out", tmp_path / "coco.onnx")
    assert rc == 0, out
    from inspector.policy.onnx_backend import OrtPolicy

    meta = OrtPolicy(tmp_path / "coco.onnx").meta
    assert meta.classification_only and meta.ok_class is None


def _frames(capsys, store: Path) -> list[dict]:
    rc, out = run(capsys, "footage", "frames", store, "--json")
    assert rc == 0
    return [json.loads(line) for line in out.splitlines()]
