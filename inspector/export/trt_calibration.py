"""INT8 calibration for the TensorRT builder: observations re-cut into fixed batches,
read from a folder of ``.npz`` files, and fed to TensorRT through device buffers.

``tensorrt`` is imported inside :func:`make_calibrator` only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import ExportError
from inspector.files import write_atomic
from inspector.policy.base import INPUT_NAMES
from inspector.policy.trt_engine import import_tensorrt

# The builder's logger: calibration is a step of the build, and its lines read as such.
log = logging.getLogger("inspector.export.tensorrt")

__all__ = ["CalibrationBatches", "load_calibration_dir", "make_calibrator"]


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
