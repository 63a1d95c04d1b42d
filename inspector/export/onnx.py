"""Export a trained policy to one ONNX graph (+ optional int8), with parity checks."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import ExportError, MissingDependencyError
from inspector.files import atomic_path
from inspector.policy.base import INPUT_NAMES, META_PREFIX, OUTPUT_NAMES

log = logging.getLogger(__name__)
OPSET = 17


def _onnx():
    try:
        import onnx
    except ImportError:
        raise MissingDependencyError("onnx", "ONNX export", "pip install onnx") from None
    return onnx


def torch_reference(
    model_path: str | Path,
    ensemble: Sequence[str | Path] = (),
    ensemble_dir: str | Path | None = None,
) -> tuple:
    """What an export traces and is checked against: (policy, graph, profile).

    :param model_path: a run directory or its ``model.zip`` (the lead of an ensemble).
    :param ensemble: further runs whose verdicts join the lead's
        (:mod:`inspector.policy.ensemble`); the ensemble starts uncalibrated (ok bias 0)
        unless ``ensemble_dir`` holds its operating point.
    :param ensemble_dir: the ensemble directory of ``train --members`` these members came
        from: its ``operating_point.json``, chosen for these member files, is the
        ensemble's ok bias.
    :raises ModelError: a run that cannot be loaded, or members that cannot form an ensemble.
    """
    from inspector.policy.ensemble import EnsemblePolicy, ensemble_sha256
    from inspector.policy.operating_point import read_calibrated
    from inspector.train.torch_policy import (
        EnsembleGraph,
        TorchPolicy,
        load_trained,
        meta_for_model,
    )

    paths = [model_path, *ensemble]
    members, profile = [], None
    for path in paths:
        model, prof, sha = load_trained(path)
        members.append(
            TorchPolicy(model, meta_for_model(model, prof, sha, **read_calibrated(path, sha)))
        )
        profile = profile or prof
    if not ensemble:
        return members[0], members[0].graph, profile
    point = {"ok_bias": 0.0, "max_zoom": None}
    if ensemble_dir is not None:
        shas = [m.meta.model_sha256 for m in members]
        point = read_calibrated(ensemble_dir, ensemble_sha256(shas))
    if members[0].meta.ok_bias and not point["ok_bias"]:
        log.warning(
            "%s is calibrated (ok bias %+.2f); the ensemble is not: calibrate the exported"
            " model (inspector calibrate) before a station runs it",
            model_path,
            members[0].meta.ok_bias,
        )
    # The members' own biases do not carry over: the ensemble has its own (or 0).
    policy = EnsemblePolicy(members, names=[str(p) for p in paths], **point)
    return policy, EnsembleGraph([m.graph for m in members]), profile


def export_onnx(
    model_path: str | Path,
    out: str | Path,
    ensemble: Sequence[str | Path] = (),
    ensemble_dir: str | Path | None = None,
) -> Path:
    """Export the policy of a trained run as ``out`` (fp32), with metadata and a checker pass.

    :param model_path: a run directory or its ``model.zip``.
    :param out: the ``.onnx`` file to write.
    :param ensemble: further runs whose verdicts join this one's in the graph
        (:func:`torch_reference`); ``ensemble_dir`` where their operating point is.
    """
    return write_onnx(*torch_reference(model_path, ensemble, ensemble_dir), out)


def write_onnx(policy: Any, graph: Any, profile: Any, out: str | Path) -> Path:
    """Trace ``graph`` into ``out`` with ``policy``'s metadata (what :func:`torch_reference`
    returns), checked by ``onnx.checker`` and written atomically."""
    import torch

    from inspector.scan import observation_shapes

    onnx = _onnx()
    meta = policy.meta
    shapes = observation_shapes(profile.scan)
    dummy = tuple(torch.zeros((2, *shapes[k]), dtype=torch.float32) for k in INPUT_NAMES)
    out = Path(out)
    with atomic_path(out) as tmp:
        try:
            torch.onnx.export(
                graph,
                dummy,
                str(tmp),
                input_names=list(INPUT_NAMES),
                output_names=list(OUTPUT_NAMES),
                dynamic_axes={n: {0: "batch"} for n in (*INPUT_NAMES, *OUTPUT_NAMES)},
                opset_version=OPSET,
                dynamo=False,
            )
        except Exception as exc:
            raise ExportError(f"ONNX export failed: {exc}") from exc
        m = onnx.load(str(tmp))
        for k, v in meta.to_props().items():
            p = m.metadata_props.add()
            p.key, p.value = k, v
        m.producer_name = "inspector"
        m.producer_version = meta.exporter_version
        try:
            onnx.checker.check_model(m)
        except onnx.checker.ValidationError as exc:
            raise ExportError(f"exported graph fails onnx.checker: {exc}") from exc
        onnx.save(m, str(tmp))
    return out


def quantize_int8(fp32: str | Path, out: str | Path) -> Path:
    """Dynamic int8 quantisation with ONNX Runtime (weights int8, activations on the fly)."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise MissingDependencyError("onnxruntime", "int8 quantisation") from None
    out = Path(out)
    quantize_dynamic(
        str(fp32),
        str(out),
        weight_type=QuantType.QInt8,
        op_types_to_quantize=["MatMul", "Gemm"],
    )
    onnx = _onnx()
    # quantize_dynamic keeps metadata_props on current versions; make sure of it.
    src, dst = onnx.load(str(fp32)), onnx.load(str(out))
    have = {p.key for p in dst.metadata_props}
    for p in src.metadata_props:
        if p.key not in have:
            q = dst.metadata_props.add()
            q.key, q.value = p.key, p.value
    onnx.save(dst, str(out))
    return out


def record_observations(
    policy: Any, camera: str, params: dict, n: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """Observations from real episodes (the policy's own scan paths), batched, ``n`` in all."""
    from inspector.camera import open_camera
    from inspector.env import FrameSource
    from inspector.scan import Scanner

    meta = policy.meta
    scanner = Scanner.from_metadata(meta)
    driver = open_camera(camera, params)
    source = FrameSource(driver)
    rng = np.random.default_rng(seed)
    rows: dict[str, list[np.ndarray]] = {k: [] for k in INPUT_NAMES}
    try:
        while len(rows["state"]) < n:
            obs = scanner.reset(source.next(rng).image)
            for _ in range(meta.step_budget or 12):
                for k in INPUT_NAMES:
                    rows[k].append(obs[k].astype(np.float32))
                a, _ = policy.act(obs)
                # Explore a little, so the recorded states are not only the greedy path.
                if rng.random() < 0.3:
                    a = int(rng.integers(len(meta.actions) - 1))
                if a == scanner.stop or len(rows["state"]) >= n:
                    break
                obs, _, _ = scanner.step(a)
    finally:
        driver.close()
    return {k: np.stack(v[:n]) for k, v in rows.items()}


def compare(a: Any, b: Any, obs: dict[str, np.ndarray], batch: int = 256) -> dict[str, float]:
    """Max abs differences of outputs and greedy-action agreement between two policies."""
    diffs = {"action_logits": 0.0, "class_probs": 0.0, "value": 0.0}
    agree = verdict_agree = 0
    n = len(obs["state"])
    for s in range(0, n, batch):
        part = {k: v[s : s + batch] for k, v in obs.items()}
        oa, ob = a.forward(part), b.forward(part)
        for name, x, y in zip(diffs, oa, ob):
            diffs[name] = max(diffs[name], float(np.max(np.abs(x - y))))
        agree += int(np.sum(np.argmax(oa[0], 1) == np.argmax(ob[0], 1)))
        verdict_agree += int(np.sum(np.argmax(oa[1], 1) == np.argmax(ob[1], 1)))
    return {
        **{f"max_abs_diff_{k}": v for k, v in diffs.items()},
        "action_agreement": agree / n,
        "verdict_agreement": verdict_agree / n,
        "observations": n,
    }


def export_report(
    model_path: str | Path,
    out: Path,
    int8: bool,
    camera: str,
    params: dict,
    n_obs: int = 1000,
    eval_episodes: int = 100,
    ensemble: Sequence[str | Path] = (),
    ensemble_dir: str | Path | None = None,
) -> dict[str, Any]:
    """``inspector export``: fp32 ONNX (+ int8), parity against torch, int8 agreement.

    With ``int8``, both graphs are also evaluated on the same ``eval_episodes`` fixed
    parts and the change in accuracy is reported. With ``ensemble``, the graph and the
    torch reference are the verdict ensemble the run leads (:func:`torch_reference`).
    """
    from inspector.policy.onnx_backend import OrtPolicy

    ref = torch_reference(model_path, ensemble, ensemble_dir)
    fp32_path = write_onnx(*ref, out if not int8 else out.with_suffix(".fp32.onnx"))
    torch_policy, _, profile = ref
    ort_fp32 = OrtPolicy(fp32_path)
    obs = record_observations(torch_policy, camera, params, n_obs)
    report: dict[str, Any] = {
        "onnx": str(fp32_path),
        "parity_fp32": compare(torch_policy, ort_fp32, obs),
    }
    if ensemble:
        report["ensemble"] = [str(p) for p in (model_path, *ensemble)]
        report["ok_bias"] = float(torch_policy.meta.ok_bias)
    if int8:
        q = quantize_int8(fp32_path, out)
        report["onnx_int8"] = str(q)
        ort_int8 = OrtPolicy(q)
        report["int8_vs_fp32"] = compare(ort_fp32, ort_int8, obs)
        if eval_episodes > 0:
            from inspector.train.evaluate import evaluate

            acc = {}
            for name, pol in (("fp32", ort_fp32), ("int8", ort_int8)):
                m, _ = evaluate(pol, camera, params, eval_episodes, ok_class=profile.ok_class)
                acc[name] = m["accuracy"]
            report["eval_accuracy"] = {**acc, "change": acc["int8"] - acc["fp32"]}
            report["eval_accuracy"]["episodes"] = eval_episodes
    out.with_suffix(".export.json").write_text(json.dumps(report, indent=2))
    return report


def write_ok_bias(path: Path, bias: float, max_zoom: int | None = None) -> None:
    """Set ``inspector.ok_bias`` and the search depth ``inspector.max_zoom`` (removed for
    None: every level) in an ONNX file's metadata (written atomically)."""
    onnx = _onnx()
    m = onnx.load(str(path))
    keys = (META_PREFIX + "ok_bias", META_PREFIX + "max_zoom")
    props = [(p.key, p.value) for p in m.metadata_props if p.key not in keys]
    new = [(keys[0], json.dumps(float(bias)))]
    if max_zoom is not None:
        new.append((keys[1], json.dumps(int(max_zoom))))
    del m.metadata_props[:]
    for k, v in [*props, *new]:
        entry = m.metadata_props.add()
        entry.key, entry.value = k, v
    with atomic_path(path) as tmp:
        onnx.save(m, str(tmp))
