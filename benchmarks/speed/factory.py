"""Factory integration: the PLC handshake over OPC UA beside MQTT triggers, and shadow models.

Two measurements, each in one run against a baseline measured in the same run:

* **Handshake**: one in-process :class:`Station` (synthetic 128x128 camera, an exported
  ONNX policy, outbox ``synchronous=FULL``) driven part by part by a PLC. The OPC UA PLC
  is an asyncua client on loopback playing the full handshake (wait for TriggerEnable,
  write TriggerPartId and Trigger, wait for ResultValid with a new Sequence, read the
  result, write ResultAck, wait for its reset); the MQTT PLC publishes a trigger (QoS 1)
  to a local mosquitto and waits for the result that echoes its correlation id. Round
  trip per part p50/p99 and parts/s; the free-running station (no trigger, no broker)
  is the baseline for parts/s. The MQTT path is measured four times, turning Nagle's
  algorithm off one TCP leg after the other (the station's ``mqtt.tcp_nodelay``, the
  broker's ``set_tcp_nodelay``, the PLC client's socket); the first run, Nagle on every
  leg, is the baseline for the round trip (docs/mqtt.md, "Latency").
* **Shadow**: the same free-running station without and with a shadow model (a copy of
  the live model, so both do the same work), interleaved in rounds: parts/s and the live
  verdict's latency (``Result.latency_ms``) p50/p99. Goals (issue #30): live p99 latency
  within 10 % of the run without a shadow, parts/s >= 0.45x.

Run: ``python -m benchmarks.speed.factory [--quick] [--model M.onnx] [--parts N]``.
Without ``--model`` a tiny model is trained and exported first (about a minute).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import load_average, parser, table, write_section
from benchmarks.speed.common import build_model, free_port, start_mosquitto
from inspector.station.config import StationConfig, load_station_config
from inspector.station.loop import Station

NS = "urn:inspector:station:bench"


def station_config(folder: Path, model: Path, **sections: Any) -> StationConfig:
    """A station on the synthetic camera, MQTT off unless ``mqtt`` is given."""
    doc: dict[str, Any] = {
        "station_id": "bench",
        "camera": {"driver": "synthetic", "params": {"size": 128, "seed": 3}},
        "model": {"path": str(model)},
        "mqtt": {"enabled": False},
        "outbox": {"path": str(folder / f"outbox-{uuid.uuid4().hex[:8]}.sqlite")},
        "status_interval": 3600,
        "log_level": "WARNING",
        **sections,
    }
    path = folder / f"station-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(json.dumps(doc))
    return load_station_config(path)


def pcts(values: list[float]) -> tuple[float, float]:
    """p50 and p99 of ``values``."""
    a = np.asarray(values, dtype=np.float64)
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


class Running:
    """A started station whose loop runs in a thread until :meth:`stop`."""

    def __init__(self, cfg: StationConfig) -> None:
        import io

        self.station = Station(cfg, out=io.StringIO())
        self.station.start()
        self.thread = threading.Thread(target=self.station.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.station.request_stop()
        self.thread.join(60)


def opcua_round_trips(folder: Path, model: Path, parts: int) -> tuple[list[float], float]:
    """Per-part handshake round trips (ms) and parts/s for an asyncua PLC."""
    import asyncua

    port = free_port()
    url = f"opc.tcp://127.0.0.1:{port}/inspector"
    cfg = station_config(folder, model, trigger={"mode": "opcua"},
                         opcua={"enabled": True, "endpoint": url, "buffer": 8})  # fmt: skip
    run = Running(cfg)

    async def plc() -> tuple[list[float], float]:
        async with asyncua.Client(url) as c:
            ns = await c.get_namespace_index(NS)
            st = await c.nodes.objects.get_child(f"{ns}:InspectionStation")
            n = {
                k: await st.get_child(f"{ns}:{k}")
                for k in ("TriggerEnable", "Trigger", "TriggerPartId", "ResultValid", "ResultAck")
            }
            seq = await st.get_child([f"{ns}:Result", f"{ns}:Sequence"])
            verdict = await st.get_child([f"{ns}:Result", f"{ns}:Verdict"])  # fmt: skip
            last, times = int(await seq.read_value()), []
            t_all = time.perf_counter()
            for i in range(parts):
                t0 = time.perf_counter()
                while not await n["TriggerEnable"].read_value():
                    await asyncio.sleep(0.0005)
                await n["TriggerPartId"].write_value(f"B-{i}")
                await n["Trigger"].write_value(True)
                while not (await n["ResultValid"].read_value() and await seq.read_value() != last):
                    await asyncio.sleep(0.0005)
                last = int(await seq.read_value())
                await verdict.read_value()
                await n["ResultAck"].write_value(True)
                while await n["ResultAck"].read_value():
                    await asyncio.sleep(0.0005)
                times.append(1e3 * (time.perf_counter() - t0))
            return times, parts / (time.perf_counter() - t_all)

    try:
        return asyncio.run(plc())
    finally:
        run.stop()


#: The MQTT runs: label, station ``mqtt.tcp_nodelay``, broker ``set_tcp_nodelay``, PLC.
MQTT_LEGS = (
    ("Nagle on every leg (station `tcp_nodelay: false`)", False, False, False),
    ("station `tcp_nodelay` (the default)", True, False, False),
    ("+ broker `set_tcp_nodelay true`", True, True, False),
    ("+ PLC client `TCP_NODELAY`", True, True, True),
)


def _plc_no_delay(_client: Any, _userdata: Any, sock: Any) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def mqtt_round_trips(
    folder: Path, model: Path, parts: int, legs: tuple[bool, bool, bool] = (True, True, True)
) -> tuple[list[float], float]:
    """Per-part trigger -> result round trips (ms) and parts/s over a local mosquitto.

    :param legs: Nagle off on the station's, the broker's and the PLC's sockets.
    """
    import paho.mqtt.client as mqtt

    station_nd, broker_nd, plc_nd = legs
    broker, port = start_mosquitto(folder, nodelay=broker_nd)
    cfg = station_config(folder, model, trigger={"mode": "mqtt"},
                         mqtt={"enabled": True, "host": "127.0.0.1", "port": port,
                               "tcp_nodelay": station_nd})  # fmt: skip
    got: dict[str, float] = {}
    cond = threading.Condition()

    def on_message(_c: Any, _u: Any, msg: Any) -> None:
        doc = json.loads(msg.payload)
        with cond:
            got.setdefault(str(doc.get("correlation_id")), time.perf_counter())
            cond.notify_all()

    client = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2)
    client.on_message = on_message
    if plc_nd:
        client.on_socket_open = _plc_no_delay
    client.connect("127.0.0.1", port)
    client.subscribe("inspector/v1/bench/result", qos=1)
    client.loop_start()
    run = Running(cfg)
    try:
        time.sleep(1.0)  # the station subscribed to its trigger topic
        times = []
        t_all = time.perf_counter()
        for i in range(parts):
            cid = f"c-{i}"
            t0 = time.perf_counter()
            client.publish("inspector/v1/bench/trigger", json.dumps({"correlation_id": cid}),
                           qos=1)  # fmt: skip
            with cond:
                if not cond.wait_for(lambda c=cid: c in got, timeout=30):
                    raise SystemExit(f"no result for trigger {cid}")
            times.append(1e3 * (got[cid] - t0))
        return times, parts / (time.perf_counter() - t_all)
    finally:
        run.stop()
        client.loop_stop()
        client.disconnect()
        broker.terminate()
        broker.wait(10)


def free_run_rate(folder: Path, model: Path, parts: int, **sections: Any) -> tuple[float, list]:
    """Parts/s and live latencies (ms) of ``parts`` free-running parts (MQTT off)."""
    import io

    st = Station(station_config(folder, model, **sections), out=io.StringIO())
    st.start()
    try:
        st.step()  # warm-up
        lat, t0 = [], time.perf_counter()
        for _ in range(parts):
            r = st.step()
            lat.append(float(r.latency_ms))
        return parts / (time.perf_counter() - t0), lat
    finally:
        st.close()


def shadow_rounds(folder: Path, model: Path, parts: int, rounds: int) -> dict[str, Any]:
    """Interleaved rounds without and with a shadow (a copy of the live model)."""
    shadow = folder / "shadow.onnx"
    shutil.copyfile(model, shadow)
    out: dict[str, dict[str, list]] = {"without": {"rate": [], "lat": []},
                                       "with": {"rate": [], "lat": []}}  # fmt: skip
    arms = (("without", {}), ("with", {"shadow": {"model": str(shadow), "budget_ms": 50}}))
    for _ in range(rounds):
        for name, sections in arms:
            rate, lat = free_run_rate(folder, model, parts, **sections)
            out[name]["rate"].append(rate)
            out[name]["lat"] += lat
    return out


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__, quick="fewer parts (a smoke run)")
    ap.add_argument("--model", type=Path, help="an exported .onnx (default: train a tiny one)")
    ap.add_argument("--parts", type=int, default=200, help="parts per measurement (200)")
    ap.add_argument("--rounds", type=int, default=3, help="shadow rounds (3)")
    args = ap.parse_args(argv)
    parts, rounds = (20, 1) if args.quick else (args.parts, args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench-factory-") as tmp:
        folder = Path(tmp)
        model = args.model or build_model(folder)
        load0 = load_average()
        base_rate, _ = free_run_rate(folder, model, parts)
        opc_t, opc_rate = opcua_round_trips(folder, model, parts)
        mq = [(label, *mqtt_round_trips(folder, model, parts, legs))
              for label, *legs in MQTT_LEGS]  # fmt: skip
        sh = shadow_rounds(folder, model, parts, rounds)
        load1 = load_average()
    body = report(parts, rounds, base_rate, (opc_t, opc_rate), mq, sh, (load0, load1))
    print(body)
    cmd = "python -m benchmarks.speed.factory" + (" --quick" if args.quick else "")
    if args.model:
        cmd += " --model MODEL.onnx (built like build_model())"
    if not args.no_write:
        title = "Factory integration: OPC UA handshake and shadow models"
        write_section("factory", title, body, command=cmd, doc=args.doc)
    return 0


def report(parts: int, rounds: int, base_rate: float, opc: tuple, mq: list,
           sh: dict, loads: tuple[float, float]) -> str:  # fmt: skip
    """The section's tables and verdicts.

    :param mq: (label, round trips, parts/s) per MQTT run, the first the Nagle baseline.
    """
    opc_t, opc_rate = opc
    o50, o99 = pcts(opc_t)
    rows = [
        ["OPC UA handshake (asyncua PLC)", f"{o50:.1f}", f"{o99:.1f}", "-", f"{opc_rate:.1f}",
         f"{opc_rate / base_rate:.2f}x"],
    ]  # fmt: skip
    n50 = pcts(mq[0][1])[0]
    for label, times, rate in mq:
        m50, m99 = pcts(times)
        rows.append([f"MQTT trigger -> result (QoS 1, mosquitto): {label}", f"{m50:.1f}",
                     f"{m99:.1f}", f"{m50 / n50:.2f}x", f"{rate:.1f}",
                     f"{rate / base_rate:.2f}x"])  # fmt: skip
    rows.append(["baseline: free-run, no trigger, no broker", "-", "-", "-", f"{base_rate:.1f}",
                 "1.00x"])  # fmt: skip
    without, with_ = sh["without"], sh["with"]
    w50, w99 = pcts(without["lat"])
    s50, s99 = pcts(with_["lat"])
    r0, r1 = float(np.median(without["rate"])), float(np.median(with_["rate"]))
    srows = [
        ["without shadow (baseline)", f"{r0:.1f}", "1.00x", f"{w50:.2f}", f"{w99:.2f}", "1.00x"],
        ["with shadow (copy of the live model)", f"{r1:.1f}", f"{r1 / r0:.2f}x", f"{s50:.2f}",
         f"{s99:.2f}", f"{s99 / w99:.2f}x"],
    ]  # fmt: skip
    lat_ok = s99 <= 1.10 * w99
    rate_ok = r1 >= 0.45 * r0
    return (
        table(
            [
                "PLC path",
                "round trip p50 ms",
                "p99 ms",
                "p50 vs Nagle on every leg",
                "parts/s",
                "vs free-run",
            ],
            rows,
        )  # fmt: skip
        + f"\n{parts} parts each, one after another (the PLC waits for each result before the "
        "next trigger), loopback, synthetic 128x128 frames, outbox synchronous=FULL. The MQTT "
        "rows run one after another in the order shown, each with a fresh broker and station; "
        "Nagle's algorithm holds a packet until the previous one is acknowledged, and the "
        'peer delays that ACK by up to 40 ms (docs/mqtt.md, "Latency").\n\n'
        + table(
            [
                "station",
                "parts/s",
                "vs baseline",
                "live latency p50 ms",
                "p99 ms",
                "p99 vs baseline",
            ],
            srows,
        )  # fmt: skip
        + f"\n{rounds} interleaved round(s) of {parts} free-running parts, MQTT off; shadow "
        "budget 50 ms. Goals: live p99 latency within 10 % of the baseline: "
        + ("meets" if lat_ok else "**MISSES**")
        + f" ({s99 / w99:.2f}x); parts/s >= 0.45x: "
        + ("meets" if rate_ok else "**MISSES**")
        + f" ({r1 / r0:.2f}x).\n\nLoad average at the start / end: {loads[0]:.1f} / "
        f"{loads[1]:.1f} (2 cores shared with other jobs raise every latency here).\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
