"""Operator console: station parts/s with two console clients connected, and update latency.

Two stations run in this process on the synthetic camera with the same exported ONNX
policy, results kept in memory (no outbox, no MQTT: the station at its fastest, so the
console's share is as large as it can be) and footage off:

* ``without console``;
* ``console + 2 clients``: the console serving two clients, each a separate process
  that reads the event stream and fetches the newest part's frame five times a second
  (what the page does: it redraws at most every 200 ms).

The two run interleaved, in blocks of ``--parts`` steps, ``--rounds`` times; the ratio
is the median rate with the console over the median rate without (goal: >= 0.9). The
clients record, for every part, the time from the station handing it to the console
to the client reading it (same clock: one machine).

Then a paced station (``--fps`` parts/s, a line's pace) serves a real page in headless
Chromium for ``--seconds``: the page records the same latency for every part it
receives (``window.inspectorConsole.latencies``), and screenshots of the page are
written to docs/ (``--screenshots``).

Run: ``python -m benchmarks.speed.console [--quick] [--model M.onnx] [--rounds R]
[--parts N] [--size PX] [--fps F] [--seconds S] [--screenshots]``. Without ``--model`` a
tiny model is trained and exported first (about a minute).
"""

from __future__ import annotations

import http.client
import io
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import ROOT, load_average, parser, table, write_section
from benchmarks.speed.common import MemoryReporter, build_model
from inspector import CameraDriver
from inspector.station.config import (
    CameraSection,
    ModelSection,
    MqttSection,
    OutboxSection,
    StationConfig,
)
from inspector.station.console.config import ConsoleSection
from inspector.station.loop import Station

WITHOUT, WITH = "without console", "console + 2 clients"


class Paced(CameraDriver):
    """The synthetic panels at ``fps`` frames a second."""

    def __init__(self, fps: float, params: dict[str, Any]) -> None:
        super().__init__()
        from inspector.camera import open_camera

        self.inner = open_camera("synthetic", {**params, "seed": 11})
        self.period = 1.0 / fps

    def frames(self) -> Any:
        nxt = time.monotonic()
        for f in self.inner.frames():
            nxt += self.period
            time.sleep(max(0.0, nxt - time.monotonic()))
            yield f


def config(
    model: Path, folder: Path, params: dict[str, Any], console: bool, name: str
) -> StationConfig:
    """A station on the synthetic camera; the console on a free loopback port when asked."""
    return StationConfig(
        station_id=name,
        camera=CameraSection(driver="synthetic", params={**params, "seed": 5}),
        model=ModelSection(path=str(model)),
        mqtt=MqttSection(enabled=False),
        outbox=OutboxSection(path=str(folder / f"{name}-outbox.sqlite"), synchronous="NORMAL"),
        status_interval=3600.0,
        console=ConsoleSection(enabled=console, port=0, store=str(folder / f"{name}-store")),
    )


# -- the clients (separate processes) ---------------------------------------------------
def client(url: str, out: Path, frame_every: float = 0.2) -> None:
    """Read the event stream, fetch the newest frame every ``frame_every`` s, until the
    stream ends; write the latencies (seconds) to ``out``."""
    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    lat: list[float] = []
    newest: list[str] = []
    done = threading.Event()

    def frames() -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        while not done.wait(frame_every):
            if newest:
                try:
                    conn.request("GET", f"/frame/{newest[-1]}.jpg")
                    conn.getresponse().read()
                except (OSError, http.client.HTTPException):
                    conn = http.client.HTTPConnection(host, int(port), timeout=10)

    threading.Thread(target=frames, daemon=True).start()
    conn = http.client.HTTPConnection(host, int(port), timeout=None)
    conn.request("GET", "/events")
    resp = conn.getresponse()
    event = None
    try:
        while True:
            line = resp.readline()
            if not line:
                break
            if line.startswith(b"event: "):
                event = line[7:].strip()
            elif line.startswith(b"data: ") and event == b"parts":
                now = time.time()
                parts = json.loads(line[6:])
                lat.extend(now - p["offered_at"] for p in parts)
                if parts:
                    newest.append(parts[-1]["id"])
                    del newest[:-1]
            if len(lat) % 200 == 0 and lat:
                out.write_text(json.dumps(lat))
    except (OSError, http.client.HTTPException):
        pass
    done.set()
    out.write_text(json.dumps(lat))


# -- the throughput comparison -------------------------------------------------------------
def block(st: Station, parts: int, cpu: dict[str, list[float]] | None = None) -> float:
    """Run ``parts`` steps; parts per second. With ``cpu``, also record the CPU ms per part
    of the station's loop thread (``loop``) and of the whole process (``process``: the
    console's thread included, the clients' processes not)."""
    t0, th0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    for _ in range(parts):
        st.step()
    wall = time.perf_counter() - t0
    if cpu is not None:
        cpu["loop"].append(1e3 * (time.thread_time() - th0) / parts)
        cpu["process"].append(1e3 * (time.process_time() - p0) / parts)
    return parts / wall


def throughput(model: Path, folder: Path, args: Any) -> dict[str, Any]:
    """Interleaved blocks of both stations; the clients' latencies."""
    base = Station(config(model, folder, args.params, False, "plain"), reporter=MemoryReporter(),
                   out=io.StringIO())  # fmt: skip
    cons = Station(config(model, folder, args.params, True, "console"),
                   reporter=MemoryReporter(), out=io.StringIO())  # fmt: skip
    base.start()
    cons.start()
    procs, outs = [], []
    for i in range(2):
        outs.append(folder / f"client{i}.json")
        procs.append(subprocess.Popen([sys.executable, "-m", "benchmarks.speed.console",
                                       "--client", cons.console.url, "--client-out",
                                       str(outs[-1])], cwd=ROOT))  # fmt: skip
    deadline = time.monotonic() + 30
    while len(cons.console.hub.clients) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    if len(cons.console.hub.clients) < 2:
        raise SystemExit("the console clients did not connect")
    rates: dict[str, list[float]] = {WITHOUT: [], WITH: []}
    cpu = {k: {"loop": [], "process": []} for k in rates}
    try:
        block(base, args.parts // 4)  # warm-up: sessions, caches, the console's first frames
        block(cons, args.parts // 4)
        for r in range(args.rounds):
            order = [(WITHOUT, base), (WITH, cons)]
            for name, st in order if r % 2 == 0 else order[::-1]:
                rates[name].append(block(st, args.parts, cpu[name]))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()),
                  flush=True)  # fmt: skip
        skipped = cons.console.hub.offered - cons.console.hub.taken
    finally:
        base.close()
        cons.close()  # ends the event streams: the clients write their latencies and exit
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
    lat = [x for o in outs if o.is_file() for x in json.loads(o.read_text())]
    med = {k: float(np.median(v)) for k, v in rates.items()}
    paired = [w / o for w, o in zip(rates[WITH], rates[WITHOUT])]
    return {"rates": rates, "median": med, "ratio": med[WITH] / med[WITHOUT],
            "paired": float(np.median(paired)),
            "cpu_ms": {k: {w: float(np.median(v)) for w, v in c.items()} for k, c in cpu.items()},
            "client_latency_s": lat, "skipped": int(skipped)}  # fmt: skip


# -- the page in a browser -------------------------------------------------------------------
def browser(model: Path, folder: Path, args: Any) -> dict[str, Any]:
    """A paced station and its page in headless Chromium: latencies and screenshots."""
    from selenium import webdriver
    from selenium.webdriver.common.by import By

    cfg = config(model, folder, args.params, True, "line1")
    cfg.console.parts = 80
    st = Station(cfg, camera_factory=lambda: Paced(args.fps, args.params), out=io.StringIO())
    st.start()
    t = threading.Thread(target=st.run, daemon=True)
    t.start()
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1250", "--force-device-scale-factor=1"):  # fmt: skip
        opts.add_argument(a)
    opts.binary_location = "/usr/bin/chromium"
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService("/usr/bin/chromedriver"))
    shots = []
    try:
        drv.get(st.console.url)
        time.sleep(args.seconds)
        lat = drv.execute_script("return window.inspectorConsole.latencies")
        if args.screenshots:
            drv.find_element(By.ID, "operator").send_keys("alice")
            path = ROOT / "docs" / "console.png"
            drv.save_screenshot(str(path))
            shots.append(path)
            # Hold a part from the review queue and correct it, as an operator would.
            drv.find_element(By.ID, "follow").click()
            held = drv.execute_script(
                "const r = document.querySelector('#review tr.part'); if (r) r.click(); return !!r"
            )
            time.sleep(0.5)
            if held:
                drv.execute_script(
                    "const b = document.querySelector('#sel-buttons button.fb:not(.confirm)');"
                    "if (b) b.click();"
                )
                time.sleep(1.5)
                path = ROOT / "docs" / "console-review.png"
                drv.save_screenshot(str(path))
                shots.append(path)
        parts = st.metrics.parts
    finally:
        drv.quit()
        st.request_stop()
        t.join(30)
    return {"page_latency_s": lat, "parts": parts, "screenshots": [str(p) for p in shots]}


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) * 1e3 if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.client:
        client(args.client, args.client_out)
        return 0
    if args.quick:
        args.rounds, args.parts, args.seconds = 2, 200, 10.0
    from inspector.camera import parse_params

    args.params = {"size": args.size, **parse_params(args.param)}
    load0 = load_average()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        folder = Path(tmp)
        model = args.model or build_model(folder / "model")
        tp = throughput(model, folder, args)
        br = browser(model, folder, args)
    load1 = load_average()
    body = report(tp, br, args, load0, load1)
    print(body)
    if not args.no_write:
        cmd = " ".join(["python -m benchmarks.speed.console", *(argv or sys.argv[1:])])
        write_section("console", "Operator console", body, command=cmd, doc=args.doc)
    return 0


def _parser() -> Any:
    """The command line (the harness's own flags and this benchmark's)."""
    ap = parser(__doc__, quick="2 rounds of 200 parts, 10 s in the browser")
    ap.add_argument("--model", type=Path, help="an exported .onnx (default: train a tiny one)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--parts", type=int, default=400, help="parts per block")
    ap.add_argument("--size", type=int, default=256, help="synthetic frame side in pixels")
    ap.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE",
        help="another synthetic camera parameter (the model's training camera, e.g. "
        "invisible_at=32)",
    )  # fmt: skip
    ap.add_argument("--fps", type=float, default=30.0, help="the paced station's parts/s")
    ap.add_argument("--seconds", type=float, default=30.0, help="time in the browser")
    ap.add_argument("--screenshots", action="store_true", help="write docs/console*.png")
    ap.add_argument("--client", help=argparse_hidden())
    ap.add_argument("--client-out", type=Path, help=argparse_hidden())
    return ap


def report(tp: dict, br: dict, args: Any, load0: float, load1: float) -> str:
    """The report section: throughput with and without the console, update latency.

    :param tp: :func:`throughput`'s figures; ``br``: :func:`browser`'s.
    :param load0: the load average before the runs; ``load1``: after.
    """
    cl, pl = tp["client_latency_s"], br["page_latency_s"]
    c = tp["cpu_ms"]
    rows = [[k, f"{tp['median'][k]:.1f}", f"{c[k]['loop']:.2f}", f"{c[k]['process']:.2f}",
             " ".join(f"{r:.0f}" for r in tp["rates"][k])] for k in (WITHOUT, WITH)]  # fmt: skip
    body = (
        f"Synthetic {args.size}x{args.size} panels "
        f"({', '.join(f'{k}={v}' for k, v in args.params.items())}), the model "
        f"`{args.model.name if args.model else 'tiny (256 steps)'}`, results in memory, "
        f"footage off; {args.rounds} interleaved rounds of {args.parts} parts; load average "
        f"{load0:.1f} before, {load1:.1f} after (2 cores shared with other work).\n\n"
        + table(
            [
                "station",
                "parts/s (median)",
                "loop CPU ms/part",
                "process CPU ms/part",
                "parts/s of each block",
            ],
            rows,
        )  # fmt: skip
        + f"\nWith two console clients connected the station keeps "
        f"**{tp['ratio']:.2f}x** its rate without a console (ratio of the medians; the "
        f"median of the per-round ratios is {tp['paired']:.2f}x; goal >= 0.9x). CPU per part "
        f"(medians; less sensitive to the machine's load than the rates): the loop's own "
        f"thread {c[WITH]['loop'] / c[WITHOUT]['loop']:.2f}x, the whole process with the "
        f"console's thread {c[WITH]['process'] / c[WITHOUT]['process']:.2f}x. The console "
        f"skipped {tp['skipped']} of the offered parts (its queue drops the oldest when it "
        "falls behind; the station never waits).\n\n"
        + table(
            ["update latency, part handed over -> received", "parts", "p50 ms", "p99 ms"],
            [
                [
                    "2 stream clients, station at full speed",
                    len(cl),
                    f"{pct(cl, 50):.1f}",
                    f"{pct(cl, 99):.1f}",
                ],
                [
                    f"the page in headless Chromium, station at {args.fps:g} parts/s",
                    len(pl),
                    f"{pct(pl, 50):.1f}",
                    f"{pct(pl, 99):.1f}",
                ],
            ],
        )  # fmt: skip
        + "\nLoopback, one machine (one clock). The console batches parts at most 25 times "
        "a second, so part of the latency is that batching.\n"
    )
    return body


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
