"""The PLC handshake over a real OPC UA server, played by a real asyncua client.

The station side is a thread that takes triggers and delivers result documents, so
these tests hold the handshake and the server; tests/integration/test_opcua_station.py
runs the real station loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

asyncua = pytest.importorskip("asyncua", reason="OPC UA tests need asyncua (inspector[opcua])")

from inspector.station.opcua.handshake import Handshake, PendingResults  # noqa: E402
from inspector.station.opcua.server import OpcuaServer  # noqa: E402

NS = "urn:inspector:station:st1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeStation:
    """Takes each trigger and delivers a result naming the trigger's part id."""

    def __init__(self, hs: Handshake) -> None:
        self.hs = hs
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            trig = self.hs.next_trigger(0.1)
            if trig is not None:
                self.hs.deliver({
                    "id": str(uuid.uuid4()), "part_id": trig.part_id or "auto",
                    "correlation_id": trig.correlation_id, "verdict": "defect",
                    "label": "line", "confidence": 0.875, "decided_at": time.time(),
                    "steps": 4, "model_sha256": "m" * 64, "profile_sha256": "p" * 64,
                })  # fmt: skip

    def __enter__(self) -> FakeStation:
        self.hs.set_running(True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def serve(tmp_path: Path, buffer: int = 8, **kw) -> tuple[Handshake, OpcuaServer, str]:
    hs = Handshake(PendingResults(tmp_path / "outbox.sqlite", buffer))
    url = f"opc.tcp://127.0.0.1:{free_port()}/inspector"
    srv = OpcuaServer(hs, endpoint=url, station_id="st1", **kw)
    srv.start(60)
    return hs, srv, url


class Plc:
    """The PLC side of the handshake, on an asyncua client."""

    def __init__(self, client, namespace: str = NS) -> None:
        self.c = client
        self.namespace = namespace

    async def bind(self) -> Plc:
        ns = await self.c.get_namespace_index(self.namespace)
        self.st = await self.c.nodes.objects.get_child(f"{ns}:InspectionStation")
        self.ns = ns
        for name in ("TriggerEnable", "Trigger", "TriggerPartId", "ResultValid", "ResultAck"):
            setattr(self, name, await self.st.get_child(f"{ns}:{name}"))
        self.seq = await self.st.get_child([f"{ns}:Result", f"{ns}:Sequence"])
        self.part = await self.st.get_child([f"{ns}:Result", f"{ns}:PartId"])
        self.verdict = await self.st.get_child([f"{ns}:Result", f"{ns}:Verdict"])
        return self

    async def until(self, check, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while not await check():
            if time.monotonic() > end:
                raise TimeoutError("PLC waited too long")
            await asyncio.sleep(0.005)

    async def trigger(self, part: str) -> None:
        await self.until(self.TriggerEnable.read_value)
        await self.TriggerPartId.write_value(part)
        await self.Trigger.write_value(True)

    async def read_new(self, last_seq: int) -> tuple[int, str, str]:
        async def fresh() -> bool:
            return bool(await self.ResultValid.read_value()) and (
                await self.seq.read_value() != last_seq
            )

        await self.until(fresh)
        return (await self.seq.read_value(), await self.part.read_value(),
                await self.verdict.read_value())  # fmt: skip

    async def ack(self) -> None:
        await self.ResultAck.write_value(True)

        async def taken() -> bool:
            return not await self.ResultAck.read_value()

        await self.until(taken)


def test_200_triggered_parts_read_and_acknowledged_once_in_order_across_a_reconnect(tmp_path):
    hs, srv, url = serve(tmp_path, buffer=8)
    seen: list[tuple[int, str, str]] = []

    async def plc_run(parts: range, last: int, drop_after_trigger: bool) -> int:
        async with asyncua.Client(url) as c:
            plc = await Plc(c).bind()
            for i in parts:
                await plc.trigger(f"P-{i:03d}")
                if drop_after_trigger and i == parts[-1]:
                    return last  # the link drops with a result not yet read
                got = await plc.read_new(last)
                seen.append(got)
                await plc.ack()
                last = got[0]
        return last

    try:
        with FakeStation(hs):
            last = asyncio.run(plc_run(range(0, 101), 0, drop_after_trigger=True))

            # Reconnected: part 100's result waited, unacknowledged, for the PLC.
            async def resume() -> int:
                async with asyncua.Client(url) as c:
                    plc = await Plc(c).bind()
                    got = await plc.read_new(last)
                    seen.append(got)
                    await plc.ack()
                    return got[0]

            last = asyncio.run(resume())
            asyncio.run(plc_run(range(101, 200), last, drop_after_trigger=False))
    finally:
        srv.stop()
    assert [s for s, _, _ in seen] == list(range(1, 201))
    assert [p for _, p, _ in seen] == [f"P-{i:03d}" for i in range(200)]
    assert {v for _, _, v in seen} == {"defect"}
    assert len(hs.pending) == 0 and hs.acknowledged == 200 and hs.refused == 0


def test_full_buffer_holds_triggers_off_and_restart_restores_unacknowledged(tmp_path):
    hs, srv, url = serve(tmp_path, buffer=3)

    async def fill() -> tuple[bool, list, str]:
        async with asyncua.Client(url) as c:
            plc = await Plc(c).bind()
            for i in range(3):
                await plc.trigger(f"P{i}")
                await plc.until(_pending(hs, i + 1))
            await asyncio.sleep(0.2)
            enable = await plc.TriggerEnable.read_value()
            method = await plc.st.get_child(f"{plc.ns}:TriggerPart")
            refused = await plc.st.call_method(method, "P3", "")
            first = await plc.read_new(0)
            return enable, refused, first

    try:
        with FakeStation(hs):
            enable, refused, first = asyncio.run(fill())
    finally:
        srv.stop()
        hs.pending.close()
    assert enable is False  # three unacknowledged results: no more triggers
    assert refused[0] is False and "buffer full" in refused[1]
    assert first[:2] == (1, "P0")

    # A new station process on the same outbox file: the PLC sees the same three results.
    hs2, srv2, url2 = serve(tmp_path, buffer=3)

    async def drain() -> list:
        out = []
        async with asyncua.Client(url2) as c:
            plc = await Plc(c).bind()
            last = 0
            for _ in range(3):
                got = await plc.read_new(last)
                out.append(got[:2])
                await plc.ack()
                last = got[0]
            ack = await plc.st.get_child(f"{plc.ns}:AcknowledgeResult")
            stale = await plc.st.call_method(
                ack, asyncua.ua.Variant(3, asyncua.ua.VariantType.UInt64)
            )
            await plc.trigger("P9")
            got = await plc.read_new(last)
            out.append(got[:2])
            again = await plc.st.call_method(
                ack, asyncua.ua.Variant(got[0], asyncua.ua.VariantType.UInt64)
            )
            out.append(("method ack", again, stale))
        return out

    try:
        with FakeStation(hs2):
            out = asyncio.run(drain())
    finally:
        srv2.stop()
    assert out == [(1, "P0"), (2, "P1"), (3, "P2"), (4, "P9"), ("method ack", True, False)]
    assert len(hs2.pending) == 0


def u64(value: int):
    return asyncua.ua.Variant(value, asyncua.ua.VariantType.UInt64)


def _pending(hs: Handshake, n: int):
    async def check() -> bool:
        return len(hs.pending) >= n

    return check


def test_users_and_sign_and_encrypt(tmp_path, caplog):
    from asyncua import ua
    from asyncua.crypto.cert_gen import setup_self_signed_certificate
    from asyncua.crypto.security_policies import SecurityPolicyBasic256Sha256
    from cryptography.x509.oid import ExtendedKeyUsageOID

    def certs(name: str, use) -> tuple[Path, Path]:
        key, cert = tmp_path / f"{name}.pem", tmp_path / f"{name}.der"
        asyncio.run(setup_self_signed_certificate(
            key, cert, f"urn:inspector:{name}", "localhost", [use], {"commonName": name}
        ))  # fmt: skip
        return cert, key

    s_cert, s_key = certs("server", ExtendedKeyUsageOID.SERVER_AUTH)
    c_cert, c_key = certs("client", ExtendedKeyUsageOID.CLIENT_AUTH)
    hs, srv, url = serve(tmp_path, users={"plc": "s3cret"}, certificate=s_cert,
                         private_key=s_key, secure_only=True)  # fmt: skip

    async def connect(user: str | None, password: str | None, secure: bool) -> str:
        c = asyncua.Client(url, timeout=10)
        if user:
            c.set_user(user)
            c.set_password(password or "")
        if secure:
            await c.set_security(SecurityPolicyBasic256Sha256, str(c_cert), str(c_key),
                                 server_certificate=str(s_cert),
                                 mode=ua.MessageSecurityMode.SignAndEncrypt)  # fmt: skip
        try:
            async with c:
                plc = await Plc(c).bind()
                enabled = await plc.TriggerEnable.read_value()
                await plc.Trigger.write_value(True)  # a logged-in PLC may write

                async def taken() -> bool:
                    return not await plc.Trigger.read_value()

                await plc.until(taken)
                return str(enabled)
        except Exception as exc:  # the refusal is what some cases test
            return f"refused: {type(exc).__name__}"

    caplog.set_level(logging.ERROR)
    try:
        good = asyncio.run(connect("plc", "s3cret", True))
        wrong = asyncio.run(connect("plc", "guess", True))
        anonymous = asyncio.run(connect(None, None, True))
        plain = asyncio.run(connect("plc", "s3cret", False))
    finally:
        srv.stop()
    assert good == "False"  # connected and read; the station is not running
    assert wrong.startswith("refused") and anonymous.startswith("refused")
    assert plain.startswith("refused")  # no unencrypted endpoint
    assert srv.refused_logins >= 1
    assert hs.refused == 1 and hs.last_refusal == "station not running"
    assert "OPC UA login refused for user 'plc'" in caplog.text


def test_wake_ends_a_wait_for_a_trigger(tmp_path: Path) -> None:
    # The station's stop: a loop waiting an hour for the PLC returns None at once.
    hs = Handshake(PendingResults(tmp_path / "outbox.sqlite", 4))
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(hs.next_trigger(3600.0)))
    waiter.start()
    hs.wake()
    waiter.join(30)
    assert not waiter.is_alive() and got == [None]
    assert hs.next_trigger(0.0) is None  # a wake is used up by the wait it ended
