"""The real station with a PLC on OPC UA: 200 triggered parts, a reconnect, a kill -9.

A real asyncua client plays the PLC against ``inspector run`` (a process, with the
session's exported ONNX model and the synthetic camera). Every part's result is read
and acknowledged exactly once, in order; the station is killed outright with results
the PLC has not acknowledged, restarted on the same outbox, and shows them again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

asyncua = pytest.importorskip("asyncua", reason="OPC UA tests need asyncua (inspector[opcua])")

from tests.integration._station_proc import StationProc, station_yaml  # noqa: E402
from tests.integration.test_opcua_handshake import Plc, free_port  # noqa: E402

NS = "urn:inspector:station:plc1"


def config(tmp_path, station_model, port: int, buffer: int = 4, **extra):
    return station_yaml(
        tmp_path, station_model, station="plc1", trigger={"mode": "opcua"},
        opcua={"enabled": True, "endpoint": f"opc.tcp://127.0.0.1:{port}/inspector",
               "buffer": buffer},
        **extra,
    )  # fmt: skip


async def connect(url: str, timeout: float = 90.0):
    """Connect once the station serves (its start-up loads the model first)."""
    end = time.monotonic() + timeout
    while True:
        client = asyncua.Client(url, timeout=10)
        try:
            await client.connect()
            return client, await Plc(client, NS).bind()
        except Exception:
            try:
                await client.disconnect()
            except Exception:
                pass
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.5)


@pytest.mark.slow
def test_plc_drives_200_parts_through_a_reconnect_and_a_station_restart(tmp_path, station_model):
    port = free_port()
    url = f"opc.tcp://127.0.0.1:{port}/inspector"
    cfg = config(tmp_path, station_model, port)
    seen: list[tuple[int, str, str]] = []

    async def parts(plc, numbers, last: int) -> int:
        for i in numbers:
            await plc.trigger(f"P-{i:03d}")
            got = await plc.read_new(last)
            seen.append(got)
            await plc.ack()
            last = got[0]
        return last

    async def first_run() -> int:
        client, plc = await connect(url)
        try:
            last = await parts(plc, range(0, 60), 0)
        finally:
            await client.disconnect()  # the PLC's link drops ...
        client, plc = await connect(url)  # ... and comes back
        try:
            last = await parts(plc, range(60, 120), last)
            # Three more parts the PLC triggers but never acknowledges before the crash.
            for i in range(120, 123):
                await plc.trigger(f"P-{i:03d}")
            await plc.until(plc.TriggerEnable.read_value)  # P-122's result is shown too
        finally:
            await client.disconnect()
        return last

    proc = StationProc(cfg)
    try:
        last = asyncio.run(first_run())
    finally:
        proc.proc.send_signal(signal.SIGKILL)
        proc.wait(30)

    proc2 = StationProc(cfg)

    async def second_run() -> None:
        client, plc = await connect(url)
        try:
            nonlocal last
            for _ in range(3):  # restored from the outbox, in order
                got = await plc.read_new(last)
                seen.append(got)
                await plc.ack()
                last = got[0]
            await parts(plc, range(123, 200), last)
        finally:
            await client.disconnect()

    try:
        asyncio.run(second_run())
    finally:
        proc2.proc.send_signal(signal.SIGTERM)
        assert proc2.wait(60) == 0, proc2.text()
    assert [s for s, _, _ in seen] == list(range(1, 201))
    assert [p for _, p, _ in seen] == [f"P-{i:03d}" for i in range(200)]
    assert {v for _, _, v in seen} <= {"ok", "defect", "failed"}
    assert "opcua    opc.tcp://127.0.0.1" in proc2.text()
    assert "result(s) not yet acknowledged by the PLC shown again" in proc2.text()
    # MQTT is off here: the 200 results are in the station's results log as well.
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {d["part_id"] for d in lines} >= {f"P-{i:03d}" for i in range(200)}
