"""inspector.export.tensorrt and inspector.policy.trt_backend.

Everything that needs no GPU runs everywhere. The engine builds and the parity
checks against ONNX Runtime need TensorRT 10 and a CUDA device; without them
they skip, and the skip reason says what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from inspector.errors import ExportError, MissingDependencyError, ModelError
from inspector.export import tensorrt as trtx
from inspector.policy.base import INPUT_NAMES, OUTPUT_NAMES, ModelMeta

REPO = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------- a tiny exported policy


def tiny_meta(glimpse: int = 8, overview: int = 16, memory: int = 2, state: int = 5) -> ModelMeta:
    """Metadata as the exporter writes it, for a small observation spec."""
    return ModelMeta(
        classes=("ok", "line", "point"),
        actions=("up", "down", "left", "right", "zoom_in", "zoom_out", "stop"),
        scan={
            "glimpse": glimpse,
            "overview": overview,
            "zoom_levels": [1, 2, 4],
            "memory": memory,
            "move_fraction": 0.5,
        },
        state_size=state,
        outcome_matrix=np.array([[1.0, -5.0, -5.0], [-1.0, 1.0, 0.5], [-1.0, 0.5, 1.0]]),
        profile_name="tiny",
        profile_sha256="0" * 64,
        model_sha256="1" * 64,
        step_budget=12,
        exporter_version="test",
    )


def tiny_onnx(path: Path, meta: ModelMeta | None = None, seed: int = 0) -> Path:
    """Write a small ONNX graph honouring the policy contract (three inputs, three outputs).

    Pixel inputs are scaled to 0..1 before pooling (as a real policy normalises
    them), then a linear head gives logits, softmaxed class probabilities and a value.
    """
    meta = meta or tiny_meta()
    shapes = trtx.sample_shapes(meta)
    m = shapes["glimpse"][0]
    feat = m + 1 + meta.state_size
    rng = np.random.default_rng(seed)
    a, c = len(meta.actions), len(meta.classes)

    def init(name: str, arr: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)

    # Small weights keep the outputs within about +-1, where fp16's spacing (<= 2**-11)
    # leaves room inside the 1e-3 parity tolerance.
    inits = [
        init("inv255", np.array(1 / 255)),
        init("wa", rng.normal(0, 0.2, (feat, a))),
        init("ba", rng.normal(0, 0.05, (a,))),
        init("wc", rng.normal(0, 0.2, (feat, c))),
        init("bc", rng.normal(0, 0.05, (c,))),
        init("wv", rng.normal(0, 0.2, (feat, 1))),
    ]
    nodes = [
        helper.make_node("Mul", ["glimpse", "inv255"], ["g01"]),
        helper.make_node("ReduceMean", ["g01"], ["gm"], axes=[2, 3], keepdims=0),
        helper.make_node("Mul", ["overview", "inv255"], ["o01"]),
        helper.make_node("ReduceMean", ["o01"], ["om"], axes=[2, 3], keepdims=0),
        helper.make_node("Concat", ["gm", "om", "state"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "wa"], ["la"]),
        helper.make_node("Add", ["la", "ba"], ["action_logits"]),
        helper.make_node("MatMul", ["f", "wc"], ["lc"]),
        helper.make_node("Add", ["lc", "bc"], ["lcb"]),
        helper.make_node("Softmax", ["lcb"], ["class_probs"], axis=1),
        helper.make_node("MatMul", ["f", "wv"], ["value"]),
    ]
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "tiny_policy",
        [helper.make_tensor_value_info(n, f32, ["N", *shapes[n]]) for n in INPUT_NAMES],
        [
            helper.make_tensor_value_info("action_logits", f32, ["N", a]),
            helper.make_tensor_value_info("class_probs", f32, ["N", c]),
            helper.make_tensor_value_info("value", f32, ["N", 1]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by the onnxruntime and TensorRT parsers of 2024-25
    helper.set_model_props(model, meta.to_props())
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def onnx_file(tmp_path: Path) -> Path:
    return tiny_onnx(tmp_path / "tiny.onnx")


def test_tiny_model_runs_in_onnxruntime(onnx_file: Path) -> None:
    # The stand-in model must itself honour the contract, or every test below means little.
    import onnxruntime as ort

    meta = trtx.read_onnx_meta(onnx_file)
    obs = trtx.random_observations(meta, 4)
    sess = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    logits, probs, value = sess.run(list(OUTPUT_NAMES), obs)
    assert logits.shape == (4, len(meta.actions))
    assert probs.shape == (4, len(meta.classes))
    assert value.shape == (4, 1)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)


# ----------------------------------------------------------------- no tensorrt needed


def test_modules_import_without_tensorrt() -> None:
    code = (
        "import sys, inspector.export.tensorrt, inspector.policy.trt_backend; "
        "print(sorted(m for m in ('tensorrt', 'cuda', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert out.stdout.strip() == "[]"


needs_no_trt = pytest.mark.skipif(
    trtx.tensorrt_unavailable_reason() is None
    or not trtx.tensorrt_unavailable_reason().startswith("TensorRT not installed"),
    reason="tensorrt is installed here: the missing-dependency path cannot be exercised",
)


@needs_no_trt
def test_build_engine_without_tensorrt_says_what_to_install(
    onnx_file: Path, tmp_path: Path
) -> None:
    with pytest.raises(MissingDependencyError) as exc:
        trtx.build_engine(onnx_file, tmp_path / "tiny.engine")
    msg = str(exc.value)
    assert "tensorrt" in msg
    assert "pip install inspector[tensorrt]" in msg
    assert "JetPack" in msg
    assert "\n" not in msg
    assert not (tmp_path / "tiny.engine").exists()


@needs_no_trt
def test_policy_without_tensorrt_says_what_to_install(onnx_file: Path, tmp_path: Path) -> None:
    from inspector.policy.trt_backend import TensorRTPolicy

    engine = tmp_path / "tiny.engine"
    engine.write_bytes(b"not really an engine")
    meta = trtx.read_onnx_meta(onnx_file)
    trtx.write_sidecar(
        engine, meta, onnx_sha256="x", precision="fp16", profile=trtx.shape_profile(meta)
    )
    with pytest.raises(MissingDependencyError, match=r"inspector\[tensorrt\]"):
        TensorRTPolicy(engine)


class _StandInEngine:
    """What TensorRTPolicy asks of a deserialised engine: named bindings with shapes
    (-1 for the dynamic batch), dtypes and an optimisation profile."""

    def __init__(self, shapes: dict[str, tuple[int, ...]]) -> None:
        self.shapes = shapes
        self.num_io_tensors = len(shapes)

    def get_tensor_name(self, i: int) -> str:
        return list(self.shapes)[i]

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return (-1, *self.shapes[name][1:])

    def get_tensor_dtype(self, name: str) -> str:
        return "float32"

    def get_tensor_profile_shape(self, name: str, profile: int) -> list[tuple[int, ...]]:
        rest = self.shapes[name][1:]
        return [(1, *rest), (4, *rest), (8, *rest)]

    def create_execution_context(self) -> object:
        engine = self

        class Context:
            def set_input_shape(self, name, shape):
                pass

            def get_tensor_shape(self, name):
                return (8, *engine.shapes[name][1:])

            def set_tensor_address(self, name, ptr):
                pass

        return Context()


def _stand_in_tensorrt(monkeypatch, shapes: dict[str, tuple[int, ...]]) -> None:
    """A ``tensorrt`` module whose runtime deserialises any bytes into an engine with
    ``shapes``, and device memory that is host memory: the runtime's code path, no GPU."""
    import types

    from inspector.policy import trt_backend

    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.9"

    class Logger:
        WARNING = 2

        def __init__(self, level: int) -> None:
            pass

    class Runtime:
        def __init__(self, logger: Logger) -> None:
            pass

        def deserialize_cuda_engine(self, data: bytes) -> _StandInEngine:
            return _StandInEngine(shapes)

    class HostMemory:
        kind = "host"

        def __init__(self, device: int = 0) -> None:
            self.closed = False

        def alloc(self, nbytes: int) -> bytearray:
            return bytearray(nbytes)

        def ptr(self, handle: bytearray) -> int:
            return 0

        def close(self) -> None:
            self.closed = True

    trt.Logger, trt.Runtime, trt.nptype = Logger, Runtime, lambda dtype: np.float32
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setattr(trt_backend, "DeviceMemory", HostMemory)


def _engine_with_sidecar(onnx_file: Path, tmp_path: Path) -> tuple[Path, ModelMeta]:
    engine = tmp_path / "tiny.engine"
    engine.write_bytes(b"a serialised engine")
    meta = trtx.read_onnx_meta(onnx_file)
    trtx.write_sidecar(
        engine, meta, onnx_sha256="x", precision="fp16", profile=trtx.shape_profile(meta)
    )
    return engine, meta


def _bindings(meta: ModelMeta, **changed: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    shapes = {n: (-1, *s) for n, s in meta.expected_shapes().items()}
    return {**shapes, **{n: (-1, *s) for n, s in changed.items()}}


def test_engine_bindings_are_checked_against_the_sidecar_contract(
    onnx_file: Path, tmp_path: Path, monkeypatch
) -> None:
    from inspector.policy.trt_backend import TensorRTPolicy

    engine, meta = _engine_with_sidecar(onnx_file, tmp_path)
    _stand_in_tensorrt(monkeypatch, _bindings(meta))
    policy = TensorRTPolicy(engine)  # bindings that fit: it loads
    assert policy.sample_shapes["glimpse"] == meta.expected_shapes()["glimpse"]
    assert (policy.min_batch, policy.max_batch) == (1, 8)
    policy.close()

    # A sidecar that names three classes beside an engine that outputs four.
    _stand_in_tensorrt(monkeypatch, _bindings(meta, class_probs=(4,)))
    with pytest.raises(ModelError, match="class_probs dimension 1 is 4 but the metadata names 3"):
        TensorRTPolicy(engine)
    g = meta.expected_shapes()["glimpse"]
    _stand_in_tensorrt(monkeypatch, _bindings(meta, glimpse=(g[0], g[1] * 2, g[2] * 2)))
    with pytest.raises(ModelError, match="glimpse dimension 2"):
        TensorRTPolicy(engine)
    _stand_in_tensorrt(monkeypatch, _bindings(meta, value=(1, 1)))
    with pytest.raises(ModelError, match="value has 3 dimensions"):
        TensorRTPolicy(engine)


def test_build_engine_checks_input_before_needing_tensorrt(onnx_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.engine"
    with pytest.raises(ModelError, match="no such ONNX file"):
        trtx.build_engine(tmp_path / "missing.onnx", out)
    with pytest.raises(ExportError, match="calibration"):
        trtx.build_engine(onnx_file, out, int8=True)
    with pytest.raises(ExportError, match="min <= opt <= max"):
        trtx.build_engine(onnx_file, out, min_batch=4, opt_batch=2, max_batch=8)
    with pytest.raises(ExportError, match="workspace"):
        trtx.build_engine(onnx_file, out, workspace_mb=0)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x00\x01 not protobuf")
    with pytest.raises(ModelError, match="garbage.onnx"):
        trtx.build_engine(garbage, out)


def test_build_engine_caches_and_rekeys_int8_without_a_gpu(
    onnx_file: Path, tmp_path: Path, monkeypatch, caplog
) -> None:
    """The build's own steps (plan, cache key, cache hit, int8 re-key, sidecar) with
    TensorRT's builder stood in: the GPU tests below run the real one."""
    builds: list[dict] = []

    def fake_build(trt, plan, **kw):
        builds.append(kw)
        if kw["int8"]:  # TensorRT writes the calibration cache while it builds
            kw["calibrator"].write_calibration_cache(b"scales")
        return b"engine:" + str(kw["int8"]).encode()

    class FakeCalibrator:
        def __init__(self, batches, cache_file) -> None:
            self.batches, self.cache_file = batches, Path(cache_file)

        def write_calibration_cache(self, blob: bytes) -> None:
            self.cache_file.write_bytes(blob)

    monkeypatch.setattr(
        trtx, "import_tensorrt", lambda *a: type("trt", (), {"__version__": "10.9"})
    )
    monkeypatch.setattr(trtx, "gpu_name", lambda: "Fake GPU")
    monkeypatch.setattr(trtx, "_build_serialized", fake_build)
    monkeypatch.setattr(trtx, "make_calibrator", FakeCalibrator)
    cache = tmp_path / "cache"
    caplog.set_level("INFO", logger="inspector.export.tensorrt")

    a = trtx.build_engine(onnx_file, tmp_path / "a.engine", fp16=False, cache_dir=cache)
    b = trtx.build_engine(onnx_file, tmp_path / "b.engine", fp16=False, cache_dir=cache)
    assert len(builds) == 1 and "engine cache hit" in caplog.text
    assert a.read_bytes() == b.read_bytes() == b"engine:False"
    info = trtx.read_sidecar(b)
    assert (info.precision, info.gpu, info.tensorrt_version) == ("fp32", "Fake GPU", "10.9")
    assert info.onnx_sha256 == hashlib.sha256(onnx_file.read_bytes()).hexdigest()

    meta = trtx.read_onnx_meta(onnx_file)
    frames = [trtx.random_observations(meta, 8, seed=s) for s in range(2)]
    c = trtx.build_engine(onnx_file, tmp_path / "c.engine", int8=True, calibration_frames=frames)
    assert len(builds) == 2 and builds[-1]["fp16"] and builds[-1]["calibration_batch"] == 8
    assert (tmp_path / "c.engine.calib").read_bytes() == b"scales"
    # An int8 engine is cached under the key of the calibration cache its build wrote,
    # so a later build from that cache alone finds it.
    calib = tmp_path / "c.engine.calib"
    trtx.build_engine(
        onnx_file, tmp_path / "d.engine", int8=True, calibration_frames=frames, cache_dir=cache
    )
    e = trtx.build_engine(
        onnx_file, tmp_path / "e.engine", int8=True, calibration_cache=calib, cache_dir=cache
    )
    assert len(builds) == 3
    assert e.read_bytes() == c.read_bytes() == b"engine:True"
    assert trtx.read_sidecar(e).precision == "int8"
    assert len(list(cache.glob("*.engine"))) == 2


def test_onnx_without_inspector_metadata_is_refused(tmp_path: Path) -> None:
    path = tiny_onnx(tmp_path / "m.onnx")
    model = onnx.load(str(path))
    del model.metadata_props[:]
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelError, match="not an inspector model"):
        trtx.read_onnx_meta(path)


def test_metadata_that_disagrees_with_the_graph_is_refused(tmp_path: Path) -> None:
    path = tiny_onnx(tmp_path / "m.onnx", tiny_meta(glimpse=8))
    model = onnx.load(str(path))
    del model.metadata_props[:]
    helper.set_model_props(model, tiny_meta(glimpse=12).to_props())
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ExportError, match=r"input 'glimpse' has dims \[-1, 2, 8, 8\]"):
        trtx.read_onnx_meta(path)


# ----------------------------------------------------------------- shapes


@settings(max_examples=60, deadline=None)
@given(
    g=st.integers(1, 256),
    o=st.integers(1, 512),
    m=st.integers(1, 8),
    s=st.integers(1, 64),
    b=st.lists(st.integers(1, 64), min_size=3, max_size=3).map(sorted),
)
def test_shape_profile_follows_metadata(g: int, o: int, m: int, s: int, b: list[int]) -> None:
    meta = tiny_meta(glimpse=g, overview=o, memory=m, state=s)
    prof = trtx.shape_profile(meta, min_batch=b[0], opt_batch=b[1], max_batch=b[2])
    for which, n in zip(("min", "opt", "max"), b):
        assert prof.shape("glimpse", which) == (n, m, g, g)
        assert prof.shape("overview", which) == (n, 1, o, o)
        assert prof.shape("state", which) == (n, s)
    mins, opts, maxs = prof.trtexec_args()
    assert (
        mins == f"--minShapes=glimpse:{b[0]}x{m}x{g}x{g},overview:{b[0]}x1x{o}x{o},state:{b[0]}x{s}"
    )
    assert opts.startswith(f"--optShapes=glimpse:{b[1]}x")
    assert maxs.endswith(f"state:{b[2]}x{s}")


@pytest.mark.parametrize("batches", [(0, 1, 1), (2, 1, 4), (1, 8, 4)])
def test_bad_batch_ranges_are_refused(batches: tuple[int, int, int]) -> None:
    lo, opt, hi = batches
    with pytest.raises(ExportError, match="min <= opt <= max"):
        trtx.shape_profile(tiny_meta(), min_batch=lo, opt_batch=opt, max_batch=hi)


def test_square_sizes_may_be_pairs_but_not_rectangles() -> None:
    meta = tiny_meta()
    pair = ModelMeta(**{**meta.__dict__, "scan": {**meta.scan, "glimpse": [8, 8]}})
    assert trtx.sample_shapes(pair)["glimpse"] == (2, 8, 8)
    rect = ModelMeta(**{**meta.__dict__, "scan": {**meta.scan, "glimpse": [8, 6]}})
    with pytest.raises(ModelError, match="square"):
        trtx.sample_shapes(rect)


# ----------------------------------------------------------------- cache key


@settings(max_examples=50, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=256),
    other=st.binary(min_size=0, max_size=256),
    version=st.sampled_from(["10.3.0", "10.7.0.23", "8.6.1"]),
    gpu=st.sampled_from(["Orin", "NVIDIA H200", "Xavier"]),
)
def test_cache_key_is_deterministic_and_sensitive(
    data: bytes, other: bytes, version: str, gpu: str
) -> None:
    prof = trtx.shape_profile(tiny_meta())
    key = trtx.engine_cache_key(data, version, gpu, profile=prof)
    assert key == trtx.engine_cache_key(data, version, gpu, profile=prof)
    assert len(key) == 64 and int(key, 16) >= 0
    if other != data:
        assert key != trtx.engine_cache_key(other, version, gpu, profile=prof)
    assert key != trtx.engine_cache_key(data, version + ".1", gpu, profile=prof)
    assert key != trtx.engine_cache_key(data, version, gpu + " 2", profile=prof)
    assert key != trtx.engine_cache_key(data, version, gpu, precision="fp32", profile=prof)
    assert key != trtx.engine_cache_key(data, version, gpu, precision="int8", profile=prof)
    wider = trtx.shape_profile(tiny_meta(), max_batch=16)
    assert key != trtx.engine_cache_key(data, version, gpu, profile=wider)


# ----------------------------------------------------------------- sidecar


def test_sidecar_round_trips_model_meta(onnx_file: Path, tmp_path: Path) -> None:
    meta = trtx.read_onnx_meta(onnx_file)
    engine = tmp_path / "models" / "tiny.engine"
    engine.parent.mkdir()
    engine.write_bytes(b"engine bytes")
    prof = trtx.shape_profile(meta, max_batch=4)
    side = trtx.write_sidecar(
        engine,
        meta,
        onnx_sha256="ab" * 32,
        precision="fp16",
        profile=prof,
        tensorrt_version="10.3.0",
        gpu="Orin",
    )
    assert side == engine.with_name("tiny.engine.json")
    info = trtx.read_sidecar(engine)
    assert info.meta.to_props() == meta.to_props()
    assert info.meta.classes == meta.classes
    np.testing.assert_array_equal(info.meta.outcome_matrix, meta.outcome_matrix)
    assert (info.onnx_sha256, info.precision, info.tensorrt_version, info.gpu) == (
        "ab" * 32,
        "fp16",
        "10.3.0",
        "Orin",
    )
    assert info.profile["max_batch"] == 4
    # A current.engine symlink (how stations switch and roll back models) finds its sidecar.
    link = tmp_path / "current.engine"
    link.symlink_to(engine)
    assert trtx.read_sidecar(link).meta.to_props() == meta.to_props()


def test_missing_or_broken_sidecar_is_a_model_error(tmp_path: Path) -> None:
    engine = tmp_path / "x.engine"
    engine.write_bytes(b"e")
    with pytest.raises(ModelError, match="build_engine.sh"):
        trtx.read_sidecar(engine)
    trtx.sidecar_path(engine).write_text("{not json")
    with pytest.raises(ModelError, match="broken engine sidecar"):
        trtx.read_sidecar(engine)
    trtx.sidecar_path(engine).write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(ModelError, match="schema"):
        trtx.read_sidecar(engine)
    trtx.sidecar_path(engine).write_text(json.dumps({"schema": trtx.SIDECAR_SCHEMA, "props": {}}))
    with pytest.raises(ModelError):
        trtx.read_sidecar(engine)


def test_sidecar_refuses_unknown_precision(onnx_file: Path, tmp_path: Path) -> None:
    meta = trtx.read_onnx_meta(onnx_file)
    with pytest.raises(ExportError, match="precision"):
        trtx.write_sidecar(
            tmp_path / "e", meta, onnx_sha256="", precision="bf16", profile=trtx.shape_profile(meta)
        )


# ----------------------------------------------------------------- calibration data


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 7), min_size=0, max_size=12), bs=st.integers(1, 6))
def test_calibration_batches_rebatch_in_order(sizes: list[int], bs: int) -> None:
    meta = tiny_meta(glimpse=4, overview=4, memory=1, state=2)
    shapes = trtx.sample_shapes(meta)
    counter = 0
    observations = []
    for n in sizes:
        # Sample k carries the value k everywhere, so order and completeness are checkable.
        vals = np.arange(counter, counter + n, dtype=np.float32)
        counter += n
        obs = {
            k: np.broadcast_to(vals.reshape(-1, *[1] * len(s)), (n, *s)) for k, s in shapes.items()
        }
        if n == 1:
            obs = {k: v[0] for k, v in obs.items()}  # unbatched observations are accepted too
        observations.append(obs)
    batches = list(trtx.CalibrationBatches(observations, shapes, batch_size=bs))
    assert len(batches) == counter // bs
    seen = []
    for b in batches:
        for k, s in shapes.items():
            assert b[k].shape == (bs, *s) and b[k].dtype == np.float32
            assert b[k].flags.c_contiguous
        seen.extend(b["state"][:, 0].tolist())
    assert seen == list(range(len(batches) * bs))


def test_calibration_batches_name_bad_shapes() -> None:
    shapes = trtx.sample_shapes(tiny_meta())
    bad = {"glimpse": np.zeros((2, 3, 3)), "overview": np.zeros((1, 16, 16)), "state": np.zeros(5)}
    with pytest.raises(ExportError, match="observation 0: glimpse has shape"):
        list(trtx.CalibrationBatches([bad], shapes, batch_size=1))
    with pytest.raises(ExportError, match="no 'state'"):
        list(trtx.CalibrationBatches([{"glimpse": 0, "overview": 0}], shapes))


def test_calibration_dir_reads_npz_files(tmp_path: Path) -> None:
    meta = tiny_meta()
    for i in range(3):
        np.savez(tmp_path / f"obs{i:03d}.npz", **trtx.random_observations(meta, 4, seed=i))
    got = list(trtx.load_calibration_dir(tmp_path))
    assert len(got) == 3
    np.testing.assert_array_equal(got[1]["state"], trtx.random_observations(meta, 4, 1)["state"])
    batches = list(trtx.CalibrationBatches(got, trtx.sample_shapes(meta), batch_size=5))
    assert len(batches) == 2
    with pytest.raises(ExportError, match="no calibration observations"):
        list(trtx.load_calibration_dir(tmp_path / "empty"))


# ----------------------------------------------------------------- command line


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector.commands.engine", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_cli_shapes_and_sidecar(onnx_file: Path, tmp_path: Path) -> None:
    out = _cli("shapes", "--onnx", str(onnx_file), "--max-batch", "4")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == trtx.shape_profile(tiny_meta(), max_batch=4).trtexec_args()

    engine = tmp_path / "tiny.engine"
    engine.write_bytes(b"built by trtexec")
    out = _cli(
        "sidecar",
        "--onnx",
        str(onnx_file),
        "--engine",
        str(engine),
        "--precision",
        "int8",
        "--tensorrt-version",
        "10.3.0",
        "--gpu",
        "Orin",
    )
    assert out.returncode == 0, out.stderr
    info = trtx.read_sidecar(engine)
    assert info.precision == "int8" and info.tensorrt_version == "10.3.0"
    assert info.onnx_sha256 == hashlib.sha256(onnx_file.read_bytes()).hexdigest()

    out = _cli("sidecar", "--onnx", str(onnx_file), "--engine", str(tmp_path / "none.engine"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "no such engine file" in out.stderr


@needs_no_trt
def test_cli_build_without_tensorrt_is_one_line_exit_2(onnx_file: Path, tmp_path: Path) -> None:
    out = _cli("build", "--onnx", str(onnx_file), "--out", str(tmp_path / "e.engine"))
    assert out.returncode == 2
    assert out.stderr.startswith("inspector: error: building a TensorRT engine needs 'tensorrt'")
    assert "Traceback" not in out.stderr


# ----------------------------------------------------------------- GPU: real engines

_REASON = trtx.tensorrt_unavailable_reason()


@pytest.fixture
def needs_trt() -> None:
    """Skip without TensorRT + CUDA; fail instead under deploy/jetson/gpu_check.sh."""
    if _REASON is not None:
        if os.environ.get("INSPECTOR_REQUIRE_TRT"):
            pytest.fail(_REASON)
        pytest.skip(_REASON)


@pytest.fixture
def gpu_onnx(tmp_path: Path) -> Path:
    # gpu_check.sh hands in an exported model; otherwise the tiny one.
    given_path = os.environ.get("INSPECTOR_TRT_ONNX")
    return Path(given_path) if given_path else tiny_onnx(tmp_path / "tiny.onnx")


@pytest.mark.usefixtures("needs_trt")
@pytest.mark.parametrize(("fp16", "atol"), [(False, 1e-4), (True, 1e-3)])
def test_engine_matches_onnxruntime(
    gpu_onnx: Path, tmp_path: Path, fp16: bool, atol: float
) -> None:
    engine = trtx.build_engine(gpu_onnx, tmp_path / "m.engine", fp16=fp16, max_batch=8)
    info = trtx.read_sidecar(engine)
    assert info.precision == ("fp16" if fp16 else "fp32")
    rep = trtx.parity_check(gpu_onnx, engine, n=256, seed=1)
    assert rep.ok(atol), rep.max_abs_diff
    assert rep.action_agreement >= (0.99 if fp16 else 1.0)


@pytest.mark.usefixtures("needs_trt")
def test_policy_runs_odd_batches_and_acts(gpu_onnx: Path, tmp_path: Path) -> None:
    import onnxruntime as ort

    from inspector.policy.trt_backend import TensorRTPolicy

    engine = trtx.build_engine(gpu_onnx, tmp_path / "m.engine", fp16=False, max_batch=4)
    meta = trtx.read_onnx_meta(gpu_onnx)
    obs = trtx.random_observations(meta, 11, seed=3)  # 11 > max batch 4: run in chunks
    ref = ort.InferenceSession(str(gpu_onnx), providers=["CPUExecutionProvider"]).run(None, obs)
    policy = TensorRTPolicy(engine)
    try:
        assert policy.backend == "tensorrt" and policy.max_batch == 4
        got = policy.forward(obs)
        for r, g in zip(ref, got):
            np.testing.assert_allclose(g, r, atol=1e-4)
        action, probs = policy.act({k: v[0] for k, v in obs.items()})
        assert action == int(np.argmax(ref[0][0]))
        np.testing.assert_allclose(probs, ref[1][0], atol=1e-4)
        assert policy.verdict(probs) in meta.classes
        with pytest.raises(ModelError, match="input glimpse has shape"):
            policy.forward({**obs, "glimpse": obs["glimpse"][:, :, :2]})
    finally:
        policy.close()


@pytest.mark.usefixtures("needs_trt")
def test_engine_cache_reuses_a_build(gpu_onnx: Path, tmp_path: Path, caplog) -> None:
    cache = tmp_path / "cache"
    first = trtx.build_engine(gpu_onnx, tmp_path / "a.engine", fp16=False, cache_dir=cache)
    assert len(list(cache.glob("*.engine"))) == 1
    caplog.set_level("INFO", logger="inspector.export.tensorrt")
    second = trtx.build_engine(gpu_onnx, tmp_path / "b.engine", fp16=False, cache_dir=cache)
    assert "engine cache hit" in caplog.text
    assert first.read_bytes() == second.read_bytes()
    assert trtx.read_sidecar(second).meta.to_props() == trtx.read_sidecar(first).meta.to_props()
    trtx.build_engine(gpu_onnx, tmp_path / "c.engine", fp16=True, cache_dir=cache)
    assert len(list(cache.glob("*.engine"))) == 2  # another precision is another entry


@pytest.mark.usefixtures("needs_trt")
def test_int8_engine_with_calibrator(gpu_onnx: Path, tmp_path: Path) -> None:
    meta = trtx.read_onnx_meta(gpu_onnx)
    calib = [trtx.random_observations(meta, 8, seed=s) for s in range(8)]
    engine = trtx.build_engine(
        gpu_onnx, tmp_path / "q.engine", int8=True, calibration_frames=calib, calibration_batch=8
    )
    assert (tmp_path / "q.engine.calib").is_file()  # calibration is kept for the next build
    assert trtx.read_sidecar(engine).precision == "int8"
    rep = trtx.parity_check(gpu_onnx, engine, n=128, seed=2)
    # int8 is approximate: the outputs must be sane and the actions mostly agree.
    assert all(np.isfinite(v) for v in rep.max_abs_diff.values())
    assert rep.action_agreement >= 0.9, rep


# ----------------------------------------------------------------- GPU: device memory alone


def _cuda_reason() -> str | None:
    """Why the device-memory tests cannot run here (None: a CUDA device is visible)."""
    rt = trtx.import_cudart()
    if rt is not None:
        err, n = rt.cudaGetDeviceCount()
        if int(err) == 0 and n > 0:
            return None
    try:
        import torch
    except ImportError:
        return "needs a CUDA device and cuda-python or torch (neither is installed)"
    if torch.cuda.is_available():
        return None
    return "needs a CUDA device (none is visible: no NVIDIA driver or GPU on this machine)"


@pytest.mark.parametrize("kind", ["cuda-python", "torch"])
def test_device_memory_round_trips_on_a_gpu(kind: str, monkeypatch) -> None:
    """The buffers and stream TensorRTPolicy runs engines with, without TensorRT."""
    reason = _cuda_reason()
    if reason is not None:
        pytest.skip(reason)
    from inspector.policy.trt_backend import DeviceMemory

    if kind == "cuda-python":
        if trtx.import_cudart() is None:
            pytest.skip("cuda-python is not installed")
    else:
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch here has no CUDA")
        from inspector.policy import trt_engine

        monkeypatch.setattr(trt_engine, "import_cudart", lambda: None)
    mem = DeviceMemory()
    try:
        assert mem.kind == kind
        assert isinstance(mem.stream_handle, int)
        rng = np.random.default_rng(0)
        arrays = [
            rng.normal(size=(3, 7, 5)).astype(np.float32),  # odd sizes, not a multiple of 4 B
            rng.integers(-9, 9, size=13).astype(np.int32),
            np.arange(1, dtype=np.float32),
        ]
        handles = [mem.alloc(a.nbytes + 16) for a in arrays]
        ptrs = [mem.ptr(h) for h in handles]
        assert all(p > 0 for p in ptrs) and len(set(ptrs)) == len(ptrs)
        for h, a in zip(handles, arrays):
            mem.to_device(h, a)
        back = [np.zeros_like(a) for a in arrays]
        for h, b in zip(handles, back):
            mem.to_host(b, h)
        mem.synchronize()
        for a, b in zip(arrays, back):
            np.testing.assert_array_equal(a, b)
        assert trtx.gpu_name()  # the engine cache key's device name
    finally:
        mem.close()
        mem.close()  # idempotent
