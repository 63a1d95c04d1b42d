"""What a TensorRT engine is built for: the model's metadata, its input shapes, the
engine cache key and the sidecar.

Nothing here needs TensorRT: the builder (:mod:`inspector.export.tensorrt`) and the
``inspector engine shapes|sidecar`` commands use it on any machine.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import ExportError, MissingDependencyError, ModelError
from inspector.files import write_atomic
from inspector.policy.base import INPUT_NAMES, ModelMeta
from inspector.policy.trt_engine import SIDECAR_SCHEMA, sidecar_path

__all__ = [
    "PRECISIONS",
    "ShapeProfile",
    "engine_cache_key",
    "random_observations",
    "read_onnx_meta",
    "sample_shapes",
    "shape_profile",
    "write_sidecar",
]

PRECISIONS = ("fp32", "fp16", "int8")


# --------------------------------------------------------------------------- metadata and shapes


def read_onnx_meta(onnx_path: str | os.PathLike[str]) -> ModelMeta:
    """The :class:`ModelMeta` in an exported ONNX file's metadata_props.

    The per-sample input shapes it implies are checked against the graph's
    declared input dims, so an engine is never built for shapes the graph does
    not have.

    :raises ModelError: the file is missing, not ONNX, or not an inspector model.
    :raises ExportError: the metadata disagrees with the graph inputs.
    """
    path = Path(onnx_path)
    if not path.is_file():
        raise ModelError(f"{path}: no such ONNX file")
    try:
        import onnx
    except ImportError:
        raise MissingDependencyError("onnx", "reading an ONNX model", "pip install onnx") from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and friends; the user sees one line
        raise ModelError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    props = {p.key: p.value for p in model.metadata_props}
    meta = ModelMeta.from_props(props, source=str(path))
    want = sample_shapes(meta)
    graph_inputs = {i.name: i for i in model.graph.input}
    for name in INPUT_NAMES:
        if name not in graph_inputs:
            raise ExportError(f"{path}: graph has no input {name!r} (has {sorted(graph_inputs)})")
        dims = graph_inputs[name].type.tensor_type.shape.dim
        got = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
        if len(got) != len(want[name]) + 1 or any(
            g not in (-1, w) for g, w in zip(got[1:], want[name])
        ):
            raise ExportError(
                f"{path}: input {name!r} has dims {list(got)} but the metadata says "
                f"[N, {', '.join(map(str, want[name]))}]"
            )
    return meta


def _side(value: Any, what: str) -> int:
    # The scan settings store square sizes as one int; accept [n, n] too.
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or int(value[0]) != int(value[1]):
            raise ModelError(f"scan.{what}: expected a square size, got {value!r}")
        value = value[0]
    size = int(value)
    if size < 1:
        raise ModelError(f"scan.{what}: expected a positive size, got {value!r}")
    return size


def sample_shapes(meta: ModelMeta) -> dict[str, tuple[int, ...]]:
    """Per-sample (batch axis removed) shapes of the three inputs, from the metadata.

    ``glimpse`` is [M, G, G] (M = scan memory), ``overview`` [1, O, O], ``state`` [S].

    :raises ModelError: the scan settings lack a size.
    """
    scan = meta.scan
    try:
        g = _side(scan["glimpse"], "glimpse")
        o = _side(scan["overview"], "overview")
        m = int(scan.get("memory", 1))
    except KeyError as exc:
        raise ModelError(f"model metadata: scan settings lack {exc}") from None
    if m < 1 or meta.state_size < 1:
        raise ModelError(f"model metadata: memory={m}, state_size={meta.state_size}")
    return {"glimpse": (m, g, g), "overview": (1, o, o), "state": (int(meta.state_size),)}


@dataclass(frozen=True)
class ShapeProfile:
    """min/opt/max batch sizes over the per-sample input shapes (one TensorRT profile).

    :param samples: per-sample shape of each input, as from :func:`sample_shapes`.
    :param min_batch: smallest batch the engine accepts.
    :param opt_batch: batch the builder tunes kernels for (the station runs batch 1).
    :param max_batch: largest batch the engine accepts.
    """

    samples: Mapping[str, tuple[int, ...]]
    min_batch: int = 1
    opt_batch: int = 1
    max_batch: int = 8

    def shape(self, name: str, which: str) -> tuple[int, ...]:
        """Full shape of input ``name`` at ``which`` in ``{"min", "opt", "max"}``."""
        batch = {"min": self.min_batch, "opt": self.opt_batch, "max": self.max_batch}[which]
        return (batch, *self.samples[name])

    def trtexec_args(self) -> list[str]:
        """``--minShapes=... --optShapes=... --maxShapes=...`` for trtexec."""
        out = []
        for which in ("min", "opt", "max"):
            spec = ",".join(f"{n}:{'x'.join(map(str, self.shape(n, which)))}" for n in INPUT_NAMES)
            out.append(f"--{which}Shapes={spec}")
        return out

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form for the sidecar and the cache key."""
        return {
            "min_batch": self.min_batch,
            "opt_batch": self.opt_batch,
            "max_batch": self.max_batch,
            "samples": {k: list(v) for k, v in self.samples.items()},
        }


def shape_profile(
    meta: ModelMeta, *, min_batch: int = 1, opt_batch: int = 1, max_batch: int = 8
) -> ShapeProfile:
    """The optimisation profile for ``meta``'s inputs.

    :raises ExportError: the batch sizes are not ``1 <= min <= opt <= max``.
    """
    if not 1 <= min_batch <= opt_batch <= max_batch:
        raise ExportError(
            f"batch sizes must satisfy 1 <= min <= opt <= max, got "
            f"min={min_batch} opt={opt_batch} max={max_batch}"
        )
    return ShapeProfile(sample_shapes(meta), int(min_batch), int(opt_batch), int(max_batch))


def engine_cache_key(
    onnx_bytes: bytes,
    tensorrt_version: str,
    gpu: str,
    *,
    precision: str = "fp16",
    profile: ShapeProfile | None = None,
    workspace_mb: int = 0,
    calibration_sha256: str = "",
) -> str:
    """sha256 naming a cached engine.

    An engine only fits the TensorRT version and GPU that built it, and the build
    options change what it computes, so all of them are in the key.
    """
    parts = {
        "onnx_sha256": hashlib.sha256(onnx_bytes).hexdigest(),
        "tensorrt": str(tensorrt_version),
        "gpu": str(gpu),
        "precision": precision,
        "profile": profile.to_json() if profile is not None else None,
        "workspace_mb": int(workspace_mb),
        "calibration": calibration_sha256,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- sidecar


def write_sidecar(
    engine_path: str | os.PathLike[str],
    meta: ModelMeta,
    *,
    onnx_sha256: str,
    precision: str,
    profile: ShapeProfile,
    tensorrt_version: str = "",
    gpu: str = "",
) -> Path:
    """Write ``<engine>.json`` (atomically) and return its path."""
    if precision not in PRECISIONS:
        raise ExportError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    doc = {
        "schema": SIDECAR_SCHEMA,
        "props": meta.to_props(),
        "onnx_sha256": onnx_sha256,
        "precision": precision,
        "tensorrt_version": tensorrt_version,
        "gpu": gpu,
        "profile": profile.to_json(),
    }
    out = sidecar_path(engine_path)
    write_atomic(out, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    return out


# --------------------------------------------------------------------------- test inputs


def random_observations(meta: ModelMeta, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random observations in the contract's value ranges (pixels 0..255, state 0..1)."""
    rng = np.random.default_rng(seed)
    shapes = sample_shapes(meta)
    return {
        "glimpse": rng.uniform(0, 255, (n, *shapes["glimpse"])).astype(np.float32),
        "overview": rng.uniform(0, 255, (n, *shapes["overview"])).astype(np.float32),
        "state": rng.uniform(0, 1, (n, *shapes["state"])).astype(np.float32),
    }
