"""A station with its console on a free loopback port, and a headless Chromium for it.

``running_station(...)`` starts a real :class:`Station` on synthetic parts (paced, so
that the browser gets the machine's other core) in a thread; ``chromium()`` starts
Debian's chromium through chromedriver with selenium (skips, with the install
command, when either is missing: ``make test`` installs them).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from inspector import CameraDriver, Frame
from tests.integration._station_proc import station_yaml


class PacedSynthetic(CameraDriver):
    """The synthetic driver's panels at ``fps`` (a line's pace, not the CPU's)."""

    def __init__(self, fps: float = 30.0, **params: Any) -> None:
        super().__init__()
        from inspector.camera import open_camera

        self.inner = open_camera("synthetic", {"size": 128, "seed": 3, **params})
        self.period = 1.0 / fps

    def frames(self) -> Iterator[Frame]:
        nxt = time.monotonic()
        for f in self.inner.frames():
            nxt += self.period
            time.sleep(max(0.0, nxt - time.monotonic()))
            yield f


@contextlib.contextmanager
def running_station(
    folder: Path, model: Path, *, fps: float | None = 30.0, max_parts: int = 100_000, **console
) -> Iterator[Any]:
    """A started station (``station.console.url`` is the page) running in a thread."""
    from inspector.station.config import load_station_config
    from inspector.station.loop import Station

    section = {"enabled": True, "port": 0, "store": str(folder / "store"), **console}
    cfg = load_station_config(station_yaml(folder, model, station="line7", console=section))
    factory = (lambda: PacedSynthetic(fps)) if fps else None
    st = Station(cfg, camera_factory=factory, out=io.StringIO())
    st.start()
    t = threading.Thread(target=st.run, kwargs={"max_parts": max_parts}, daemon=True)
    t.start()
    try:
        yield st
    finally:
        st.request_stop()
        t.join(30)


def chromium_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[Any]:
    """A headless Chromium driven by selenium, its console log kept (``get_log``)."""
    paths = chromium_paths()
    if paths is None:
        pytest.skip("chromium and chromedriver are not installed: apt-get install chromium "
                    "chromium-driver (make test does)")  # fmt: skip
    webdriver = pytest.importorskip("selenium.webdriver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = paths[0]
    args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--disable-extensions"]  # fmt: skip
    args.append(f"--window-size={width},{height}")
    for a in args:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=paths[1])
    drv = webdriver.Chrome(options=opts, service=service)
    try:
        yield drv
    finally:
        drv.quit()


def wait_for(cond: Any, timeout: float, what: str) -> Any:
    """Poll ``cond()`` until it returns something truthy (which is returned)."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as exc:  # stale elements while the page re-renders
            last_exc = exc
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" + (f" ({last_exc})" if last_exc else ""))
