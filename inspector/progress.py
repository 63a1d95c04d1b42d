"""Progress that reaches a user with or without a terminal.

With a terminal a tqdm bar is drawn. With ``--no-progress``, or when stderr is not a
terminal (a log file, a service, CI), nothing is redrawn; instead a progress line is
logged at a steady interval (``INSPECTOR_PROGRESS_INTERVAL`` seconds, default 30):
what runs, done/total, rate, ETA and the last figure, e.g.

    train: 12,288/150,000 steps (8%), 371 steps/s, ETA 6 min; acc 0.81

The lines go to the logger ``inspector.progress`` at INFO, which the CLI shows at its
default log level.

:class:`SpeedWatch` says when work runs far below the speed it reached before (other
jobs on the cores, oversubscribed thread pools), once per slow stretch.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

log = logging.getLogger("inspector.progress")

#: Seconds between progress lines when no bar is drawn (``INSPECTOR_PROGRESS_INTERVAL``).
DEFAULT_INTERVAL = 30.0

T = TypeVar("T")


def interval() -> float:
    """Seconds between progress lines: ``INSPECTOR_PROGRESS_INTERVAL`` or 30."""
    try:
        v = float(os.environ.get("INSPECTOR_PROGRESS_INTERVAL", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return v if v >= 0 else DEFAULT_INTERVAL


def bar_wanted(progress: bool, stream: Any = None) -> bool:
    """Whether to draw a bar: progress is on and the stream (stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(progress) and stream.isatty()
    except (AttributeError, ValueError):
        return False


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2 h 05 min``."""
    if seconds != seconds or seconds == float("inf"):
        return "unknown"
    s = max(0, int(round(seconds)))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{round(s / 60)} min"
    return f"{s // 3600} h {(s % 3600) // 60:02d} min"


class ProgressLine:
    """Logs a progress line every :func:`interval` seconds of :meth:`update` calls.

    :param what: what runs (``train``, ``eval``, ``member m1``).
    :param total: the count at the end (None: unknown, no ETA).
    :param unit: what is counted (``steps``, ``parts``, ``frames``).
    :param start: the count already done (a resumed run): rates count from here.
    :param every: seconds between lines (default :func:`interval`).
    :param clock: time source (tests).
    :param logger: where the lines go.
    """

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str = "steps",
        *,
        start: int = 0,
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        logger: logging.Logger | None = None,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.every = interval() if every is None else every
        self.clock = clock
        self.log = logger or log
        self.t0 = self.last = clock()
        self.n0 = self.done = start
        self.lines = 0

    def format(self, done: int, figure: str = "") -> str:
        """The line for ``done`` now (rate and ETA since the start)."""
        elapsed = self.clock() - self.t0
        rate = (done - self.n0) / elapsed if elapsed > 0 else 0.0
        text = f"{self.what}: {done:,}"
        if self.total:
            text += f"/{self.total:,} {self.unit} ({100.0 * done / self.total:.0f}%)"
        else:
            text += f" {self.unit}"
        text += f", {rate:,.1f} {self.unit}/s" if rate < 10 else f", {rate:,.0f} {self.unit}/s"
        if self.total and rate > 0:
            text += f", ETA {duration(max(0, self.total - done) / rate)}"
        text += f", {duration(elapsed)} so far"
        return text + (f"; {figure}" if figure else "")

    def update(self, done: int, figure: str = "") -> str | None:
        """Note progress; log a line when the interval has passed. Returns it when logged.

        :param done: the count so far.
        :param figure: the last figure worth showing (``acc 0.81``).
        """
        self.done = done
        now = self.clock()
        if now - self.last < self.every:
            return None
        self.last = now
        line = self.format(done, figure)
        self.log.info("%s", line)
        self.lines += 1
        return line

    def finish(self, figure: str = "") -> str:
        """Log the last line (always) and return it."""
        line = self.format(self.done, figure)
        self.log.info("%s (done)", line)
        return line


def track(
    items: Iterable[T],
    what: str,
    *,
    total: int | None = None,
    unit: str = "frames",
    progress: bool = True,
    min_items: int = 0,
) -> Iterator[T]:
    """Iterate ``items`` with a tqdm bar on a terminal, else with progress lines.

    :param what: what runs (the bar's description, the lines' first word).
    :param total: how many (default ``len(items)`` when it has one).
    :param unit: what is counted.
    :param progress: False (``--no-progress``): never a bar, lines only.
    :param min_items: fewer items than this: neither bar nor lines.
    """
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if total is not None and total < min_items:
        yield from items
        return
    if bar_wanted(progress):
        from tqdm import tqdm

        yield from tqdm(items, desc=what, total=total, unit=unit.rstrip("s"), ncols=100)
        return
    line = ProgressLine(what, total, unit)
    n = 0
    for n, item in enumerate(items, 1):  # noqa: B007 (n is read after the loop)
        yield item
        line.update(n)
    if line.lines:
        line.done = n
        line.finish()


class SpeedWatch:
    """Says when work runs far below the speed it reached before, once per slow stretch.

    Feed it work as it happens (:meth:`add`: units done in so many busy seconds). Every
    ``window`` busy seconds it closes a chunk: the best chunk so far is the speed the
    work can reach; a chunk below ``fraction`` of it starts a slow stretch, which gets
    one warning naming the likely cause (the load average against the cores, the
    thread pools) and the fix. A chunk back above the fraction ends the stretch.

    :param what: what runs (``training``).
    :param unit: what is counted (``steps``).
    :param fraction: a chunk slower than this share of the best one is slow.
    :param window: busy seconds per chunk.
    :param cores: the cores the process may use (default: its affinity).
    :param threads: the process's threads per library pool (default: the product's).
    :param processes: processes of this run sharing the cores (SubprocVecEnv workers).
    :param loadavg: the 1-minute load average (tests).
    :param logger: where the warning goes.
    """

    def __init__(
        self,
        what: str = "training",
        unit: str = "steps",
        *,
        fraction: float = 0.25,
        window: float = 30.0,
        cores: int | None = None,
        threads: int | None = None,
        processes: int = 1,
        loadavg: Callable[[], float] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        from inspector.threads import available_cores, current

        self.what, self.unit = what, unit
        self.fraction, self.window = fraction, window
        self.cores = cores or available_cores()
        self.threads = threads or current()
        self.processes = max(1, processes)
        self.loadavg = loadavg or (lambda: os.getloadavg()[0])
        self.log = logger or logging.getLogger("inspector.progress")
        self.best = 0.0
        self.slow = False
        self.warnings: list[str] = []
        self._units = 0.0
        self._secs = 0.0

    def add(self, units: float, seconds: float) -> str | None:
        """Count ``units`` done in ``seconds`` of work; returns a warning when one is given."""
        self._units += units
        self._secs += max(0.0, seconds)
        if self._secs < self.window:
            return None
        rate = self._units / self._secs if self._secs > 0 else 0.0
        self._units = self._secs = 0.0
        return self.chunk(rate)

    def chunk(self, rate: float) -> str | None:
        """A closed chunk ran at ``rate``: update the best speed, warn on a new slow stretch."""
        if self.best == 0.0:
            self._busy_start(rate)
        if rate >= self.fraction * self.best:
            self.slow = False
            self.best = max(self.best, rate)
            return None
        if self.slow:
            return None
        self.slow = True
        msg = self.message(rate)
        self.warnings.append(msg)
        self.log.warning("%s", msg)
        return msg

    def _busy_start(self, rate: float) -> None:
        """The first chunk is the reference: say so when the cores were already busy."""
        try:
            load = float(self.loadavg())
        except OSError:
            return
        own = self.threads * self.processes
        if load > 2 * self.cores and load > self.cores + own:
            msg = (
                f"{self.what} started at {rate:,.1f} {self.unit}/s with the load average at "
                f"{load:.1f} on {self.cores} core(s): other jobs share these cores, so it "
                "may run far below its speed (and no slow-down can be measured against this "
                f"start). Fix: {self.fix()}"
            )
            self.warnings.append(msg)
            self.log.warning("%s", msg)

    def message(self, rate: float) -> str:
        """The warning for a chunk at ``rate``: how slow, the likely cause, the fix."""
        try:
            load = float(self.loadavg())
        except OSError:
            load = float("nan")
        head = (
            f"{self.what} runs at {rate:,.1f} {self.unit}/s, {100.0 * rate / self.best:.0f}% "
            f"of the {self.best:,.0f} {self.unit}/s it reached earlier"
        )
        pools = self.threads * self.processes
        if load == load and load > self.cores:
            cause = (
                f"the load average is {load:.1f} on {self.cores} core(s): other jobs share "
                "these cores"
            )
        elif pools > self.cores:
            cause = (
                f"{self.processes} process(es) x {self.threads} thread(s) oversubscribe "
                f"{self.cores} core(s)"
            )
        else:
            cause = (
                f"load average {load:.1f} on {self.cores} core(s); something else slowed "
                "this process (memory pressure, CPU throttling, a slow disk)"
            )
        return f"{head}: {cause}. Fix: {self.fix()}"

    def fix(self) -> str:
        """What to do about it: cores of its own, and fewer threads when it has several."""
        text = "give it cores of its own (stop other jobs, or taskset / a cpuset)"
        if self.threads > 1:
            text += (
                f", or fewer threads (--threads 1 or INSPECTOR_THREADS=1; now {self.threads} "
                "per process)"
            )
        return text
