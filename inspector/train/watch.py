"""What a training run tells its user while it runs: a bar or progress lines, and a
warning when it runs far below its speed.

:func:`progress_callback` is an SB3 callback for :func:`inspector.train.runner.train_run`:

* with a terminal (and without ``--no-progress``) a tqdm bar; otherwise a progress line
  every 30 s (:class:`inspector.progress.ProgressLine`), also written to the run's
  ``progress.json``, which the ``train --members`` parent reads for its own lines;
* a :class:`inspector.progress.SpeedWatch` over the time the run spends stepping its
  environments and updating the network (evaluations and checkpoints excluded): a
  stretch far below the best speed of the run gets one warning naming the likely cause.

It must come first in the callback list: its rollout-start hook then runs before the
checks and checkpoints of the others, so their time does not count as training.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inspector.files import write_atomic
from inspector.progress import ProgressLine, SpeedWatch, bar_wanted, duration, interval

log = logging.getLogger("inspector.progress")

#: A run directory's progress file (written with each progress line).
PROGRESS_FILE = "progress.json"


def progress_callback(
    out: Path, total: int, progress: bool, *, what: str | None = None, processes: int = 1
) -> Any:
    """The SB3 callback of a training run (see the module docstring).

    :param out: the run directory (``progress.json`` goes there).
    :param total: the step count at the end.
    :param progress: False (``--no-progress``): lines, never a bar.
    :param what: the lines' first words (default ``train <run folder name>``).
    :param processes: processes sharing the cores (SubprocVecEnv workers + this one).
    """
    from stable_baselines3.common.callbacks import BaseCallback

    what = what or f"train {Path(out).name}"

    class ProgressCallback(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.recent: deque[float] = deque(maxlen=200)
            self.bar: Any = None
            self.line: ProgressLine | None = None
            self.watch = SpeedWatch("training", "steps", processes=processes)
            self.t_step: float | None = None
            self.t_rollout_end: float | None = None

        def _figure(self) -> str:
            return f"acc {sum(self.recent) / len(self.recent):.2f}" if self.recent else ""

        def _on_training_start(self) -> None:
            if bar_wanted(progress):
                from tqdm import tqdm

                self.bar = tqdm(total=total, initial=self.num_timesteps, unit="step", ncols=100)
            else:
                self.line = ProgressLine(what, total, "steps", start=self.num_timesteps)

        def _on_rollout_start(self) -> None:
            now = time.monotonic()
            if self.t_rollout_end is not None:  # the PPO update of the last rollout
                self.watch.add(0, now - self.t_rollout_end)
            self.t_step = None

        def _on_step(self) -> bool:
            now = time.monotonic()
            if self.t_step is not None:  # the first step's time may hold others' checks
                self.watch.add(self.training_env.num_envs, now - self.t_step)
            self.t_step = now
            for info in self.locals.get("infos", []):
                if "correct" in info and "steps" in info:
                    self.recent.append(float(info["correct"]))
            if self.bar is not None:
                self.bar.n = self.num_timesteps
                self.bar.set_postfix_str(self._figure(), refresh=False)
                self.bar.update(0)
            elif self.line is not None and self.line.update(self.num_timesteps, self._figure()):
                write_progress(out, self.line, self.num_timesteps, self._figure(), self._slow())
            return True

        def _slow(self) -> str | None:
            return self.watch.warnings[-1] if self.watch.slow and self.watch.warnings else None

        def _on_rollout_end(self) -> None:
            self.t_rollout_end = time.monotonic()

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()
            elif self.line is not None:
                self.line.done = self.num_timesteps
                self.line.finish(self._figure())
                write_progress(out, self.line, self.num_timesteps, self._figure(), finished=True)

    return ProgressCallback()


def write_progress(
    out: Path,
    line: ProgressLine,
    done: int,
    figure: str,
    slow: str | None = None,
    *,
    finished: bool = False,
) -> None:
    """``out/progress.json``: steps done of the total, steps/s, the figure, the time, and
    the speed warning of a slow stretch (``slow``; null when the run is at speed)."""
    elapsed = line.clock() - line.t0
    doc = {
        "done": int(done),
        "total": line.total,
        "steps_per_s": round((done - line.n0) / elapsed, 2) if elapsed > 0 else None,
        "figure": figure,
        "finished": finished,
        "slow": slow,
        "time": time.time(),
    }
    try:
        write_atomic(out / PROGRESS_FILE, json.dumps(doc))
    except OSError:  # progress is for people; never stop a run for it
        pass


def members_line(runs: Sequence[Path]) -> str:
    """One line on the runs of ``train --members`` from their ``progress.json`` files."""
    parts = []
    for run in runs:
        try:
            doc = json.loads((Path(run) / PROGRESS_FILE).read_text())
        except (OSError, ValueError):
            parts.append(f"{Path(run).name} starting")
            continue
        if doc.get("finished"):
            parts.append(f"{Path(run).name} done")
            continue
        done, total, rate = doc.get("done", 0), doc.get("total"), doc.get("steps_per_s")
        text = f"{Path(run).name} {done:,}" + (f"/{total:,}" if total else "")
        if rate:
            text += f" at {rate:,.0f} steps/s"
            if total:
                text += f", ETA {duration(max(0, total - done) / rate)}"
        parts.append(text + (f", {doc['figure']}" if doc.get("figure") else ""))
    return "; ".join(parts)


class MembersProgress:
    """The ``train --members`` parent's progress line over its running members.

    A line that says what the last one said (a student's distillation writes its progress
    once a round) is not logged again until ``REPEAT`` intervals have passed: the log
    shows a heartbeat, not a page of copies.

    :param every: seconds between lines (default :func:`inspector.progress.interval`).
    :param clock: time source (tests), as :class:`inspector.progress.ProgressLine`'s.
    """

    REPEAT = 5

    def __init__(
        self, every: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every = interval() if every is None else every
        self.clock = clock
        self.last = clock()
        self.warned: dict[str, str] = {}
        self.said: tuple[str, float] = ("", 0.0)

    def poll(self, runs: Sequence[Path]) -> str | None:
        """Log a line on ``runs`` when the interval has passed and it says something new
        (or the last one is ``REPEAT`` intervals old), and once each member's new speed
        warning (it is in the member's own train.log); return the line logged."""
        now = self.clock()
        if not runs or now - self.last < self.every:
            return None
        self.last = now
        for run in runs:
            try:
                slow = json.loads((Path(run) / PROGRESS_FILE).read_text()).get("slow")
            except (OSError, ValueError, AttributeError):
                continue
            if slow and self.warned.get(str(run)) != slow:
                log.warning("member %s: %s", Path(run).name, slow)
            self.warned[str(run)] = slow or ""
        line = "members: " + members_line(runs)
        if line == self.said[0] and now - self.said[1] < self.REPEAT * self.every:
            return None
        self.said = (line, now)
        log.info("%s", line)
        return line
