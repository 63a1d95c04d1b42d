"""Helpers of the ``train --members`` tests: the command, waiting, a member's progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
TINY = ROOT / "tests" / "data" / "members_tiny.yaml"
#: a member's steps: enough rollouts (128 steps each) that a checkpoint comes well before
#: the end, so a kill after the first checkpoint lands mid-run.
MEMBER_STEPS = 512
#: the student's steps (12 supervised distillation rounds of 32, a checkpoint after each: a kill
#: after the first checkpoint lands mid-run)
DISTILL_STEPS = 384


def train_args(out: Path, *extra: str) -> list[str]:
    """``main.py train --members 2`` at the tiny scale into ``out``."""
    return [
        PY,
        str(ROOT / "main.py"),
        "train",
        "--profile",
        "reward_profiles/lcd_panel.yaml",
        "--camera",
        "synthetic",
        "--timesteps",
        str(MEMBER_STEPS),
        "--out",
        str(out),
        "--config",
        str(TINY),
        "--members",
        "2",
        "--distill-timesteps",
        str(DISTILL_STEPS),
        "--no-progress",
        *extra,
    ]


def env(**extra: str) -> dict[str, str]:
    """The test's environment: one thread per process, no cluster from outside."""
    e = dict(os.environ, OMP_NUM_THREADS="1", **extra)
    e.pop("RAY_ADDRESS", None)
    return e


def wait_for(
    pred: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen | None = None
) -> Any:
    """Poll ``pred`` until it is truthy; fail after ``timeout`` s or when ``proc`` exits."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def latest_step(run: Path) -> int:
    """The step of a run's latest checkpoint (0: none yet)."""
    try:
        return int(json.loads((run / "checkpoints" / "latest.json").read_text())["num_timesteps"])
    except (OSError, ValueError, KeyError):
        return 0


def attempts(run: Path) -> list[dict]:
    """A member's attempts.json (empty before its first attempt)."""
    try:
        return json.loads((run / "attempts.json").read_text())
    except (OSError, ValueError):
        return []


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())
