"""``inspector demo``: the main job end to end on the embedded synthetic camera.

train (or reuse a cached run) -> evaluate -> export to ONNX -> a station on N parts
with the ONNX backend, reporting over MQTT to a broker the demo starts on a free
loopback port (or an existing one) -> a summary table against the synthetic truth
and ``demo/report.png``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "reward_profiles" / "lcd_quadrants.yaml"
#: The demo's panels: small frames (fast on 2 cores) whose 1-px points are invisible at
#: the agent's 32-px overview, so the agent has to focus to find them; a shallow pixel
#: grid, on which the glimpse CNN sees a 1-px point at native resolution (the
#: learning-efficiency study's quadrants task).
CAMERA = {"size": 128, "invisible_at": 32, "point_size": "1,1", "grid": 0.25}
STATION_SEED = 7


@dataclass
class DemoOptions:
    """Settings of the demo (CLI flags)."""

    out: Path = Path("demo")
    timesteps: int = 2048
    bc_samples: int = 8192
    perception_samples: int = 8000
    parts: int = 200
    mqtt_host: str | None = None
    mqtt_port: int | None = None
    retrain: bool = False
    eval_episodes: int = 200
    seed: int = 0
    log: list[str] = field(default_factory=list)


def _say(msg: str) -> None:
    print(msg, flush=True)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalBroker:
    """A mosquitto on 127.0.0.1 for the demo (loopback only)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.error = ""

    def start(self) -> bool:
        """Start it; False (with ``error`` set) when no broker can be started."""
        binary = shutil.which("mosquitto") or (
            "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
        )
        if binary is None:
            self.error = "mosquitto is not installed (make demo installs it with apt-get)"
            return False
        self.port = free_port()
        conf = self.workdir / "mosquitto.conf"
        conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
        )
        log = open(self.workdir / "mosquitto.log", "w")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=log)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.error = f"mosquitto exited with status {self.proc.returncode}"
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                time.sleep(0.05)
        self.error = "mosquitto did not accept connections within 10 s"
        self.stop()
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


class Subscriber:
    """An independent MQTT subscriber counting the results that arrive (by id)."""

    def __init__(self, host: str, port: int, topic: str) -> None:
        import paho.mqtt.client as mqtt

        self.ids: set[str] = set()
        self.messages = 0
        self.ready = threading.Event()
        self.client = mqtt.Client(
            callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id="inspector-demo-sub"
        )
        self.client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *a: self.ready.set()
        self.client.on_message = self._on_message
        self.client.connect(host, port, keepalive=30)
        self.client.loop_start()

    def _on_message(self, _c: Any, _u: Any, msg: Any) -> None:
        self.messages += 1
        try:
            self.ids.add(json.loads(msg.payload)["id"])
        except (ValueError, KeyError):
            pass

    def wait_for(self, n: int, timeout: float) -> int:
        deadline = time.time() + timeout
        while len(self.ids) < n and time.time() < deadline:
            time.sleep(0.05)
        return len(self.ids)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _cache_key(opts: DemoOptions) -> str:
    h = hashlib.sha256(PROFILE.read_bytes())
    h.update(
        json.dumps(
            [CAMERA, opts.timesteps, opts.bc_samples, opts.perception_samples, 2, opts.seed]
        ).encode()
    )
    return h.hexdigest()


def train_or_reuse(opts: DemoOptions) -> Path:
    """Train the demo policy, or reuse demo/run when it was trained with the same settings."""
    from inspector.profile import load_profile
    from inspector.train.presets import resolve
    from inspector.train.runner import train_run

    run = opts.out / "run"
    key_file = run / "demo-key.txt"
    key = _cache_key(opts)
    if not opts.retrain and key_file.is_file() and key_file.read_text() == key:
        if (run / "model.zip").is_file() and (run / "report.json").is_file():
            _say(f"[1/5] reusing the trained policy in {run} (--retrain to train again)")
            return run
    if run.exists():
        shutil.rmtree(run)
    _say(
        f"[1/5] training (train's synthetic preset): perception pretraining on "
        f"{opts.perception_samples:,} crops, cloning the scripted teacher "
        f"({opts.bc_samples:,} steps), then HybridPPO ({opts.timesteps:,} steps) on synthetic "
        f"panels with {PROFILE.name}, seed {opts.seed}; the best model on held-out panels is "
        "kept and calibrated"
    )
    preset, cfg, _ = resolve("synthetic", "synthetic", load_profile(str(PROFILE)))
    cfg = cfg.replace(
        perception_samples=opts.perception_samples,
        bc_samples=opts.bc_samples,
        select_episodes=min(100, opts.eval_episodes),
        final_eval_episodes=opts.eval_episodes,
        checkpoint_interval=10**9,
        seed=opts.seed,
    )
    train_run(
        str(PROFILE),
        "synthetic",
        dict(CAMERA),
        opts.timesteps,
        run,
        cfg,
        progress=True,
        recipe={"name": preset.name, "about": preset.about},
    )
    key_file.write_text(key)
    return run


def station_yaml(opts: DemoOptions, model: Path, host: str | None, port: int | None) -> str:
    """The demo's station config (written to demo/station.yaml for the curious)."""
    mqtt = f"  enabled: true\n  host: {host}\n  port: {port}\n" if host else "  enabled: false\n"
    params = "".join(f"    {k}: {v}\n" for k, v in {**CAMERA, "seed": STATION_SEED}.items())
    return (
        "# Written by `inspector demo`.\n"
        "station_id: demo\n"
        f"camera:\n  driver: synthetic\n  params:\n{params}"
        f"model:\n  path: {model}\n"
        f"profile: {PROFILE}\n"
        f"mqtt:\n{mqtt}"
        f"outbox:\n  path: {opts.out / 'outbox.sqlite'}\n  synchronous: NORMAL\n"
        f"results_jsonl: {opts.out / 'results.jsonl'}\n"
        f"footage:\n  path: {opts.out / 'footage'}\n"
        "status_interval: 5.0\n"
        "log_level: WARNING\n"
    )


def summarise(opts: DemoOptions, results: list[dict], wall_s: float, received: int | None):
    """Rows of the summary table, against the synthetic truth of each part."""
    from inspector.camera import open_camera

    cam = open_camera("synthetic", {**CAMERA, "seed": STATION_SEED})
    truth = []
    for r in results:
        i = int(str(r["part_id"]).rsplit("-", 1)[-1])
        truth.append(cam.load(i).truth.label)
    decided = [r for r in results if r.get("error") is None]
    labels = [r["label"] for r in decided]
    tr = [t for t, r in zip(truth, results) if r.get("error") is None]
    defects = [i for i, t in enumerate(tr) if t != "ok"]
    oks = [i for i, t in enumerate(tr) if t == "ok"]
    recall = np.mean([labels[i] != "ok" for i in defects]) if defects else float("nan")
    points = [i for i, t in enumerate(tr) if t == "point"]
    point_recall = np.mean([labels[i] == "point" for i in points]) if points else float("nan")
    far = np.mean([labels[i] != "ok" for i in oks]) if oks else float("nan")
    acc = np.mean([a == b for a, b in zip(labels, tr)]) if tr else float("nan")
    lat = [r["latency_ms"] for r in decided]
    counts = {c: labels.count(c) for c in ("ok", "line", "point")}
    rows = [
        ("parts inspected", f"{len(results)} ({len(results) - len(decided)} errors)"),
        ("verdicts", ", ".join(f"{k} {v}" for k, v in counts.items())),
        ("accuracy vs synthetic truth", f"{acc:.3f}"),
        ("defect recall", f"{recall:.3f}"),
        ("point recall (1-px points, invisible in the overview)", f"{point_recall:.3f}"),
        ("false-alarm rate", f"{far:.3f}"),
        ("mean glimpses per part", f"{np.mean([r['steps'] for r in decided]):.2f}"),
        ("parts/s (station loop)", f"{len(results) / max(wall_s, 1e-9):.1f}"),
        (
            "decision latency p50 / p99",
            f"{np.percentile(lat, 50):.2f} / {np.percentile(lat, 99):.2f} ms",
        ),
    ]
    if received is not None:
        rows.append(("results received by the subscriber", f"{received} of {len(results)}"))
    else:
        rows.append(("results received by the subscriber", "no broker: results are in the outbox"))
    return rows


def report_png(opts: DemoOptions, run: Path, results: list[dict]) -> Path:
    """demo/report.png: parts with their glimpse paths and verdicts, plus one reward trace."""
    import cv2

    from inspector.camera import open_camera
    from inspector.profile import load_profile
    from inspector.report import draw_path, pyplot
    from inspector.scan import PathPoint
    from inspector.workflows.explain import plot_trace, record_episodes, redistribute_traces

    plt = pyplot()
    prof = load_profile(str(PROFILE))
    cam = open_camera("synthetic", {**CAMERA, "seed": STATION_SEED})
    picks = [r for r in results if r.get("error") is None][:12]
    fig, axes = plt.subplots(2, 6, figsize=(14, 5))
    for ax, r in zip(axes.ravel(), picks):
        i = int(str(r["part_id"]).rsplit("-", 1)[-1])
        frame = cam.load(i)
        path = [PathPoint(p["x"], p["y"], p["zoom"]) for p in r["glimpse_path"]]
        draw_path(ax, frame.gray, path, prof.scan.zoom_levels, prof.scan.glimpse)
        ok = "✓" if r["label"] == frame.truth.label else "✗"
        ax.set_title(f"{frame.truth.label} → {r['label']} {ok}", fontsize=9)
    for ax in axes.ravel()[len(picks) :]:
        ax.axis("off")
    fig.suptitle("station parts: glimpse paths (later glimpses brighter), truth → verdict")
    fig.tight_layout()
    with tempfile.TemporaryDirectory() as td:
        a, b = Path(td) / "a.png", Path(td) / "b.png"
        fig.savefig(a, dpi=80)
        plt.close(fig)
        traces = record_episodes(prof, "synthetic", dict(CAMERA), 4, seed=1, model=str(run))
        redistribute_traces(prof, traces)
        pick = next((t for t in traces if t["label"] != prof.ok_class), traces[0])
        plot_trace(prof, pick, b)
        ia, ib = cv2.imread(str(a)), cv2.imread(str(b))
        w = max(ia.shape[1], ib.shape[1])
        pad = [
            cv2.copyMakeBorder(x, 0, 0, 0, w - x.shape[1], cv2.BORDER_CONSTANT, value=(255,) * 3)
            for x in (ia, ib)
        ]
        out = opts.out / "report.png"
        cv2.imwrite(str(out), np.vstack(pad))
    return out


def run_demo(opts: DemoOptions) -> int:
    """The whole demo; returns the exit status."""
    from inspector.station.config import load_station_config

    t_start = time.time()
    opts.out.mkdir(parents=True, exist_ok=True)
    run = train_or_reuse(opts)
    _say_evaluation(json.loads((run / "report.json").read_text()))
    onnx_path = _export(opts, run)
    broker, host, port = _start_broker(opts)
    for stale in ("outbox.sqlite", "outbox.sqlite-wal", "outbox.sqlite-shm", "results.jsonl"):
        (opts.out / stale).unlink(missing_ok=True)
    shutil.rmtree(opts.out / "footage", ignore_errors=True)
    cfg_path = opts.out / "station.yaml"
    cfg_path.write_text(station_yaml(opts, onnx_path.resolve(), host, port))
    cfg = load_station_config(cfg_path)
    try:
        results, wall, received = _run_station(opts, cfg, host, port)
    finally:
        if broker is not None:
            broker.stop()
    rows = summarise(opts, results, wall, received)
    png = report_png(opts, run, results)
    _print_table(rows)
    _say(
        f"report: {png}; results: {opts.out / 'results.jsonl'}; total {time.time() - t_start:.0f} s"
    )
    (opts.out / "summary.json").write_text(json.dumps(dict(rows), indent=2))
    return 0


def _say_evaluation(rep: dict) -> None:
    """Step 2: the trained model's evaluation report in two lines."""
    rec = rep["per_class_recall"]
    _say(
        f"[2/5] evaluation on {rep['episodes']} fixed parts: accuracy {rep['accuracy']:.3f}, "
        f"recall line {rec['line']:.3f} / point {rec['point']:.3f}, "
        f"defect recall {rep['defect_recall']:.3f}, false alarms {rep['false_alarm_rate']:.3f}, "
        f"mean steps {rep['mean_steps']:.1f}, native share {rep['native_share']:.2f}"
    )
    if rep.get("kept"):
        _say(f"      kept: {rep['kept']['why']}; ok bias {rep.get('ok_bias', 0.0):+.2f}")


def _export(opts: DemoOptions, run: Path) -> Path:
    """Step 3: export the run to ONNX and say how closely ONNX Runtime follows torch."""
    from inspector.export.onnx import export_report

    onnx_path = opts.out / "model.onnx"
    ex = export_report(run, onnx_path, False, "synthetic", dict(CAMERA), n_obs=1000)
    p = ex["parity_fp32"]
    _say(
        f"[3/5] exported {onnx_path}: ONNX Runtime vs torch on {p['observations']} "
        f"observations: max |diff| {p['max_abs_diff_action_logits']:.1e}, "
        f"actions agree {p['action_agreement']:.1%}"
    )
    return onnx_path


def _start_broker(opts: DemoOptions) -> tuple[LocalBroker | None, str | None, int | None]:
    """Step 4: the broker given, or a local mosquitto; (our broker or None, host, port).

    Without either the host is None and results stay in the outbox and the JSON lines.
    """
    host, port = opts.mqtt_host, opts.mqtt_port
    if host is not None:
        port = port or 1883
        _say(f"[4/5] using the MQTT broker at {host}:{port}")
        return None, host, port
    broker = LocalBroker(opts.out)
    if broker.start():
        _say(f"[4/5] started mosquitto on 127.0.0.1:{broker.port}")
        return broker, "127.0.0.1", broker.port
    _say(
        f"[4/5] no MQTT broker could be started ({broker.error}); results stay in "
        f"{opts.out / 'outbox.sqlite'} and {opts.out / 'results.jsonl'}"
    )
    return None, None, port


def _run_station(
    opts: DemoOptions, cfg: Any, host: str | None, port: int | None
) -> tuple[list[dict], float, int | None]:
    """Step 5: the station over ``opts.parts`` parts, a subscriber counting what arrives.

    :returns: the results written, the station's wall time, the messages received
        (None without a broker or when the subscriber could not connect).
    """
    from inspector.station.loop import Station

    sub = None
    try:
        if host is not None:
            try:
                sub = Subscriber(host, int(port), "inspector/v1/demo/result")
                sub.ready.wait(5)
            except OSError as exc:
                _say(f"      subscriber could not connect to {host}:{port}: {exc}")
                sub = None
        _say(f"[5/5] station: {opts.parts} synthetic parts, ONNX Runtime backend")
        station = Station(cfg)
        t0 = time.time()
        try:
            station.start()
            station.run(max_parts=opts.parts)
        finally:
            station.close()
        wall = time.time() - t0
        results = [json.loads(x) for x in (opts.out / "results.jsonl").read_text().splitlines()]
        received = sub.wait_for(len(results), 15) if sub is not None else None
    finally:
        if sub is not None:
            sub.close()
    return results, wall, received


def _print_table(rows: list[tuple[str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="inspector demo: station summary")
    table.add_column("what")
    table.add_column("value", justify="right")
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)
