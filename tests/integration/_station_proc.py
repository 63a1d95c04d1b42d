"""Helpers of the station tests: write a station YAML, run ``inspector run`` as a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]


def station_yaml(
    folder: Path, model: Path, *, station: str = "st1", port: int | None = None, **overrides: Any
) -> Path:
    """Write a station config for the synthetic camera (128 px) and return its path.

    :param overrides: top-level sections merged over the defaults (dicts are merged one
        level deep, so ``mqtt={"username": "x"}`` keeps host and port).
    """
    folder.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "station_id": station,
        "camera": {"driver": "synthetic", "params": {"size": 128, "seed": 1}},
        "model": {"path": str(model)},
        "profile": str(REPO / "reward_profiles" / "lcd_panel.yaml"),
        "mqtt": {
            "enabled": port is not None,
            "host": "127.0.0.1",
            "port": port,
            "reconnect_min_delay": 0.1,
            "reconnect_max_delay": 0.5,
        },
        # NORMAL survives the death of the process (what these tests do to it), and
        # keeps the tests off one fsync per part.
        "outbox": {
            "path": str(folder / "outbox.sqlite"),
            "synchronous": "NORMAL",
            "flush_timeout_s": 15.0,
        },  # fmt: skip
        "results_jsonl": str(folder / "results.jsonl"),
        "status_interval": 0.5,
        "log_level": "INFO",
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    path = folder / "station.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class StationProc:
    """``python main.py run --config CFG ARGS...`` with its output in ``folder/station.log``."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log_path = config.parent / f"station-{time.monotonic_ns()}.log"
        full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
        with open(self.log_path, "wb") as logf:
            self.proc = subprocess.Popen(
                [sys.executable, str(REPO / "main.py"), "run", "--config", str(config), *args],
                cwd=REPO,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=full_env,
            )

    def wait(self, timeout: float = 60.0) -> int:
        """Exit status (kills the process and fails loudly after ``timeout``)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"station did not exit in {timeout} s:\n{self.text()}") from None

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig``."""
        self.proc.send_signal(sig)

    def text(self) -> str:
        """What the station printed (banner, status lines, log)."""
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """Kill it if still running (teardown)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def committed(jsonl: Path) -> list[dict]:
    """Results the station committed (its ``results_jsonl``), skipping a torn last line."""
    if not jsonl.exists():
        return []
    out = []
    for line in jsonl.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a SIGKILL mid-write
    return out


def first_copies(docs: list[dict]) -> list[dict]:
    """Receiver-side de-duplication by id, keeping the first copy (docs/mqtt.md)."""
    seen: set[str] = set()
    out = []
    for d in docs:
        if d["id"] not in seen:
            seen.add(d["id"])
            out.append(d)
    return out
