"""The product's thread counts: one place (inspector/threads.py), overridable, sized to
the cores the process may use."""

from __future__ import annotations

import os

import pytest

from inspector import threads
from inspector.cli import build_parser
from inspector.errors import InspectorError


@pytest.fixture(autouse=True)
def _keep_environment(monkeypatch):
    # configure() writes the environment and torch's pools: put both back afterwards.
    import torch

    for var in (threads.ENV, *threads.LIBRARY_ENV):
        monkeypatch.delenv(var, raising=False)  # restored when the test ends
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)
    threads._applied = None


def test_the_count_comes_from_the_flag_then_the_environment_then_the_cores():
    cores = len(os.sched_getaffinity(0))
    assert threads.resolve(None, {}) == threads.ThreadPlan(cores, "cores")
    assert threads.resolve(None, {"OMP_NUM_THREADS": "3"}).count == 3
    env = {"OMP_NUM_THREADS": "3", threads.ENV: "2"}
    assert threads.resolve(None, env) == threads.ThreadPlan(2, threads.ENV)
    assert threads.resolve(5, env) == threads.ThreadPlan(5, "--threads")
    assert "cores this process may use" in threads.resolve(None, {}).describe()


@pytest.mark.parametrize("bad", ["0", "-1", "many"])
def test_a_bad_count_in_the_environment_is_a_one_line_error(bad):
    with pytest.raises(InspectorError, match="INSPECTOR_THREADS must be a positive integer"):
        threads.resolve(None, {threads.ENV: bad})


def test_configure_sizes_openmp_torch_and_opencv_and_exports_the_count():
    import cv2
    import torch

    plan = threads.configure(1)
    assert plan == threads.ThreadPlan(1, "--threads")
    assert torch.get_num_threads() == 1
    assert cv2.getNumThreads() == 1
    for var in (threads.ENV, *threads.LIBRARY_ENV):
        assert os.environ[var] == "1"
    assert threads.current() == 1
    from threadpoolctl import threadpool_info

    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]  # numpy's, loaded early
    assert blas and all(p["num_threads"] == 1 for p in blas)


def test_onnx_runtime_sessions_get_the_count_and_one_inter_op_thread():
    ort = pytest.importorskip("onnxruntime")
    threads.configure(1, torch=False)
    opts = threads.ort_session_options(ort.SessionOptions())
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (1, 1)
    opts = threads.ort_session_options(ort.SessionOptions(), 3)
    assert opts.intra_op_num_threads == 3


def test_the_command_line_count_is_exported_before_the_libraries_start():
    threads.preset_environment(["train", "--threads", "2", "--out", "x"])
    assert os.environ["OMP_NUM_THREADS"] == "2"
    threads.preset_environment(["eval", "--threads=1"])
    assert os.environ["OMP_NUM_THREADS"] == "1"
    threads.preset_environment(["eval", "--threads", "lots"])  # the parser reports it
    assert os.environ["OMP_NUM_THREADS"] == "1"


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--profile", "p.yaml", "--camera", "synthetic", "--out", "o"],
        ["eval", "run", "--camera", "synthetic"],
        ["calibrate", "run", "--camera", "synthetic"],
        ["retrain", "--footage", "s", "--base", "b", "--out", "o"],
        ["export", "run", "--out", "m.onnx"],
        ["run", "--config", "stations/example.yaml"],
    ],
)
def test_every_verb_that_computes_takes_threads(argv):
    args = build_parser().parse_args([*argv, "--threads", "3"])
    assert args.threads == 3
    assert args.thread_libraries in ("torch", "onnx")


def test_member_processes_get_their_share_not_the_parents_count(tmp_path, monkeypatch):
    from inspector.train import cluster

    seen = {}

    def fake_popen(cmd, **kw):
        seen.update(kw["env"])
        return object()

    monkeypatch.setattr(cluster.subprocess, "Popen", fake_popen)
    monkeypatch.setenv("OMP_NUM_THREADS", "8")  # the parent's, exported by configure
    cluster._start(tmp_path / "spec.json", 2)
    assert seen["OMP_NUM_THREADS"] == seen[threads.ENV] == "2"
