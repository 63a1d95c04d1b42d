"""``train --members 2 --ray``: a real Ray head on 127.0.0.1, a worker killed mid-member,
and the member finishing from its checkpoint on another worker."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration._members import (
    MEMBER_STEPS,
    ROOT,
    attempts,
    env,
    latest_step,
    read_json,
    train_args,
    wait_for,
)

pytest.importorskip("ray", reason="Ray is not installed: pip install 'inspector[ray]'")

#: Ray binds to the node's routable address unless told it is a one-machine cluster
#: (what it does on macOS/Windows): then every process listens on 127.0.0.1 only.
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(pgid: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp* writes them) that processes of ``pgid`` listen on."""
    inodes: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    found.append(cols[1].split(":")[0])
    return found


def _is_loopback(hex_addr: str) -> bool:
    if len(hex_addr) == 8:  # IPv4, little-endian
        return hex_addr.endswith("7F")
    # IPv6: ::1, or an IPv4-mapped 127.x address
    return hex_addr == "00000000000000000000000001000000" or (
        hex_addr.startswith("0000000000000000FFFF0000") and hex_addr.endswith("7F")
    )


@pytest.fixture
def ray_head() -> Iterator[str]:
    """A Ray head with 2 CPUs on 127.0.0.1, started for this test and killed after it."""
    port, client_port = _free_port(), _free_port()
    tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    ray_bin = Path(sys.executable).with_name("ray")
    cmd = [
        str(ray_bin) if ray_bin.exists() else "ray",
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        f"--ray-client-server-port={client_port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={tmp}",
    ]
    with open(Path(tmp) / "head.log", "wb") as log:
        head = subprocess.Popen(
            cmd, env=env(**LOOPBACK), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def gcs_up() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(gcs_up, 120, "the Ray head", head)
        yield f"127.0.0.1:{port}"
        listening = _listening(head.pid)
        assert listening and all(map(_is_loopback, listening)), listening
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_member_whose_worker_dies_finishes_from_its_checkpoint(ray_head, tmp_path):
    out = tmp_path / "run"
    log = tmp_path / "train.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            train_args(out, "--ray", ray_head),
            cwd=ROOT,
            env=env(**LOOPBACK),
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    m0 = out / "members" / "m0"
    try:
        wait_for(lambda: latest_step(m0) > 0, 300, "m0's first checkpoint", proc)
        worker = attempts(m0)[-1]["pid"]
        assert worker != proc.pid  # the member trains in a Ray worker, not in train
        os.kill(worker, signal.SIGKILL)
        rc = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc == 0, log.read_text()
    tries = attempts(m0)
    assert len(tries) == 2 and tries[0]["pid"] == worker and tries[1]["pid"] != worker
    assert tries[1]["resumed_from"] > 0 and tries[1]["finished"]
    assert latest_step(m0) == MEMBER_STEPS
    assert len(attempts(out / "members" / "m1")) == 1
    rows = [r["name"] for r in read_json(out / "members.json")["rows"]]
    assert rows == ["m0", "m1", "ensemble", "student"]
    assert (out / "student" / "model.zip").is_file()
