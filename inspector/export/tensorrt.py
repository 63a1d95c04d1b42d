"""Build TensorRT engines from exported ONNX policies, with a cache and a sidecar.

An engine is specific to the TensorRT version and the GPU that built it (the
builder times kernels on that very device and serialises the winners), so an
engine is built on the station itself and cached under a key made of the ONNX
file's sha256, ``tensorrt.__version__``, the GPU name and the build options.

Engines carry no ONNX metadata, so :func:`build_engine` writes a sidecar
``<engine>.json`` beside each engine holding the :class:`ModelMeta` props;
:class:`inspector.policy.trt_backend.TensorRTPolicy` reads it back.

``tensorrt`` (and ``cuda-python``) are imported inside the functions that need
them: importing this module costs nothing on a machine without a GPU.

The parts: :mod:`inspector.export.trt_profile` (metadata, shapes, cache key,
sidecar), :mod:`inspector.export.trt_calibration` (INT8), this module (the build
and the parity check). Their public names are all importable from here.

Command line (:mod:`inspector.commands.engine`: ``inspector engine VERB`` or
``python -m inspector.commands.engine VERB``, used by ``deploy/jetson/``)::

    build   --onnx M.onnx --out M.engine [--fp32] [--int8 --calib DIR] [--max-batch 8]
    shapes  --onnx M.onnx [--min-batch 1 --opt-batch 1 --max-batch 8]   # trtexec shape flags
    sidecar --onnx M.onnx --engine M.engine --precision fp16           # after trtexec
    parity  --onnx M.onnx --engine M.engine [--n 512]                  # engine vs ONNX Runtime
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from inspector.errors import ExportError, MissingDependencyError
from inspector.export.trt_calibration import (
    CalibrationBatches,
    load_calibration_dir,
    make_calibrator,
)
from inspector.export.trt_profile import (
    PRECISIONS,
    ShapeProfile,
    engine_cache_key,
    random_observations,
    read_onnx_meta,
    sample_shapes,
    shape_profile,
    write_sidecar,
)
from inspector.files import write_atomic
from inspector.policy.base import INPUT_NAMES, OUTPUT_NAMES, ModelMeta
from inspector.policy.trt_engine import (
    SIDECAR_SCHEMA,
    TRT_HINT,
    EngineInfo,
    gpu_name,
    import_cudart,
    import_tensorrt,
    read_sidecar,
    sidecar_path,
    tensorrt_unavailable_reason,
)

log = logging.getLogger("inspector.export.tensorrt")  # same name under python -m

__all__ = [
    "PRECISIONS",
    "SIDECAR_SCHEMA",
    "TRT_HINT",
    "CalibrationBatches",
    "EngineInfo",
    "ParityReport",
    "ShapeProfile",
    "build_engine",
    "engine_cache_key",
    "gpu_name",
    "import_cudart",
    "import_tensorrt",
    "load_calibration_dir",
    "make_calibrator",
    "parity_check",
    "random_observations",
    "read_onnx_meta",
    "read_sidecar",
    "sample_shapes",
    "shape_profile",
    "sidecar_path",
    "tensorrt_unavailable_reason",
    "write_sidecar",
]


# --------------------------------------------------------------------------- build


def build_engine(
    onnx_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    fp16: bool = True,
    int8: bool = False,
    calibration_frames: Iterable[Mapping[str, np.ndarray]] | None = None,
    calibration_batch: int = 8,
    calibration_cache: str | os.PathLike[str] | None = None,
    workspace_mb: int = 1024,
    min_batch: int = 1,
    opt_batch: int = 1,
    max_batch: int = 8,
    cache_dir: str | os.PathLike[str] | None = None,
    timing_cache: str | os.PathLike[str] | None = None,
) -> Path:
    """Build (or fetch from the cache) a TensorRT engine for an exported ONNX policy.

    :param onnx_path: the exported ``.onnx`` file (inspector metadata required).
    :param out_path: where the engine goes; ``<out_path>.json`` gets the sidecar.
    :param fp16: allow FP16 kernels.
    :param int8: allow INT8 kernels (needs ``calibration_frames`` or an existing
        ``calibration_cache``).
    :param calibration_frames: observation dicts (one sample or a batch each), e.g.
        :func:`load_calibration_dir`.
    :param calibration_batch: samples per calibration batch.
    :param calibration_cache: calibration cache file (default ``<out_path>.calib``).
    :param workspace_mb: builder workspace memory pool limit in MiB.
    :param min_batch: smallest batch of the optimisation profile.
    :param opt_batch: batch the kernels are tuned for.
    :param max_batch: largest batch of the optimisation profile.
    :param cache_dir: engine cache directory (None: no cache).
    :param timing_cache: builder timing cache file, read and updated (None: none).
    :returns: ``out_path``.
    :raises ModelError: the ONNX file is missing or not an inspector model.
    :raises ExportError: bad options or the build failed.
    :raises MissingDependencyError: tensorrt is not installed.
    """
    plan = _plan_build(
        onnx_path,
        out_path,
        int8=int8,
        has_frames=calibration_frames is not None,
        calibration_cache=calibration_cache,
        workspace_mb=workspace_mb,
        batches=(min_batch, opt_batch, max_batch),
        precision="int8" if int8 else "fp16" if fp16 else "fp32",
    )
    trt = import_tensorrt()
    gpu = gpu_name()
    cached = _cached_path(plan, cache_dir, trt.__version__, gpu)
    if cached is not None and cached.is_file():
        log.info("engine cache hit %s", cached)
        if cached.resolve() != plan.out.resolve():
            write_atomic(plan.out, cached.read_bytes())
    else:
        calibrator = _calibrator(plan, calibration_frames, calibration_batch) if int8 else None
        data = _build_serialized(
            trt,
            plan,
            fp16=fp16 or int8,  # int8 engines keep fp16 for layers int8 cannot take
            int8=int8,
            calibrator=calibrator,
            calibration_batch=calibration_batch,
            timing_cache=Path(timing_cache) if timing_cache else None,
        )
        write_atomic(plan.out, data)
        # Keyed again: an int8 build has just written the calibration cache, and the
        # next build with that cache must find this engine.
        cached = _cached_path(plan, cache_dir, trt.__version__, gpu)
        if cached is not None:
            write_atomic(cached, data)
            log.info("engine cached as %s", cached)
    _write_sidecar(plan, trt.__version__, gpu)
    return plan.out


@dataclass(frozen=True)
class _BuildPlan:
    """What :func:`build_engine` settles from its arguments before touching TensorRT."""

    onnx_file: Path
    out: Path
    meta: ModelMeta
    profile: ShapeProfile
    precision: str
    workspace_mb: int
    calib_cache: Path
    onnx_bytes: bytes


def _plan_build(
    onnx_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    int8: bool,
    has_frames: bool,
    calibration_cache: str | os.PathLike[str] | None,
    workspace_mb: int,
    batches: tuple[int, int, int],
    precision: str,
) -> _BuildPlan:
    """Check the model and the options (no TensorRT needed, so a bad call fails anywhere)."""
    onnx_file = Path(onnx_path)
    out = Path(out_path)
    meta = read_onnx_meta(onnx_file)
    min_batch, opt_batch, max_batch = batches
    profile = shape_profile(meta, min_batch=min_batch, opt_batch=opt_batch, max_batch=max_batch)
    if workspace_mb < 1:
        raise ExportError(f"workspace_mb must be >= 1, got {workspace_mb}")
    calib_cache = (
        Path(calibration_cache) if calibration_cache else out.with_name(out.name + ".calib")
    )
    if int8 and not has_frames and not calib_cache.is_file():
        raise ExportError(
            "INT8 needs calibration observations (--calib DIR of .npz files) or an existing "
            f"calibration cache ({calib_cache}); without them the int8 scales would be made up"
        )
    return _BuildPlan(
        onnx_file=onnx_file,
        out=out,
        meta=meta,
        profile=profile,
        precision=precision,
        workspace_mb=workspace_mb,
        calib_cache=calib_cache,
        onnx_bytes=onnx_file.read_bytes(),
    )


def _cached_path(
    plan: _BuildPlan, cache_dir: str | os.PathLike[str] | None, tensorrt_version: str, gpu: str
) -> Path | None:
    """Where ``plan``'s engine stands in the engine cache (None: no cache).

    The key holds the calibration cache's hash for an int8 engine, so the path
    changes once a build has written that cache.
    """
    if cache_dir is None:
        return None
    return Path(cache_dir) / f"{_engine_key(plan, tensorrt_version, gpu)}.engine"


def _engine_key(plan: _BuildPlan, tensorrt_version: str, gpu: str) -> str:
    """The cache key of ``plan``'s engine; an int8 one is keyed by its calibration cache."""
    calib_sha = ""
    if plan.precision == "int8" and plan.calib_cache.is_file():
        calib_sha = hashlib.sha256(plan.calib_cache.read_bytes()).hexdigest()
    return engine_cache_key(
        plan.onnx_bytes,
        tensorrt_version,
        gpu,
        precision=plan.precision,
        profile=plan.profile,
        workspace_mb=plan.workspace_mb,
        calibration_sha256=calib_sha,
    )


def _write_sidecar(plan: _BuildPlan, tensorrt_version: str, gpu: str) -> None:
    write_sidecar(
        plan.out,
        plan.meta,
        onnx_sha256=hashlib.sha256(plan.onnx_bytes).hexdigest(),
        precision=plan.precision,
        profile=plan.profile,
        tensorrt_version=tensorrt_version,
        gpu=gpu,
    )


def _calibrator(
    plan: _BuildPlan, frames: Iterable[Mapping[str, np.ndarray]] | None, batch: int
) -> Any:
    """The INT8 calibrator over ``frames`` (none: TensorRT reads the calibration cache)."""
    batches = CalibrationBatches(frames if frames is not None else [], plan.profile.samples, batch)
    return make_calibrator(batches, plan.calib_cache)


class _Logger:
    """Route TensorRT's log through ``logging`` (created lazily: it subclasses trt.ILogger)."""

    @staticmethod
    def make(trt: ModuleType) -> Any:
        levels = {
            trt.ILogger.Severity.INTERNAL_ERROR: logging.CRITICAL,
            trt.ILogger.Severity.ERROR: logging.ERROR,
            trt.ILogger.Severity.WARNING: logging.WARNING,
            trt.ILogger.Severity.INFO: logging.DEBUG,
            trt.ILogger.Severity.VERBOSE: logging.DEBUG,
        }

        class TrtLogger(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)

            def log(self, severity: Any, msg: str) -> None:
                log.log(levels.get(severity, logging.INFO), "tensorrt: %s", msg)

        return TrtLogger()


def _build_serialized(
    trt: ModuleType,
    plan: _BuildPlan,
    *,
    fp16: bool,
    int8: bool,
    calibrator: Any,
    calibration_batch: int,
    timing_cache: Path | None,
) -> bytes:
    onnx_file, profile, workspace_mb = plan.onnx_file, plan.profile, plan.workspace_mb
    logger = _Logger.make(trt)
    builder = trt.Builder(logger)
    # TensorRT 10 networks are always explicit-batch (the flag is deprecated and
    # ignored); TensorRT 8 still needs it.
    flags = 0
    if int(trt.__version__.split(".")[0]) < 10:
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_file)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ExportError(f"{onnx_file}: TensorRT cannot parse the ONNX graph: {errors}")
    names = [network.get_input(i).name for i in range(network.num_inputs)]
    if sorted(names) != sorted(INPUT_NAMES):
        raise ExportError(f"{onnx_file}: graph inputs are {names}, expected {list(INPUT_NAMES)}")
    outputs = [network.get_output(i).name for i in range(network.num_outputs)]
    if sorted(outputs) != sorted(OUTPUT_NAMES):
        raise ExportError(
            f"{onnx_file}: graph outputs are {outputs}, expected {list(OUTPUT_NAMES)}"
        )

    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_mb) << 20)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    opt = builder.create_optimization_profile()
    for name in INPUT_NAMES:
        opt.set_shape(name, *(profile.shape(name, w) for w in ("min", "opt", "max")))
    config.add_optimization_profile(opt)
    if int8:
        config.set_flag(trt.BuilderFlag.INT8)
        config.int8_calibrator = calibrator
        # Calibration runs at one fixed shape: the calibration batch size.
        calib = builder.create_optimization_profile()
        for name in INPUT_NAMES:
            shape = (calibration_batch, *profile.samples[name])
            calib.set_shape(name, shape, shape, shape)
        config.set_calibration_profile(calib)
    cache = None
    if timing_cache is not None:
        blob = timing_cache.read_bytes() if timing_cache.is_file() else b""
        cache = config.create_timing_cache(blob)
        config.set_timing_cache(cache, ignore_mismatch=False)

    log.info(
        "building %s engine from %s (this takes a while)",
        "int8" if int8 else "fp16" if fp16 else "fp32",
        onnx_file,
    )
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ExportError(f"{onnx_file}: TensorRT failed to build the engine (see the log above)")
    if cache is not None and timing_cache is not None:
        write_atomic(timing_cache, bytes(config.get_timing_cache().serialize()))
    return bytes(serialized)


# --------------------------------------------------------------------------- parity


@dataclass(frozen=True)
class ParityReport:
    """ONNX Runtime vs TensorRT on the same observations.

    :param n: observations compared.
    :param max_abs_diff: largest |ort - trt| per output.
    :param action_agreement: fraction of greedy actions that agree.
    """

    n: int
    max_abs_diff: Mapping[str, float]
    action_agreement: float

    def ok(self, atol: float) -> bool:
        """Every output within ``atol``."""
        return all(v <= atol for v in self.max_abs_diff.values())


def parity_check(
    onnx_path: str | os.PathLike[str],
    engine_path: str | os.PathLike[str],
    *,
    n: int = 256,
    seed: int = 0,
    batch: int | None = None,
) -> ParityReport:
    """Run ONNX Runtime (CPU) and the engine on the same random observations.

    :param batch: batch size per call (default: the engine's max batch).
    """
    try:
        import onnxruntime as ort
    except ImportError:
        raise MissingDependencyError(
            "onnxruntime", "the parity check", "pip install onnxruntime"
        ) from None
    from inspector.policy.trt_backend import TensorRTPolicy

    meta = read_onnx_meta(onnx_path)
    obs = random_observations(meta, n, seed)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ref = dict(zip(OUTPUT_NAMES, sess.run(list(OUTPUT_NAMES), obs)))
    policy = TensorRTPolicy(engine_path)
    try:
        step = batch or policy.max_batch
        got: dict[str, list[np.ndarray]] = {k: [] for k in OUTPUT_NAMES}
        for i in range(0, n, step):
            outs = policy.forward({k: v[i : i + step] for k, v in obs.items()})
            for k, v in zip(OUTPUT_NAMES, outs):
                got[k].append(v)
    finally:
        policy.close()
    res = {k: np.concatenate(v) for k, v in got.items()}
    diffs = {k: float(np.max(np.abs(ref[k] - res[k]))) for k in OUTPUT_NAMES}
    agree = float(np.mean(ref["action_logits"].argmax(1) == res["action_logits"].argmax(1)))
    return ParityReport(n=n, max_abs_diff=diffs, action_agreement=agree)
