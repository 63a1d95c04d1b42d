"""What the station needs to run a TensorRT engine: importing tensorrt and cuda-python,
and the sidecar (``<engine>.json``) that carries the model metadata beside an engine.

The engine builder (:mod:`inspector.export.tensorrt`) writes sidecars and imports
these helpers; the runtime (:mod:`inspector.policy.trt_backend`) only reads. Keeping
them here keeps the import arrows pointing down (export -> policy, never back).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from inspector.errors import ExportError, MissingDependencyError, ModelError
from inspector.policy.base import ModelMeta

#: How to get TensorRT; every "tensorrt is missing" message carries it.
TRT_HINT = (
    "pip install inspector[tensorrt] on an x86 machine with an NVIDIA GPU and CUDA 12; "
    "on a Jetson it ships with JetPack 6 (apt install python3-libnvinfer)"
)
SIDECAR_SCHEMA = "inspector.engine/1"


def import_tensorrt(feature: str = "building a TensorRT engine") -> ModuleType:
    """Import ``tensorrt`` or raise :class:`MissingDependencyError` saying how to install it."""
    try:
        import tensorrt
    except ImportError:
        raise MissingDependencyError("tensorrt", feature, TRT_HINT) from None
    return tensorrt


def import_cudart() -> ModuleType | None:
    """The CUDA runtime bindings of cuda-python (new or old layout), or None."""
    try:
        from cuda.bindings import runtime  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cudart as runtime  # older cuda-python
        except ImportError:
            return None
    return runtime


def gpu_name(device: int = 0) -> str:
    """Name of CUDA device ``device`` (part of the engine cache key).

    :raises ExportError: no CUDA device is visible (or neither cuda-python nor torch can ask).
    """
    cudart = import_cudart()
    if cudart is not None:
        err, props = cudart.cudaGetDeviceProperties(device)
        if int(err) == 0:
            name = props.name
            if isinstance(name, bytes):
                name = name.split(b"\0", 1)[0].decode("utf-8", "replace")
            return str(name)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        return str(torch.cuda.get_device_name(device))
    raise ExportError(
        f"no CUDA device {device} is visible (TensorRT needs an NVIDIA GPU; "
        "check nvidia-smi / tegrastats and that cuda-python is installed)"
    )


def tensorrt_unavailable_reason() -> str | None:
    """Why TensorRT engines cannot be built or run here, or None when they can.

    Tests use it as their skip reason, so it names what is missing.
    """
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        return (
            "TensorRT not installed (needs an NVIDIA GPU with TensorRT 10: "
            "pip install inspector[tensorrt] on Jetson/x86 CUDA)"
        )
    try:
        gpu_name()
    except ExportError as exc:
        return f"TensorRT is installed but {exc}"
    return None


# --------------------------------------------------------------------------- sidecar


def sidecar_path(engine_path: str | os.PathLike[str]) -> Path:
    """``<engine>.json``, the metadata file beside an engine."""
    p = Path(engine_path)
    return p.with_name(p.name + ".json")


@dataclass(frozen=True)
class EngineInfo:
    """What an engine's sidecar says: the model metadata plus how the engine was built.

    :param meta: the ONNX model's metadata.
    :param onnx_sha256: sha256 of the ONNX file the engine came from.
    :param precision: ``fp32``, ``fp16`` or ``int8``.
    :param tensorrt_version: TensorRT version that built it ("" when unknown).
    :param gpu: GPU that built it ("" when unknown).
    :param profile: the batch profile as in :meth:`ShapeProfile.to_json`.
    """

    meta: ModelMeta
    onnx_sha256: str
    precision: str
    tensorrt_version: str = ""
    gpu: str = ""
    profile: Mapping[str, Any] = field(default_factory=dict)


def read_sidecar(engine_path: str | os.PathLike[str]) -> EngineInfo:
    """Read an engine's sidecar (following a ``current.engine`` symlink when needed).

    :raises ModelError: no sidecar, or it is not valid.
    """
    engine = Path(engine_path)
    candidates = [sidecar_path(engine)]
    if engine.is_symlink():
        candidates.append(sidecar_path(engine.resolve()))
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise ModelError(
            f"{engine}: no sidecar {candidates[0].name} with the model metadata; build the engine "
            "with deploy/jetson/build_engine.sh or `python -m inspector.commands.engine build`"
        )
    try:
        doc = json.loads(found.read_text(encoding="utf-8"))
        if doc.get("schema") != SIDECAR_SCHEMA:
            raise ValueError(f"schema is {doc.get('schema')!r}, expected {SIDECAR_SCHEMA!r}")
        props = doc["props"]
        info = EngineInfo(
            meta=ModelMeta.from_props(props, source=str(found)),
            onnx_sha256=str(doc["onnx_sha256"]),
            precision=str(doc["precision"]),
            tensorrt_version=str(doc.get("tensorrt_version", "")),
            gpu=str(doc.get("gpu", "")),
            profile=dict(doc.get("profile", {})),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"{found}: broken engine sidecar ({exc})") from None
    return info
