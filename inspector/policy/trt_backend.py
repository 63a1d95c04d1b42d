"""The native TensorRT backend: run a serialised engine with explicit device buffers.

The engine's sidecar ``<engine>.json`` (written by
:func:`inspector.export.tensorrt.build_engine` or ``deploy/jetson/build_engine.sh``)
supplies the :class:`ModelMeta`, since engines carry no ONNX metadata.

Device memory and the stream come from cuda-python's runtime bindings; where
cuda-python is missing but torch has CUDA (a development machine), torch
tensors serve as the allocator. ``tensorrt`` is imported when a policy is
made, never at module import.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from inspector.errors import MissingDependencyError, ModelError
from inspector.policy.base import INPUT_NAMES, OUTPUT_NAMES, Policy, check_contract

log = logging.getLogger(__name__)

__all__ = ["DeviceMemory", "TensorRTPolicy"]


class DeviceMemory:
    """Device buffers and one CUDA stream, through cuda-python or (fallback) torch.

    Handles returned by :meth:`alloc` are opaque; :meth:`ptr` gives the device
    address TensorRT wants. Copies are queued on :attr:`stream_handle`; call
    :meth:`synchronize` before reading host results.

    :param device: CUDA device index.
    :raises MissingDependencyError: neither cuda-python nor torch with CUDA is installed.
    :raises ModelError: no CUDA device is visible.
    """

    def __init__(self, device: int = 0) -> None:
        from inspector.policy.trt_engine import import_cudart

        self._handles: list[Any] = []
        self._torch: Any = None
        self._cudart = import_cudart()
        if self._cudart is not None:
            self._check(self._cudart.cudaSetDevice(device), "cudaSetDevice")
            self._stream = self._check(self._cudart.cudaStreamCreate(), "cudaStreamCreate")
            self.kind = "cuda-python"
            return
        try:
            import torch
        except ImportError:
            raise MissingDependencyError(
                "cuda-python",
                "TensorRT device buffers",
                "pip install cuda-python (part of inspector[tensorrt]); torch with CUDA also works",
            ) from None
        if not torch.cuda.is_available():
            raise ModelError("TensorRT needs a CUDA device and none is visible (check nvidia-smi)")
        self._torch = torch
        self._device = torch.device("cuda", device)
        self._stream = torch.cuda.Stream(device=self._device)
        self.kind = "torch"

    def _check(self, result: Any, what: str) -> Any:
        # cuda-python returns (err, *values); err is a cudaError_t enum.
        err, *values = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            name = self._cudart.cudaGetErrorName(err)[1]
            raise ModelError(f"CUDA error in {what}: {name!r}")
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    @property
    def stream_handle(self) -> int:
        """The raw ``cudaStream_t`` as an int (what ``execute_async_v3`` takes)."""
        if self._torch is not None:
            return int(self._stream.cuda_stream)
        return int(self._stream)

    def alloc(self, nbytes: int) -> Any:
        """A device buffer of at least ``nbytes`` bytes."""
        nbytes = max(int(nbytes), 1)
        if self._torch is not None:
            handle = self._torch.empty(nbytes, dtype=self._torch.uint8, device=self._device)
        else:
            handle = self._check(self._cudart.cudaMalloc(nbytes), "cudaMalloc")
        self._handles.append(handle)
        return handle

    def ptr(self, handle: Any) -> int:
        """Device address of a buffer."""
        return int(handle.data_ptr()) if self._torch is not None else int(handle)

    def to_device(self, handle: Any, host: np.ndarray) -> None:
        """Queue a copy of the C-contiguous array ``host`` into ``handle``."""
        host = np.ascontiguousarray(host)
        if self._torch is not None:
            src = self._torch.from_numpy(host.reshape(-1).view(np.uint8))
            with self._torch.cuda.stream(self._stream):
                handle[: host.nbytes].copy_(src)
            return
        kind = self._cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._check(
            self._cudart.cudaMemcpyAsync(
                int(handle), host.ctypes.data, host.nbytes, kind, self._stream
            ),
            "cudaMemcpyAsync (host to device)",
        )

    def to_host(self, host: np.ndarray, handle: Any) -> None:
        """Queue a copy from ``handle`` into the C-contiguous, writable array ``host``."""
        if self._torch is not None:
            dst = self._torch.from_numpy(host.reshape(-1).view(np.uint8))
            with self._torch.cuda.stream(self._stream):
                dst.copy_(handle[: host.nbytes])
            return
        kind = self._cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._check(
            self._cudart.cudaMemcpyAsync(
                host.ctypes.data, int(handle), host.nbytes, kind, self._stream
            ),
            "cudaMemcpyAsync (device to host)",
        )

    def synchronize(self) -> None:
        """Wait for everything queued on the stream."""
        if self._torch is not None:
            self._stream.synchronize()
        else:
            self._check(self._cudart.cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")

    def close(self) -> None:
        """Free every buffer and the stream (idempotent)."""
        if self._cudart is not None:
            for h in self._handles:
                self._cudart.cudaFree(h)
            if self._stream is not None:
                self._cudart.cudaStreamDestroy(self._stream)
        self._handles.clear()
        self._stream = None


class TensorRTPolicy(Policy):
    """A policy served by a TensorRT engine (``.engine`` / ``.plan``).

    Buffers for the largest batch of the engine's optimisation profile are
    allocated once; larger batches are run in chunks, smaller-than-minimum ones
    padded.

    :param engine_path: the serialised engine; ``<engine_path>.json`` must exist.
    :param device: CUDA device index.
    :raises ModelError: the engine or its sidecar is missing, or this TensorRT/GPU cannot load it.
    :raises MissingDependencyError: tensorrt (or a way to allocate device memory) is missing.
    """

    backend = "tensorrt"

    def __init__(self, engine_path: str | os.PathLike[str], *, device: int = 0) -> None:
        from inspector.policy.trt_engine import import_tensorrt, read_sidecar

        path = Path(engine_path)
        if not path.is_file():
            raise ModelError(f"{path}: no such engine file")
        self.info = read_sidecar(path)
        super().__init__(self.info.meta)
        self.path = path
        self._mem: DeviceMemory | None = None
        trt = import_tensorrt("running a TensorRT engine")
        if self.info.tensorrt_version and self.info.tensorrt_version != trt.__version__:
            log.warning(
                "%s was built with TensorRT %s, this is %s: it will probably not load",
                path,
                self.info.tensorrt_version,
                trt.__version__,
            )
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self._mem = DeviceMemory(device)
        self.engine = self._runtime.deserialize_cuda_engine(path.read_bytes())
        if self.engine is None:
            self.close()
            raise ModelError(
                f"{path}: TensorRT {trt.__version__} cannot load this engine (built with TensorRT "
                f"{self.info.tensorrt_version or '?'} on {self.info.gpu or '?'}); engines are not "
                "portable across TensorRT versions or GPUs: rebuild it on this device with "
                "deploy/jetson/build_engine.sh"
            )
        names = {self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)}
        missing = [n for n in (*INPUT_NAMES, *OUTPUT_NAMES) if n not in names]
        if missing:
            self.close()
            raise ModelError(f"{path}: engine lacks tensors {missing} (has {sorted(names)})")
        try:
            # The sidecar's metadata against the engine's bindings, as the ONNX backend checks
            # its graph: a sidecar naming more classes than the engine outputs fails here.
            check_contract(self.meta, self._binding_shapes(names), str(path))
        except ModelError:
            self.close()
            raise
        self.context = self.engine.create_execution_context()
        self._dtypes = {n: np.dtype(trt.nptype(self.engine.get_tensor_dtype(n))) for n in names}
        lo = {}
        hi = {}
        for name in INPUT_NAMES:
            mn, _opt, mx = self.engine.get_tensor_profile_shape(name, 0)
            lo[name], hi[name] = tuple(mn), tuple(mx)
        self.min_batch = int(lo[INPUT_NAMES[0]][0])
        self.max_batch = int(hi[INPUT_NAMES[0]][0])
        self.sample_shapes = {n: hi[n][1:] for n in INPUT_NAMES}
        # Output sizes at the largest batch size the profile allows.
        for name in INPUT_NAMES:
            self.context.set_input_shape(name, hi[name])
        self._buffers: dict[str, Any] = {}
        for name in (*INPUT_NAMES, *OUTPUT_NAMES):
            shape = hi[name] if name in hi else tuple(self.context.get_tensor_shape(name))
            nbytes = int(np.prod(shape)) * self._dtypes[name].itemsize
            self._buffers[name] = self._mem.alloc(nbytes)
            self.context.set_tensor_address(name, self._mem.ptr(self._buffers[name]))
        log.info(
            "TensorRT engine %s (%s, batch %d..%d, buffers via %s)",
            path,
            self.info.precision,
            self.min_batch,
            self.max_batch,
            self._mem.kind,
        )

    def _binding_shapes(self, names: set[str]) -> dict[str, list[int]]:
        """name -> the engine's shape of each input and output (-1 where dynamic)."""
        return {n: [int(d) for d in self.engine.get_tensor_shape(n)] for n in sorted(names)}

    def forward(self, obs: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batched outputs (action_logits [N, A], class_probs [N, C], value [N, 1])."""
        arrays = {}
        for name in INPUT_NAMES:
            arr = np.asarray(obs[name])
            if arr.ndim < 1 or tuple(arr.shape[1:]) != self.sample_shapes[name]:
                raise ModelError(
                    f"{self.path}: input {name} has shape {list(arr.shape)}, the engine takes "
                    f"[N, {', '.join(map(str, self.sample_shapes[name]))}]"
                )
            arrays[name] = arr
        n = len(arrays[INPUT_NAMES[0]])
        if any(len(a) != n for a in arrays.values()):
            raise ModelError(f"{self.path}: inputs differ in batch size")
        if n > self.max_batch:
            parts = [
                self.forward({k: v[i : i + self.max_batch] for k, v in arrays.items()})
                for i in range(0, n, self.max_batch)
            ]
            return tuple(np.concatenate(p) for p in zip(*parts))  # type: ignore[return-value]
        return self._run(arrays, n)

    def _run(
        self, arrays: Mapping[str, np.ndarray], n: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._mem is None:
            raise ModelError(f"{self.path}: policy is closed")
        batch = max(n, self.min_batch)
        for name in INPUT_NAMES:
            arr = np.ascontiguousarray(arrays[name], dtype=self._dtypes[name])
            if batch > n:  # the profile's minimum batch is above n: pad with zeros
                pad = np.zeros((batch - n, *arr.shape[1:]), dtype=arr.dtype)
                arr = np.concatenate([arr, pad])
            self.context.set_input_shape(name, arr.shape)
            self._mem.to_device(self._buffers[name], arr)
        outs = {
            name: np.empty(tuple(self.context.get_tensor_shape(name)), dtype=self._dtypes[name])
            for name in OUTPUT_NAMES
        }
        if not self.context.execute_async_v3(self._mem.stream_handle):
            raise ModelError(f"{self.path}: TensorRT execution failed (see the log)")
        for name in OUTPUT_NAMES:
            self._mem.to_host(outs[name], self._buffers[name])
        self._mem.synchronize()
        return tuple(  # type: ignore[return-value]
            outs[name][:n].astype(np.float32, copy=False) for name in OUTPUT_NAMES
        )

    def close(self) -> None:
        """Free the device buffers, the context and the engine (idempotent)."""
        # Context before engine before runtime: TensorRT objects must go in that order.
        for attr in ("context", "engine"):
            if getattr(self, attr, None) is not None:
                setattr(self, attr, None)
        if self._mem is not None:
            self._mem.close()
            self._mem = None
