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

Command line (:mod:`inspector.commands.engine`: ``inspector engine VERB`` or
``python -m inspector.commands.engine VERB``, used by ``deploy/jetson/``)::

    build   --onnx M.onnx --out M.engine [--fp32] [--int8 --calib DIR] [--max-batch 8]
    shapes  --onnx M.onnx [--min-batch 1 --opt-batch 1 --max-batch 8]   # trtexec shape flags
    sidecar --onnx M.onnx --engine M.engine --precision fp16           # after trtexec
    parity  --onnx M.onnx --engine M.engine [--n 512]                  # engine vs ONNX Runtime
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from inspector.errors import ExportError, MissingDependencyError, ModelError
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


# --------------------------------------------------------------------------- calibration


class CalibrationBatches:
    """Observations re-cut into fixed-size float32 batches for INT8 calibration.

    TensorRT calibrates at one shape (the calibration profile), so every batch
    it is handed has exactly ``batch_size`` samples; a short tail is dropped.

    :param observations: observation dicts (``glimpse``, ``overview``, ``state``),
        each either one sample or a batch along axis 0.
    :param samples: per-sample shapes, as from :func:`sample_shapes`.
    :param batch_size: samples per calibration batch.
    :param max_batches: stop after this many batches (None: all).
    """

    def __init__(
        self,
        observations: Iterable[Mapping[str, np.ndarray]],
        samples: Mapping[str, tuple[int, ...]],
        batch_size: int = 8,
        max_batches: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ExportError(f"calibration batch size must be >= 1, got {batch_size}")
        self.observations = observations
        self.samples = dict(samples)
        self.batch_size = int(batch_size)
        self.max_batches = max_batches

    def _as_batch(self, obs: Mapping[str, np.ndarray], index: int) -> dict[str, np.ndarray]:
        missing = [n for n in INPUT_NAMES if n not in obs]
        if missing:
            raise ExportError(f"calibration observation {index} has no {missing[0]!r}")
        out = {}
        for name in INPUT_NAMES:
            arr = np.asarray(obs[name], dtype=np.float32)
            want = self.samples[name]
            if arr.shape == want:
                arr = arr[None]
            if arr.shape[1:] != want:
                raise ExportError(
                    f"calibration observation {index}: {name} has shape {list(arr.shape)}, "
                    f"expected [{', '.join(map(str, want))}] or [N, {', '.join(map(str, want))}]"
                )
            out[name] = arr
        sizes = {len(a) for a in out.values()}
        if len(sizes) != 1:
            raise ExportError(f"calibration observation {index}: inputs differ in batch size")
        return out

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        pending: dict[str, list[np.ndarray]] = {n: [] for n in INPUT_NAMES}
        have = 0
        emitted = 0
        for i, obs in enumerate(self.observations):
            batch = self._as_batch(obs, i)
            for n in INPUT_NAMES:
                pending[n].append(batch[n])
            have += len(batch[INPUT_NAMES[0]])
            while have >= self.batch_size:
                joined = {n: np.concatenate(pending[n]) for n in INPUT_NAMES}
                yield {n: np.ascontiguousarray(joined[n][: self.batch_size]) for n in INPUT_NAMES}
                emitted += 1
                if self.max_batches is not None and emitted >= self.max_batches:
                    return
                pending = {n: [joined[n][self.batch_size :]] for n in INPUT_NAMES}
                have -= self.batch_size


def load_calibration_dir(directory: str | os.PathLike[str]) -> Iterator[dict[str, np.ndarray]]:
    """Observations from ``*.npz`` files (arrays ``glimpse``, ``overview``, ``state``), sorted.

    Write them with ``np.savez(path, glimpse=g, overview=o, state=s)`` from observations
    the scan geometry made from footage frames.

    :raises ExportError: the directory is missing or holds no ``.npz`` file.
    """
    d = Path(directory)
    files = sorted(d.glob("*.npz")) if d.is_dir() else []
    if not files:
        raise ExportError(f"{d}: no calibration observations (*.npz with glimpse/overview/state)")
    for f in files:
        with np.load(f) as z:
            yield {n: z[n] for n in z.files}


def make_calibrator(batches: CalibrationBatches, cache_file: str | os.PathLike[str]) -> Any:
    """A ``tensorrt.IInt8EntropyCalibrator2`` feeding ``batches`` through device buffers.

    The calibration cache (``cache_file``) is read back on later builds so that
    calibration runs once per model.
    """
    trt = import_tensorrt("INT8 calibration")
    from inspector.policy.trt_backend import DeviceMemory

    class Calibrator(trt.IInt8EntropyCalibrator2):
        """Entropy calibrator over observation batches."""

        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.cache_file = Path(cache_file)
            self.batches = iter(batches)
            self.mem = DeviceMemory()
            self.buffers: dict[str, Any] = {}
            self.count = 0

        def get_batch_size(self) -> int:
            return batches.batch_size

        def get_batch(self, names: list[str]) -> list[int] | None:
            try:
                batch = next(self.batches)
            except StopIteration:
                return None
            ptrs = []
            for name in names:
                arr = batch[name]
                if name not in self.buffers:
                    self.buffers[name] = self.mem.alloc(arr.nbytes)
                self.mem.to_device(self.buffers[name], arr)
                ptrs.append(self.mem.ptr(self.buffers[name]))
            self.mem.synchronize()
            self.count += 1
            return ptrs

        def read_calibration_cache(self) -> bytes | None:
            if self.cache_file.is_file():
                log.info("using calibration cache %s", self.cache_file)
                return self.cache_file.read_bytes()
            return None

        def write_calibration_cache(self, cache: Any) -> None:
            write_atomic(self.cache_file, bytes(cache))

    return Calibrator()


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
    onnx_file = Path(onnx_path)
    out = Path(out_path)
    meta = read_onnx_meta(onnx_file)
    profile = shape_profile(meta, min_batch=min_batch, opt_batch=opt_batch, max_batch=max_batch)
    if workspace_mb < 1:
        raise ExportError(f"workspace_mb must be >= 1, got {workspace_mb}")
    calib_cache = (
        Path(calibration_cache) if calibration_cache else out.with_name(out.name + ".calib")
    )
    if int8 and calibration_frames is None and not calib_cache.is_file():
        raise ExportError(
            "INT8 needs calibration observations (--calib DIR of .npz files) or an existing "
            f"calibration cache ({calib_cache}); without them the int8 scales would be made up"
        )
    precision = "int8" if int8 else "fp16" if fp16 else "fp32"
    onnx_bytes = onnx_file.read_bytes()
    onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()

    trt = import_tensorrt()
    gpu = gpu_name()
    calib_sha = (
        hashlib.sha256(calib_cache.read_bytes()).hexdigest() if calib_cache.is_file() else ""
    )
    key = engine_cache_key(
        onnx_bytes,
        trt.__version__,
        gpu,
        precision=precision,
        profile=profile,
        workspace_mb=workspace_mb,
        calibration_sha256=calib_sha if int8 else "",
    )
    cached = Path(cache_dir) / f"{key}.engine" if cache_dir is not None else None
    if cached is not None and cached.is_file():
        log.info("engine cache hit %s", cached)
        if cached.resolve() != out.resolve():
            write_atomic(out, cached.read_bytes())
    else:
        data = _build_serialized(
            trt,
            onnx_file,
            profile,
            fp16=fp16 or int8,  # int8 engines keep fp16 for layers int8 cannot take
            int8=int8,
            calibrator=(
                make_calibrator(
                    CalibrationBatches(
                        calibration_frames if calibration_frames is not None else [],
                        profile.samples,
                        calibration_batch,
                    ),
                    calib_cache,
                )
                if int8
                else None
            ),
            calibration_batch=calibration_batch,
            workspace_mb=workspace_mb,
            timing_cache=Path(timing_cache) if timing_cache else None,
        )
        write_atomic(out, data)
        if cached is not None:
            if int8 and calib_cache.is_file():
                # The build has just written the calibration cache; key the engine by it
                # so the next build with that cache finds this engine.
                key = engine_cache_key(
                    onnx_bytes,
                    trt.__version__,
                    gpu,
                    precision=precision,
                    profile=profile,
                    workspace_mb=workspace_mb,
                    calibration_sha256=hashlib.sha256(calib_cache.read_bytes()).hexdigest(),
                )
                cached = cached.with_name(f"{key}.engine")
            write_atomic(cached, data)
            log.info("engine cached as %s", cached)
    write_sidecar(
        out,
        meta,
        onnx_sha256=onnx_sha,
        precision=precision,
        profile=profile,
        tensorrt_version=trt.__version__,
        gpu=gpu,
    )
    return out


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
    onnx_file: Path,
    profile: ShapeProfile,
    *,
    fp16: bool,
    int8: bool,
    calibrator: Any,
    calibration_batch: int,
    workspace_mb: int,
    timing_cache: Path | None,
) -> bytes:
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


def random_observations(meta: ModelMeta, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random observations in the contract's value ranges (pixels 0..255, state 0..1)."""
    rng = np.random.default_rng(seed)
    shapes = sample_shapes(meta)
    return {
        "glimpse": rng.uniform(0, 255, (n, *shapes["glimpse"])).astype(np.float32),
        "overview": rng.uniform(0, 255, (n, *shapes["overview"])).astype(np.float32),
        "state": rng.uniform(0, 1, (n, *shapes["state"])).astype(np.float32),
    }


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
