"""What the station benchmarks share: a tiny exported model, a loopback mosquitto, and a
reporter that keeps nothing (the station at its fastest)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import ROOT
from inspector.policy.base import INPUT_NAMES, Policy
from inspector.station.mqtt import LinkStatus

TRAIN_CONFIG = (
    "n_envs: 1\nn_steps: 128\nbatch_size: 64\nn_epochs: 1\nfinal_eval_episodes: 0\nteacher: none\n"  # noqa: E501
)


def build_model(folder: Path) -> Path:
    """Train 256 steps on the synthetic camera and export to ONNX (same as the tests)."""
    from inspector.cli import main

    run, onnx = folder / "run", folder / "run" / "model.onnx"
    if onnx.is_file():  # built by an earlier run into the same folder
        return onnx
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.yaml").write_text(TRAIN_CONFIG)
    profile = ROOT / "reward_profiles" / "lcd_panel.yaml"
    args = ["train", "--profile", str(profile), "--camera", "synthetic", "--param", "size=128",
            "--timesteps", "256", "--out", str(run), "--config", str(folder / "train.yaml"),
            "--no-progress"]  # fmt: skip
    if main(args) != 0 or main(["export", str(run), "--out", str(onnx), "--observations", "50"]):
        raise SystemExit("building the benchmark model failed")
    return onnx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mosquitto(folder: Path, nodelay: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """mosquitto on a free loopback port, anonymous, no persistence; ``nodelay`` puts
    ``set_tcp_nodelay true`` in its config (Nagle's algorithm off, docs/mqtt.md)."""
    binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.access(binary, os.X_OK):
        raise SystemExit("mosquitto is not installed: apt-get install mosquitto")
    port = free_port()
    conf = folder / "mosquitto.conf"
    lines = [f"listener {port} 127.0.0.1", "allow_anonymous true", "persistence false"]
    if nodelay:
        lines.append("set_tcp_nodelay true")
    if os.geteuid() == 0:
        lines.append("user root")
    conf.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("mosquitto did not start") from None
            time.sleep(0.05)


class MemoryReporter:
    """A reporter without outbox or broker: numbers each result and keeps nothing."""

    accepting = True

    def __init__(self) -> None:
        self.n = 0

    def report(self, result: Any) -> int:
        self.n += 1
        result.seq = self.n
        return self.n

    def status(self) -> LinkStatus:
        return LinkStatus(False, 0, False, None, 0, 0, 0, 0, 0, 0, 0)

    def close(self, flush_timeout: float = 0.0) -> bool:
        return True


def percentiles(samples: list[float]) -> tuple[float, float, float]:
    """(p50, p99, mean) of ``samples``."""
    x = np.asarray(samples, dtype=np.float64)
    return float(np.percentile(x, 50)), float(np.percentile(x, 99)), float(x.mean())


def glimpse_latency(
    policy: Policy,
    obs: dict[str, np.ndarray],
    n: int,
    warmup: int = 50,
    max_s: float = float("inf"),
) -> list[float]:
    """Seconds per batch-1 ``forward`` call, ``n`` calls cycling through ``obs``.

    :param max_s: stop early after this many seconds (at least 20 calls are timed), so a
        backend that stalls on a loaded machine cannot hold the run for long.
    """
    m = len(obs["state"])
    batches = [{k: obs[k][i : i + 1] for k in INPUT_NAMES} for i in range(min(m, n + warmup))]
    for i in range(warmup):
        policy.forward(batches[i % len(batches)])
    out: list[float] = []
    pc = time.perf_counter
    start = pc()
    for i in range(n):
        b = batches[(warmup + i) % len(batches)]
        t0 = pc()
        policy.forward(b)
        t1 = pc()
        out.append(t1 - t0)
        if t1 - start > max_s and len(out) >= 20:
            break
    return out
