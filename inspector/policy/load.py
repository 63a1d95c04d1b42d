"""Pick a runtime backend from a model file; refuse what a station must not load."""

from __future__ import annotations

from pathlib import Path

from inspector.errors import ModelError
from inspector.runtime.policy import Policy

REFUSED = (".zip", ".pkl", ".pickle", ".pt", ".pth")


def load_policy(path: str | Path, *, allow_torch: bool = False, threads: int = 1) -> Policy:
    """Load an exported policy by path: ``.onnx`` (ONNX Runtime), ``.engine``/``.plan`` (TensorRT).

    :param allow_torch: also accept a trained ``.zip`` or run directory (development and
        ``eval`` only; stations never unpickle a model).
    :raises ModelError: unknown kind, missing file, or a torch model where it is refused.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if p.is_dir() or suffix in REFUSED:
        if allow_torch:
            from inspector.runtime.operating_point import read_ok_bias
            from inspector.runtime.torch_backend import TorchPolicy, load_trained, meta_for_model

            model, profile, sha = load_trained(p)
            return TorchPolicy(model, meta_for_model(model, profile, sha, read_ok_bias(p, sha)))
        raise ModelError(
            f"{p}: stations run exported graphs, not trained {suffix or 'run'} models; "
            f"export first: inspector export {p} --out model.onnx"
        )
    if not p.exists():
        raise ModelError(f"model not found: {p}")
    if suffix == ".onnx":
        from inspector.runtime.onnx_backend import OrtPolicy

        return OrtPolicy(p, threads=threads)
    if suffix in (".engine", ".plan"):
        from inspector.runtime.trt_backend import TensorRTPolicy

        return TensorRTPolicy(p)
    raise ModelError(f"{p}: unknown model kind {suffix!r}; expected .onnx, .engine or .plan")
