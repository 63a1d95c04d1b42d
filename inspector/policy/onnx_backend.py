"""ONNX Runtime backend: the default runtime of stations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import MissingDependencyError, ModelError
from inspector.policy.base import INPUT_NAMES, ModelMeta, Policy, check_contract


def _ort():
    try:
        import onnxruntime as ort
    except ImportError:
        raise MissingDependencyError(
            "onnxruntime", "the ONNX backend", "pip install onnxruntime"
        ) from None
    return ort


def read_meta(path: str | Path) -> ModelMeta:
    """ModelMeta from an ONNX file's metadata_props."""
    ort = _ort()
    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ModelError(f"{path}: not a readable ONNX model ({exc})") from None
    return ModelMeta.from_props(sess.get_modelmeta().custom_metadata_map, str(path))


def graph_shapes(session: Any) -> dict[str, list[Any]]:
    """name -> shape of an ONNX Runtime session's inputs and outputs (symbolic dims as str)."""
    return {t.name: list(t.shape) for t in (*session.get_inputs(), *session.get_outputs())}


class OrtPolicy(Policy):
    """Runs an exported ``.onnx`` policy with ONNX Runtime.

    :param path: the ONNX file.
    :param providers: execution providers; default: TensorRT and CUDA when present, then CPU.
    :param threads: intra-op threads (0: ONNX Runtime's default; None: the product's count,
        :func:`inspector.threads.current`).
    """

    backend = "onnxruntime"

    def __init__(
        self, path: str | Path, providers: list[str] | None = None, threads: int | None = 1
    ):
        ort = _ort()
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"model not found: {self.path}")
        available = ort.get_available_providers()
        if providers is None:
            preferred = ["TensorrtExecutionProvider", "CUDAExecutionProvider"]
            providers = [p for p in preferred if p in available] + ["CPUExecutionProvider"]
        from inspector.threads import ort_session_options

        opts = ort_session_options(ort.SessionOptions(), threads)
        try:
            self.session = ort.InferenceSession(str(self.path), opts, providers=providers)
        except Exception as exc:
            raise ModelError(f"{self.path}: not a readable ONNX model ({exc})") from None
        meta = ModelMeta.from_props(
            self.session.get_modelmeta().custom_metadata_map, str(self.path)
        )
        super().__init__(meta)
        names = [i.name for i in self.session.get_inputs()]
        if sorted(names) != sorted(INPUT_NAMES):
            raise ModelError(f"{self.path}: inputs {names}, expected {list(INPUT_NAMES)}")
        # Metadata and graph must agree now, not at the first part.
        check_contract(meta, graph_shapes(self.session), str(self.path))
        self.providers = self.session.get_providers()

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        feeds = {k: np.ascontiguousarray(obs[k], dtype=np.float32) for k in INPUT_NAMES}
        a, p, v = self.session.run(None, feeds)
        return a, p, v
