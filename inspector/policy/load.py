"""Pick a runtime backend from a model file; refuse what a station must not load."""

from __future__ import annotations

from pathlib import Path

from inspector.errors import ModelError
from inspector.policy.base import Policy

REFUSED = (".zip", ".pkl", ".pickle", ".pt", ".pth")


def load_policy(path: str | Path, *, threads: int | None = 1) -> Policy:
    """Load an exported policy by path: ``.onnx`` (ONNX Runtime), ``.engine``/``.plan`` (TensorRT).

    Trained ``.zip`` models and run directories are refused: stations never unpickle a
    model. Development code that wants them too calls
    :func:`inspector.train.torch_policy.load_any_policy` (the policy layer never
    imports the trainer).

    :param threads: ONNX Runtime's intra-op threads (None: :func:`inspector.threads.current`;
        0: its own default).
    :raises ModelError: unknown kind, missing file, or a trained torch model.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if p.is_dir() or suffix in REFUSED:
        raise ModelError(
            f"{p}: stations run exported graphs, not trained {suffix or 'run'} models; "
            f"export first: inspector export {p} --out model.onnx"
        )
    if not p.exists():
        raise ModelError(f"model not found: {p}")
    if suffix == ".onnx":
        from inspector.policy.onnx_backend import OrtPolicy

        return OrtPolicy(p, threads=threads)
    if suffix in (".engine", ".plan"):
        from inspector.policy.trt_backend import TensorRTPolicy

        return TensorRTPolicy(p)
    raise ModelError(f"{p}: unknown model kind {suffix!r}; expected .onnx, .engine or .plan")
