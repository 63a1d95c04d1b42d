"""Where a run's CPU time goes: seconds of this process's CPU (user + system) by phase.

``train`` adds each finished phase to ``OUT/phases.json`` (perception pretraining,
cloning, supervised distillation, PPO, val checks, calibration, evaluation), summed over
the attempts of a resumed run; report.json carries it as ``cpu_s_by_phase``. PPO is counted at every
checkpoint, so a killed attempt loses at most the time since its last one; other phases
an attempt was killed in are not counted (``attempts.json`` of a member has every
attempt's total).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

from inspector.files import write_atomic

FILE = "phases.json"
#: The phases, in the order a run goes through them.
PHASES = (
    "perception",
    "cloning",
    "distillation",
    "ppo",
    "val_checks",
    "calibration",
    "evaluation",
)


class PhaseClock:
    """CPU seconds by phase, written to ``out/phases.json`` as each phase ends.

    :param out: the run directory.
    :param fresh: a new run: forget what an earlier run there counted.
    """

    def __init__(self, out: Path, fresh: bool = True) -> None:
        self.path = Path(out) / FILE
        self.seconds: dict[str, float] = {}
        self._open: list | None = None  # [name, CPU at its start, counted at its start]
        if not fresh and self.path.is_file():
            try:
                doc = json.loads(self.path.read_text())
                self.seconds = {
                    k: float(v) for k, v in doc.items() if k in PHASES and float(v) >= 0
                }
            except (OSError, ValueError, TypeError, AttributeError):
                self.seconds = {}

    def add(self, phase: str, seconds: float) -> None:
        """Count ``seconds`` of CPU to ``phase`` and save."""
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + max(0.0, seconds), 2)
        write_atomic(self.path, json.dumps(self.seconds, indent=1) + "\n")

    def get(self, phase: str) -> float:
        """The CPU seconds counted to ``phase`` so far."""
        return self.seconds.get(phase, 0.0)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Count the CPU time of the block to ``name`` (less what nested phases count)."""
        outer = self._open
        self._open = [name, time.process_time(), sum(self.seconds.values())]
        try:
            yield
        finally:
            self.flush()
            self._open = outer  # it goes on; what this one counted is not its time

    def flush(self) -> None:
        """Count the open phase's time so far (a kill after this loses none of it)."""
        if self._open is None:
            return
        name, t0, inner0 = self._open
        now = time.process_time()
        nested = sum(self.seconds.values()) - inner0
        self.add(name, now - t0 - nested)
        self._open[1], self._open[2] = now, sum(self.seconds.values())
