"""Publisher against a real mosquitto on loopback: delivery, order, restarts, crashes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from inspector.station.mqtt import MqttConfig, Publisher
from inspector.station.outbox import Outbox
from inspector.station.reporter import Reporter
from inspector.station.result import validate_result
from tests.integration._mqtt_harness import free_port, make_tls_files, wait_until

pytestmark = pytest.mark.mqtt

REPO = Path(__file__).resolve().parents[2]
PREFIX = "inspector/v1/line1"


def config(broker, **kw) -> MqttConfig:
    kw.setdefault("station", "line1")
    kw.setdefault("reconnect_min_delay", 0.1)
    kw.setdefault("reconnect_max_delay", 0.5)
    return MqttConfig(host=broker.host, port=broker.port, **kw)


def first_copies(docs: list[dict]) -> list[dict]:
    """What a receiver keeps when it de-duplicates by id (first copy wins)."""
    seen: dict[str, dict] = {}
    out = []
    for d in docs:
        if d["id"] in seen:
            # A re-send is the same document, not a new decision.
            assert d == seen[d["id"]]
            continue
        seen[d["id"]] = d
        out.append(d)
    return out


@pytest.mark.parametrize("protocol", ["3.1.1", "5"])
def test_500_results_arrive_once_and_valid(broker, collector, make_result, tmp_path, protocol):
    sub = collector(broker, f"{PREFIX}/#")
    outbox = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(config(broker, protocol=protocol), outbox).start()
    reporter = Reporter(outbox, pub)
    ids = [r.id for r in (make_result(i) for i in range(500)) if reporter.report(r)]
    assert pub.flush(30)
    topic = f"{PREFIX}/result"
    wait_until(lambda: len({d["id"] for d in sub.documents(topic)}) >= 500, 30, "500 results")
    docs = first_copies(sub.documents(topic))
    assert [d["id"] for d in docs] == ids
    assert [d["seq"] for d in docs] == list(range(1, 501))
    for d in docs:
        validate_result(d)
    st = pub.status()
    assert st.connected and st.outbox_depth == 0 and st.acknowledged == 500 and st.errors == 0
    reporter.close()
    # close() leaves the retained status at offline.
    wait_until(
        lambda: any(d["state"] == "offline" for d in sub.documents(f"{PREFIX}/status")),
        10,
        "the offline status",
    )


def test_group_commit_publishes_in_order_and_deletes_acked_rows_unasked(
    broker, collector, make_result, tmp_path
):
    # The station's way: a committer thread commits batches and publishes them; the
    # acknowledged rows go in batches on a timer, not only when someone flushes.
    sub = collector(broker, f"{PREFIX}/result")
    outbox = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(config(broker), outbox).start()
    wait_until(lambda: pub.connected, 10, "connected")
    reporter = Reporter(outbox, pub, background=True)
    results = [make_result(i) for i in range(300)]
    for r in results:
        assert reporter.report(r) is None
    wait_until(lambda: len(first_copies(sub.documents(f"{PREFIX}/result"))) >= 300, 30, "300")
    wait_until(lambda: outbox.depth() == 0, 5, "acknowledged rows deleted without a flush")
    docs = first_copies(sub.documents(f"{PREFIX}/result"))
    assert [d["id"] for d in docs] == [r.id for r in results]
    assert [d["seq"] for d in docs] == list(range(1, 301))
    assert reporter.status().outbox_depth == 0 and pub.status().acknowledged == 300
    assert reporter.close(flush_timeout=5.0)


def test_broker_restarts_twice_no_loss_order_kept(mosquitto, collector, make_result, tmp_path):
    # Graceful stops with broker persistence, so the subscriber's session (and what the
    # broker had accepted for it) survives: any loss would then be the publisher's fault.
    broker = mosquitto(persistence=True)
    sub = collector(broker, f"{PREFIX}/result", persistent=True, client_id="restart-collector")
    outbox = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(config(broker), outbox).start()
    reporter = Reporter(outbox, pub)
    n = 500
    produced = threading.Event()

    def produce() -> None:
        for i in range(n):
            reporter.report(make_result(i))
            time.sleep(0.006)  # pacing, so the stream is still running at each stop
        produced.set()

    producer = threading.Thread(target=produce)
    producer.start()
    unique = lambda: len({d["id"] for d in sub.documents(f"{PREFIX}/result")})  # noqa: E731
    for threshold in (80, 260):
        wait_until(lambda t=threshold: unique() >= t, 30, f"{threshold} results")
        broker.stop()
        wait_until(lambda: not pub.connected, 10, "the publisher to notice")
        reporter.report(make_result(10_000 + threshold))  # committed while the broker is away
        time.sleep(2.0)  # the outage
        broker.start()
        wait_until(lambda: pub.connected, 20, "the publisher to reconnect")
    producer.join(60)
    assert produced.is_set()
    assert pub.flush(30), pub.status()
    wait_until(lambda: unique() >= n + 2, 30, "every result after the restarts")
    docs = first_copies(sub.documents(f"{PREFIX}/result"))
    assert [d["seq"] for d in docs] == list(range(1, n + 3))
    st = pub.status()
    assert st.connects >= 3 and st.outbox_depth == 0
    reporter.close()


def _spawn(outbox: Path, port: int, start: int, count: int, pace: float) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_mqtt_station_proc.py")), str(outbox),
         str(port), str(start), str(count), str(pace)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip


def test_publisher_sigkilled_and_restarted_loses_nothing(broker, collector, tmp_path):
    prefix = "inspector/v1/crash"
    sub = collector(broker, f"{prefix}/#")
    outbox = tmp_path / "outbox.sqlite"
    proc = _spawn(outbox, broker.port, 0, 2000, 0.002)
    committed: list[tuple[int, str]] = []
    for line in proc.stdout:
        if line.startswith("seq "):
            _, seq, rid = line.split()
            committed.append((int(seq), rid))
        if len(committed) >= 150:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    # The broker sends the last will: the station is offline.
    wait_until(
        lambda: any(
            d["state"] == "offline" and d.get("reason") == "connection lost"
            for d in sub.documents(f"{prefix}/status")
        ),
        15,
        "the last will",
    )
    proc = _spawn(outbox, broker.port, 5000, 50, 0.0)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "flushed True" in out, out
    second = [
        (int(s), r) for _, s, r in (ln.split() for ln in out.splitlines() if ln[:4] == "seq ")
    ]
    last_seq = second[-1][0]
    wait_until(
        lambda: len({d["id"] for d in sub.documents(f"{prefix}/result")}) >= last_seq,
        30,
        f"{last_seq} results",
    )
    docs = first_copies(sub.documents(f"{prefix}/result"))
    # Every committed seq arrived, in order: including the ones the killed process had
    # committed but not yet published (or not yet printed).
    assert [d["seq"] for d in docs] == list(range(1, last_seq + 1))
    got = {d["id"] for d in docs}
    assert {rid for _, rid in committed + second} <= got
    with Outbox(outbox) as ob:
        assert ob.depth() == 0


ACL = """\
user station
topic readwrite inspector/v1/line1/#

user reader
topic read inspector/v1/#
"""


def test_password_and_acl(mosquitto, collector, make_result, tmp_path, caplog):
    broker = mosquitto(users={"station": "s3cret", "reader": "r3ad"}, acl=ACL)
    sub = collector(broker, f"{PREFIX}/#", username="reader", password="r3ad")
    os.environ["INSPECTOR_TEST_MQTT_PW"] = "s3cret"
    try:
        good_box = Outbox(tmp_path / "good.sqlite")
        good = Publisher(
            config(broker, username="station", password_env="INSPECTOR_TEST_MQTT_PW"), good_box
        ).start()
        rep = Reporter(good_box, good)
        for i in range(20):
            rep.report(make_result(i))
        assert good.flush(20)
    finally:
        del os.environ["INSPECTOR_TEST_MQTT_PW"]
    wait_until(lambda: len(sub.documents(f"{PREFIX}/result")) >= 20, 20, "20 results")

    # Wrong password: a clear, repeated error; the station keeps committing.
    bad_box = Outbox(tmp_path / "bad.sqlite")
    bad = Publisher(
        config(broker, username="station", password="wrong", client_id="bad-client"), bad_box
    ).start()
    bad_rep = Reporter(bad_box, bad)
    bad_rep.report(make_result(1))
    wait_until(lambda: bad.status().errors >= 2, 20, "repeated connection errors")
    err = bad.last_error.lower()
    assert "refused" in err and ("not authori" in err or "bad user name or password" in err)
    assert not bad.connected and bad_box.depth() == 1
    assert any("refused the connection" in r.getMessage() for r in caplog.records)
    bad_rep.close(flush_timeout=0.1)

    # MQTT 5 reports an ACL denial in the PUBACK: the result stays in the outbox.
    denied_box = Outbox(tmp_path / "denied.sqlite")
    denied = Publisher(
        config(
            broker, station="line2", username="station", password="s3cret", protocol="5",
            client_id="denied-client",
        ),
        denied_box,
    ).start()  # fmt: skip
    denied_rep = Reporter(denied_box, denied)
    denied_rep.report(make_result(2, station="line2"))
    wait_until(lambda: "refused result" in (denied.last_error or ""), 20, "the ACL refusal")
    assert "not authori" in denied.last_error.lower()
    assert denied_box.depth() == 1
    denied_rep.close(flush_timeout=0.1)
    rep.close()


def test_tls_with_generated_certificates(mosquitto, collector, make_result, tmp_path):
    from inspector.station.mqtt import TlsConfig

    files = make_tls_files(tmp_path / "pki")
    broker = mosquitto(tls=files)
    sub = collector(broker, f"{PREFIX}/result", tls=files)
    outbox = Outbox(tmp_path / "outbox.sqlite")
    tls = TlsConfig(ca=str(files.ca), cert=str(files.client_cert), key=str(files.client_key))
    pub = Publisher(config(broker, tls=tls), outbox).start()
    rep = Reporter(outbox, pub)
    for i in range(20):
        rep.report(make_result(i))
    assert pub.flush(20)
    wait_until(lambda: len(sub.documents(f"{PREFIX}/result")) >= 20, 20, "20 TLS results")
    assert no_delay(pub)  # set under TLS too
    rep.close()

    # A CA that did not sign the broker's certificate: clear error, no crash.
    other = make_tls_files(tmp_path / "other-pki", name="other")
    box2 = Outbox(tmp_path / "outbox2.sqlite")
    tls2 = TlsConfig(ca=str(other.ca), cert=str(files.client_cert), key=str(files.client_key))
    pub2 = Publisher(config(broker, tls=tls2, client_id="wrong-ca"), box2).start()
    wait_until(lambda: pub2.last_error, 20, "the TLS error")
    assert "TLS" in pub2.last_error and "certificate verify failed" in pub2.last_error
    assert not pub2.connected
    pub2.close()
    box2.close()


def no_delay(pub: Publisher) -> bool:
    """Whether Nagle's algorithm is off on the publisher's connection."""
    sock = pub._client.socket()
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


def test_tcp_nodelay_on_every_connection_unless_turned_off(broker, tmp_path):
    # With Nagle on, a result waits for the broker's delayed ACK of the station's previous
    # packet (40 ms on Linux): the MQTT trigger round trip measured 88 ms instead of 9.
    box = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(config(broker), box).start()
    wait_until(lambda: pub.connected, 10, "connected")
    assert no_delay(pub)
    pub._client.socket().shutdown(socket.SHUT_RDWR)  # a lost connection: a new socket
    wait_until(lambda: pub.status().connects >= 2, 20, "reconnected")
    assert no_delay(pub)
    pub.close()
    box2 = Outbox(tmp_path / "outbox2.sqlite")
    pub2 = Publisher(config(broker, tcp_nodelay=False, client_id="nagle"), box2).start()
    wait_until(lambda: pub2.connected, 10, "connected")
    assert not no_delay(pub2)
    pub2.close()
    box.close()
    box2.close()


def test_50_triggers_echoed_in_order(broker, collector, make_result, tmp_path):
    import paho.mqtt.client as mqtt

    sub = collector(broker, f"{PREFIX}/result")
    outbox = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(config(broker, triggers=True), outbox).start()
    rep = Reporter(outbox, pub)
    wait_until(pub.trigger_subscribed.is_set, 10, "the trigger subscription")

    sender = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id="plc")
    sender.connect(broker.host, broker.port)
    sender.loop_start()
    sender.publish(f"{PREFIX}/trigger", b"not json", qos=1)
    infos = [
        sender.publish(
            f"{PREFIX}/trigger",
            json.dumps({"part_id": f"P{i}", "correlation_id": f"c-{i}"}),
            qos=1,
        )
        for i in range(50)
    ]
    for info in infos:
        info.wait_for_publish(10)

    for i in range(50):
        trig = pub.next_trigger(timeout=10)
        assert trig is not None, f"trigger {i} did not arrive"
        rep.report(
            make_result(
                i,
                part_id=trig.part_id,
                correlation_id=trig.correlation_id,
                trigger_part_id=trig.part_id,
            )
        )
    assert pub.flush(20)
    wait_until(lambda: len(sub.documents(f"{PREFIX}/result")) >= 50, 20, "50 results")
    docs = first_copies(sub.documents(f"{PREFIX}/result"))
    assert [d["correlation_id"] for d in docs] == [f"c-{i}" for i in range(50)]
    assert [d["trigger_part_id"] for d in docs] == [f"P{i}" for i in range(50)]
    assert [d["part_id"] for d in docs] == [f"P{i}" for i in range(50)]
    st = pub.status()
    assert st.triggers == 50 and st.bad_triggers == 1
    assert pub.next_trigger(timeout=0) is None
    sender.disconnect()
    sender.loop_stop()
    rep.close()


def test_no_broker_is_an_error_not_a_crash(make_result, tmp_path):
    outbox = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(MqttConfig(station="line1", port=free_port(), reconnect_min_delay=0.1,
                               reconnect_max_delay=0.2), outbox).start()  # fmt: skip
    rep = Reporter(outbox, pub)
    rep.report(make_result(0))
    wait_until(lambda: pub.status().errors >= 2, 20, "repeated errors")
    assert "connection refused" in pub.last_error
    assert not pub.flush(0.2)
    assert rep.status().outbox_depth == 1
    assert rep.close(flush_timeout=0.1) is False


def test_dead_link_unacknowledged_results_are_sent_again_in_order(
    broker, collector, proxy, make_result, tmp_path
):
    # The publisher reaches the broker through a relay that can blackhole and cut the link,
    # so results are left published-but-unacknowledged for certain (a broker restart on
    # loopback acknowledges too fast to leave any). The subscriber connects directly.
    relay = proxy(broker.port)
    sub = collector(broker, f"{PREFIX}/result")
    outbox = Outbox(tmp_path / "outbox.sqlite")
    window = 16
    cfg = MqttConfig(
        station="line1", host=relay.host, port=relay.port, window=window,
        reconnect_min_delay=0.1, reconnect_max_delay=0.5,
    )  # fmt: skip
    pub = Publisher(cfg, outbox).start()
    rep = Reporter(outbox, pub)
    seq = 0
    for i in range(50):
        seq = rep.report(make_result(i))
    assert pub.flush(20)

    # 1. PUBACKs lost: the broker has the results (and forwards them), we do not know it.
    # 2. Both ways dead: the results never reach the broker.
    for up, down in ((False, True), (True, True)):
        relay.freeze(up=up, down=down)
        before = pub.status().published
        for i in range(40):
            seq = rep.report(make_result(seq + i))
        wait_until(lambda b=before: pub.status().published >= b + window, 10, "a full window")
        assert outbox.depth() == 40  # nothing acknowledged while the link is dead
        relay.cut()
        relay.thaw()
        assert pub.flush(20), pub.status()
    total = outbox.last_seq
    wait_until(lambda: len({d["id"] for d in sub.documents(f"{PREFIX}/result")}) >= total, 20,
               f"{total} results")  # fmt: skip
    raw = sub.documents(f"{PREFIX}/result")
    docs = first_copies(raw)
    assert [d["seq"] for d in docs] == list(range(1, total + 1))
    assert len(raw) > len(docs)  # step 1 made the broker see some results twice
    assert pub.status().republished >= 2 * window
    rep.close()


def test_outbox_full_is_announced_and_cleared(broker, collector, proxy, make_result, tmp_path):
    relay = proxy(broker.port)
    sub = collector(broker, f"{PREFIX}/status")
    outbox = Outbox(tmp_path / "outbox.sqlite", limit=5)
    cfg = MqttConfig(station="line1", host=relay.host, port=relay.port,
                     reconnect_min_delay=0.1, reconnect_max_delay=0.5)  # fmt: skip
    pub = Publisher(cfg, outbox).start()
    rep = Reporter(outbox, pub)
    wait_until(lambda: pub.connected, 10, "a connection")
    relay.freeze(up=False, down=True)  # the broker hears us, its PUBACKs are lost
    for i in range(5):
        rep.report(make_result(i))
    assert not rep.accepting and rep.status().outbox_full
    states = lambda: [d["state"] for d in sub.documents(f"{PREFIX}/status")]  # noqa: E731
    wait_until(lambda: "outbox_full" in states(), 10, "status outbox_full")
    relay.cut()
    relay.thaw()
    assert pub.flush(20)
    assert rep.accepting
    model = {"sha256": "ab" * 32, "version": "v0002", "channel": "canary"}
    pub.set_model(model)  # the station names the model it runs, as its results do
    pub.update_status({"parts": 5, "ok": 4, "defect": 1, "errors": 0})
    wait_until(
        lambda: any(
            d.get("counts", {}).get("parts") == 5 for d in sub.documents(f"{PREFIX}/status")
        ),
        10,
        "status with counts",
    )
    last = sub.documents(f"{PREFIX}/status")[-1]
    assert last["state"] == "online" and last["outbox_depth"] == 0 and last["model"] == model
    rep.close()
