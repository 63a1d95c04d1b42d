"""Progress without a terminal, and the warning when work runs far below its speed."""

from __future__ import annotations

import io
import logging

from inspector.progress import ProgressLine, SpeedWatch, bar_wanted, duration, track


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_line_every_interval_with_rate_eta_and_the_last_figure(caplog):
    clock = Clock()
    line = ProgressLine("train run1", 1000, "steps", every=30, clock=clock)
    with caplog.at_level(logging.INFO, "inspector.progress"):
        clock.t = 10
        assert line.update(100) is None  # not yet: the interval has not passed
        clock.t = 31
        text = line.update(310, "acc 0.81")
    assert text == "train run1: 310/1,000 steps (31%), 10 steps/s, ETA 69 s, 31 s so far; acc 0.81"
    assert caplog.messages == [text]
    clock.t = 40
    assert line.update(400) is None
    assert line.finish().startswith("train run1: 400/1,000 steps (40%)")


def test_no_bar_without_a_terminal_or_with_no_progress():
    assert not bar_wanted(True, io.StringIO())
    assert not bar_wanted(False, io.StringIO())


def test_track_yields_every_item_and_logs_lines_without_a_terminal(caplog, monkeypatch):
    monkeypatch.setenv("INSPECTOR_PROGRESS_INTERVAL", "0")
    with caplog.at_level(logging.INFO, "inspector.progress"):
        got = list(track(range(3), "import voc", unit="frames", progress=False))
    assert got == [0, 1, 2]
    assert caplog.messages[0].startswith("import voc: 1/3 frames (33%)")
    assert caplog.messages[-1].endswith("(done)")


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (4, 600, 7500)] == ["4 s", "10 min", "2 h 05 min"]


def test_a_slow_stretch_is_warned_once_with_the_cause_and_the_fix(caplog):
    load = [1.0]
    watch = SpeedWatch(window=30, cores=2, threads=1, loadavg=lambda: load[0])
    with caplog.at_level(logging.WARNING, "inspector.progress"):
        assert watch.add(370 * 30, 30) is None  # the first chunk: the speed it can reach
        load[0] = 16.0
        msg = watch.add(10 * 30, 30)
        assert watch.add(9 * 30, 30) is None  # the same stretch: no spam
    assert "training runs at 10.0 steps/s, 3% of the 370 steps/s" in msg
    assert "load average is 16.0 on 2 core(s): other jobs share these cores" in msg
    assert "give it cores of its own" in msg and "--threads" not in msg  # it has one thread
    assert caplog.messages == [msg]
    load[0] = 1.0
    assert watch.add(360 * 30, 30) is None  # back to speed: the stretch ends
    assert watch.add(20 * 30, 30) is not None  # a new stretch gets its own warning


def test_oversubscribed_pools_are_named_when_the_machine_is_not_loaded():
    watch = SpeedWatch(window=1, cores=2, threads=2, processes=5, loadavg=lambda: 1.0)
    watch.chunk(400.0)
    msg = watch.chunk(50.0)
    assert "5 process(es) x 2 thread(s) oversubscribe 2 core(s)" in msg
    assert "fewer threads (--threads 1 or INSPECTOR_THREADS=1; now 2 per process)" in msg


def test_a_start_on_busy_cores_is_said_at_once():
    watch = SpeedWatch(window=1, cores=2, threads=1, loadavg=lambda: 9.0)
    watch.chunk(10.0)
    assert len(watch.warnings) == 1 and "started at 10.0 steps/s" in watch.warnings[0]
