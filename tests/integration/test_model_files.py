"""Model files from elsewhere: loading one never runs code it carries (#32).

An SB3 ``.zip`` keeps pickles in its ``data`` member and its ``.pth`` weights; each
test plants a payload that would create a marker file when unpickled and checks
that every way the product loads a trained model either ignores it or refuses the
file with one line, and that the marker never appears.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.errors import InspectorError, ModelError
from inspector.train.runner import read_latest, resolve_teacher
from inspector.train.safe_load import read_model_zip
from inspector.train.torch_policy import load_any_policy, load_trained

ROOT = Path(__file__).resolve().parents[2]
CFG = (
    "n_envs: 1\nn_steps: 64\nbatch_size: 64\nn_epochs: 1\nfinal_eval_episodes: 0\n"
    "bc_samples: 64\nbc_epochs: 1\ncheckpoint_interval: 64\n"
)
SYN = ["--param", "size=128", "--param", "invisible_at=32"]


class Payload:
    """Unpickling this creates ``marker`` (what an attacker's code would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _train(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cfg = out.parent / "cfg.yaml"
    cfg.write_text(CFG)
    args = [sys.executable, str(ROOT / "main.py"), "train", "--profile"]
    args += ["reward_profiles/lcd_panel.yaml", "--camera", "synthetic", *SYN]
    args += ["--timesteps", "64", "--out", str(out), "--config", str(cfg), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        args + list(extra), capture_output=True, text=True, timeout=600, cwd=ROOT, env=env
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model") / "run"
    proc = _train(out)
    assert proc.returncode == 0, proc.stderr
    return out


def _rewrite(zip_path: Path, replace: dict[str, bytes], add: dict[str, bytes] | None = None):
    with zipfile.ZipFile(zip_path) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    members.update(replace)
    members.update(add or {})
    with zipfile.ZipFile(zip_path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _copy(run: Path, dest: Path) -> Path:
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns("tb"))
    return dest


def _poison_data(zip_path: Path, marker: Path) -> None:
    """Every pickled entry of ``data`` becomes the payload (as SB3 would decode it)."""
    with zipfile.ZipFile(zip_path) as zf:
        doc = json.loads(zf.read("data"))
    blob = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    n = 0
    for v in doc.values():
        if isinstance(v, dict) and ":serialized:" in v:
            v[":serialized:"] = blob
            n += 1
    assert n > 3  # spaces, schedules, the policy class...
    _rewrite(zip_path, {"data": json.dumps(doc).encode()})


def _poison_weights(zip_path: Path, member: str, marker: Path) -> None:
    buf = io.BytesIO()
    torch.save({"w": torch.zeros(1), "x": Payload(marker)}, buf)
    _rewrite(zip_path, {member: buf.getvalue()})


def test_pickles_in_data_are_never_decoded(run, tmp_path):
    marker = tmp_path / "pwned"
    evil = _copy(run, tmp_path / "evil")
    _poison_data(evil / "model.zip", marker)
    model, _, _ = load_trained(evil)  # loads: the pickled entries are not needed
    ref, _, _ = load_trained(run)
    for k, v in ref.policy.state_dict().items():
        assert torch.equal(v, model.policy.state_dict()[k])
    assert model.num_timesteps == ref.num_timesteps == 64
    load_any_policy(evil)
    resolve_teacher(ref_cfg(), str(evil))
    assert not marker.exists()


def ref_cfg():
    from inspector.train.config import TrainConfig

    return TrainConfig()


@pytest.mark.parametrize("member", ["policy.pth", "policy.optimizer.pth", "pytorch_variables.pth"])
def test_pickles_in_weights_are_refused(run, tmp_path, member):
    marker = tmp_path / "pwned"
    evil = _copy(run, tmp_path / "evil")
    _poison_weights(evil / "model.zip", member, marker)
    with pytest.raises(ModelError, match=f"{member} is not plain weights"):
        load_trained(evil)
    assert not marker.exists()


def test_zips_not_in_the_project_layout_are_refused(run, tmp_path):
    evil = _copy(run, tmp_path / "evil")
    _rewrite(evil / "model.zip", {}, add={"extra.pkl": b"x"})
    with pytest.raises(ModelError, match="unexpected member 'extra.pkl'"):
        read_model_zip(evil / "model.zip")
    (evil / "model.zip").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(ModelError, match="not a model zip"):
        load_trained(evil)
    junk = _copy(run, tmp_path / "junk")
    _rewrite(junk / "model.zip", {"data": b"[" * 100_000})
    with pytest.raises(ModelError, match="data member is not JSON"):
        load_trained(junk)


def test_weights_that_do_not_fit_the_run_config_are_one_error(run, tmp_path):
    other = _copy(run, tmp_path / "other")
    (other / "config.yaml").write_text("features_dim: 32\n")
    with pytest.raises(ModelError, match="do not fit the network"):
        load_trained(other)


def test_cli_verbs_refuse_a_poisoned_model_with_one_line(run, tmp_path):
    marker = tmp_path / "pwned"
    evil = _copy(run, tmp_path / "evil")
    _poison_weights(evil / "model.zip", "policy.pth", marker)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    verbs = [
        ["export", str(evil), "--out", str(tmp_path / "m.onnx")],
        ["eval", str(evil), "--camera", "synthetic", *SYN, "--episodes", "1"],
    ]
    for verb in verbs:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "main.py"), *verb],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            env=env,
        )
        err = [ln for ln in proc.stderr.splitlines() if "WARNING" not in ln]
        assert proc.returncode == 2, proc.stderr
        assert len(err) == 1 and "not plain weights" in err[0], proc.stderr
        assert "Traceback" not in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "name",
    ["../../model.zip", "/etc/passwd", "ckpt_/../../x.zip", "ckpt_x.zip\n", "other.zip", 7],
)
def test_latest_json_must_name_a_checkpoint_inside_the_run(tmp_path, name):
    ck = tmp_path / "checkpoints"
    ck.mkdir()
    (ck / "latest.json").write_text(json.dumps({"path": name}))
    with pytest.raises(InspectorError, match="must name a ckpt_"):
        read_latest(tmp_path)


def test_latest_json_symlink_out_and_bad_numbers(tmp_path):
    ck = tmp_path / "run" / "checkpoints"
    ck.mkdir(parents=True)
    (tmp_path / "elsewhere.zip").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere.zip", ck / "ckpt_1.zip")
    (ck / "latest.json").write_text(json.dumps({"path": "ckpt_1.zip"}))
    with pytest.raises(InspectorError, match="is not a file inside"):
        read_latest(tmp_path / "run")
    (ck / "ckpt_1.zip").unlink()
    (ck / "ckpt_1.zip").write_bytes(b"x")
    (ck / "latest.json").write_text('{"path": "ckpt_1.zip", "normaliser": {"mean": NaN}}')
    with pytest.raises(InspectorError, match="must be a finite number"):
        read_latest(tmp_path / "run")
    (ck / "latest.json").write_text("[" * 50_000)
    with pytest.raises(InspectorError, match="cannot read it"):
        read_latest(tmp_path / "run")


def test_resume_reads_the_checkpoint_without_unpickling_and_refuses_escapes(run, tmp_path):
    marker = tmp_path / "pwned"
    out = _copy(run, tmp_path / "resumed")
    state = json.loads((out / "checkpoints" / "latest.json").read_text())
    _poison_data(out / "checkpoints" / state["path"], marker)
    proc = _train(out, "--resume", "--timesteps", "128")
    assert proc.returncode == 0, proc.stderr
    assert "resuming from ckpt_000000064.zip at step 64" in proc.stderr
    assert json.loads((out / "checkpoints" / "latest.json").read_text())["num_timesteps"] == 128
    assert not marker.exists()
    # A latest.json pointing out of the run: one line, exit 2, nothing loaded.
    (out / "checkpoints" / "latest.json").write_text(json.dumps({"path": "../../x.zip"}))
    proc = _train(out, "--resume", "--timesteps", "192")
    assert proc.returncode == 2 and "must name a ckpt_*.zip file" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# -- the ONNX model contract -------------------------------------------------------------
def _with_props(src: Path, dest: Path, **changes) -> Path:
    import onnx

    m = onnx.load(str(src))
    props = {p.key: p.value for p in m.metadata_props}
    for k, v in changes.items():
        props["inspector." + k] = json.dumps(v)
    del m.metadata_props[:]
    for k, v in props.items():
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, str(dest))
    return dest


def test_metadata_naming_more_classes_than_the_graph_outputs_is_refused_at_start(
    station_model, tmp_path
):
    from inspector.policy.onnx_backend import OrtPolicy

    good = OrtPolicy(station_model)
    classes = list(good.meta.classes)
    n = len(classes)
    more = classes + ["ghost"]
    bad = _with_props(
        station_model,
        tmp_path / "more.onnx",
        classes=more,
        outcome_matrix=[[0.0] * (n + 1)] * (n + 1),
    )
    with pytest.raises(ModelError, match=f"class_probs dimension 1 is {n} but the metadata names"):
        OrtPolicy(bad)
    skew = _with_props(station_model, tmp_path / "skew.onnx", outcome_matrix=[[0.0]])
    with pytest.raises(ModelError, match=f"outcome_matrix must be {n}x{n}"):
        OrtPolicy(skew)
    small = _with_props(
        station_model, tmp_path / "scan.onnx", scan={**good.meta.scan, "glimpse": 7}
    )
    with pytest.raises(ModelError, match="glimpse dimension 2 is"):
        OrtPolicy(small)
    # Through the CLI: one line, exit 2, before any part is inspected.
    proc = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "eval", str(bad), "--camera", "synthetic"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


META_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


@given(
    props=st.dictionaries(
        st.sampled_from(
            [
                "classes",
                "actions",
                "scan",
                "state_size",
                "outcome_matrix",
                "ok_bias",
                "step_budget",
                "ensemble",
                "profile_name",
            ]
        ),
        META_VALUES,
    )
)
@settings(max_examples=200, deadline=None)
def test_generated_metadata_gives_meta_or_one_model_error(props):
    from inspector.policy.base import ModelMeta, check_contract

    raw = {"inspector." + k: json.dumps(v) for k, v in props.items()}
    try:
        meta = ModelMeta.from_props(raw, "m.onnx")
        check_contract(meta, {}, "m.onnx")
    except ModelError as exc:
        assert "\n" not in str(exc)
