"""Hostile triggers, results a broker will not take, a full disk, hostile station YAML (#32).

Real mosquitto on loopback, real SQLite: every hostile input ends in a counted skip or
one clean error, and no result is lost or misreported.
"""

from __future__ import annotations

import io
import json
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector import ConfigError
from inspector.cli import main
from inspector.station.config import load_station_config
from inspector.station.loop import Station
from inspector.station.mqtt import (
    MAX_TRIGGER_BYTES,
    MAX_TRIGGER_ID,
    MqttConfig,
    Publisher,
    parse_trigger,
)
from inspector.station.outbox import Outbox
from inspector.station.reporter import Reporter
from tests.integration._mqtt_harness import wait_until
from tests.integration._station_proc import station_yaml

PREFIX = "inspector/v1/line1"


def config(broker, **kw) -> MqttConfig:
    kw.setdefault("station", "line1")
    kw.setdefault("reconnect_min_delay", 0.1)
    kw.setdefault("reconnect_max_delay", 0.5)
    return MqttConfig(host=broker.host, port=broker.port, **kw)


# -- triggers --------------------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=12,
)
PAYLOADS = st.one_of(
    st.binary(max_size=300),
    st.dictionaries(
        st.sampled_from(["part_id", "correlation_id", "x"]),
        JSON | st.text(min_size=100, max_size=300) | st.integers(-(2**70), 2**70),
    ).map(lambda d: json.dumps(d).encode()),
    st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 3000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
)


@given(payload=PAYLOADS)
@settings(max_examples=300, deadline=None)
def test_generated_trigger_payloads_give_a_bounded_trigger_or_value_error(payload):
    try:
        trig = parse_trigger(payload)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert len(payload) <= MAX_TRIGGER_BYTES
    for v in (trig.part_id, trig.correlation_id):
        assert v is None or (0 < len(v) <= MAX_TRIGGER_ID and v.isprintable())


@pytest.mark.mqtt
def test_hostile_triggers_are_counted_and_the_station_keeps_listening(broker, tmp_path):
    import paho.mqtt.client as mqtt

    outbox = Outbox(tmp_path / "outbox.sqlite")
    pub = Publisher(config(broker, triggers=True), outbox).start()
    wait_until(pub.trigger_subscribed.is_set, 10, "the trigger subscription")
    sender = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2, client_id="plc")
    sender.connect(broker.host, broker.port)
    sender.loop_start()
    hostile = [
        b"[" * 3000 + b"]" * 3000,  # RecursionError in json: it used to kill paho's thread
        b"{" + b'"a":{' * 3000 + b"}" * 3001,
        b"x" * 1_000_000,
        json.dumps({"part_id": "P" * 10_000}).encode(),
        json.dumps({"correlation_id": "c\nforged log line"}).encode(),
        json.dumps({"part_id": ["a"]}).encode(),
        b'{"part_id": "\xff"}',
    ]
    for p in hostile:
        sender.publish(f"{PREFIX}/trigger", p, qos=1).wait_for_publish(10)
    sender.publish(f"{PREFIX}/trigger", json.dumps({"part_id": "good"}), qos=1)
    trig = pub.next_trigger(timeout=10)
    assert trig is not None and trig.part_id == "good"
    status = pub.status()
    assert status.bad_triggers == len(hostile) and status.triggers == 1
    assert pub.connected and status.connected  # and that is the truth: the thread runs
    sender.disconnect()
    sender.loop_stop()
    pub.close()
    outbox.close()


def test_an_exception_in_any_callback_is_caught_and_counted(tmp_path):
    pytest.importorskip("paho.mqtt.client")
    with Outbox(tmp_path / "o.sqlite") as outbox:
        pub = Publisher(MqttConfig(station="s1"), outbox)

        def boom(*args):
            raise RecursionError("maximum recursion depth exceeded")

        pub._guarded(boom)(None, None, None)
        assert pub.status().callback_errors == 1


# -- results a broker will not take ----------------------------------------------------
@pytest.mark.mqtt
@pytest.mark.parametrize("protocol", ["3.1.1", "5"])
def test_a_result_the_broker_will_not_take_is_dead_lettered_not_blocking(
    mosquitto, collector, make_result, tmp_path, protocol
):
    broker = mosquitto(extra=["max_packet_size 4096"])
    sub = collector(broker, f"{PREFIX}/result")
    path = tmp_path / "outbox.sqlite"
    outbox = Outbox(path)
    # 3.1.1 cannot learn the broker's limit: the config's max_payload guards it. MQTT 5
    # learns it from the CONNACK, so the default max_payload (128 KiB) is enough there.
    extra = {"max_payload": 3500} if protocol == "3.1.1" else {}
    pub = Publisher(config(broker, protocol=protocol, **extra), outbox).start()
    rep = Reporter(outbox, pub)
    results = [make_result(i) for i in range(6)]
    results[2] = make_result(2, part_id="P" * 8000)  # a huge id: a 9 KB result
    for r in results:
        rep.report(r)
    assert pub.flush(20)
    want = [r.id for i, r in enumerate(results) if i != 2]
    wait_until(lambda: len(sub.documents(f"{PREFIX}/result")) >= 5, 20, "5 results")
    got = []
    for d in sub.documents(f"{PREFIX}/result"):
        if d["id"] not in got:
            got.append(d["id"])
    assert got == want  # in order, none held back by the one the broker will not take
    assert pub.status().dead_letters == 1 and outbox.depth() == 0
    ((item, reason),) = outbox.dead_letters()
    assert item.id == results[2].id and ("over the limit" in reason)
    rep.close()
    # The dead letter survives a restart and is not published again.
    with Outbox(path) as again:
        assert again.depth() == 0 and again.dead_letter_count() == 1


# -- a full disk -----------------------------------------------------------------------
def test_a_full_disk_stops_the_station_non_zero_and_names_the_lost_results(station_model, tmp_path):
    cfg = load_station_config(
        station_yaml(
            tmp_path,
            station_model,
            station="local",
            outbox={"commit_timeout_s": 1.0, "flush_timeout_s": 0.5},
        )
    )
    station = Station(cfg, out=io.StringIO())
    station.start()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            station.run(max_parts=10_000)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_until(lambda: station.metrics.parts >= 3, 60, "3 parts")
        box = station.reporter.outbox
        with box._lock:  # the disk is full now: SQLite reports SQLITE_FULL on growth
            pages = box._db.execute("PRAGMA page_count").fetchone()[0]
            box._db.execute(f"PRAGMA max_page_count={pages}")
        thread.join(60)
    finally:
        station.request_stop()
        thread.join(30)
    assert not thread.is_alive()
    assert len(raised) == 1, station.out.getvalue()
    msg = str(raised[0])
    assert "\n" not in msg and "outbox commits failed" in msg and "disk is full" in msg
    out = station.out.getvalue()
    assert "OUTBOX COMMITS FAIL" in out
    lines = [ln for ln in out.splitlines() if "stopped:" in ln]
    assert lines and "kept in the outbox" not in lines[-1]
    with Outbox(cfg.outbox.path) as box:
        committed = box.depth()
    # Every part is either committed or named lost; no part was taken after the failure
    # beyond those already decided.
    lost = station.reporter.lost
    assert committed + len(lost) == station.metrics.parts
    if lost:
        assert "LOST" in lines[-1] and f"{len(lost)} results could not be committed" in msg
        assert all(rid in msg for rid in lost[:10])
    else:
        assert "no result was lost" in msg


# -- station YAML ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, match",
    [
        ("station_id: a\nstation_id: b\n", "duplicate key"),
        ("station_id: [a, b]\n", "expected one value"),
        ("station_id: a\nmetrics_port: 9100\nmetrics_host: 0.0.0.0\n", "not a loopback"),
        ("station_id: a\nmqtt:\n  max_payload: 10\n", "max_payload"),
        ('station_id: "line\\n1"\n', "station_id"),
        ('station_id: "a\\u0000b"\n', "station_id"),
        ("station_id: " + "x" * 300 + "\n", "station_id"),
        ("camera:\n  driver: {a: 1}\nstation_id: a\n", "expected one value"),
        ("station_id: a\nx: " + "[" * 5000 + "]" * 5000 + "\n", "nesting|deep"),
        (
            'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
            + "".join(
                f"{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
                for n, p in zip("bcdefgh", "abcdefg")
            )
            + "station_id: a\n",
            "too large|alias|unknown key",
        ),
    ],
)
def test_hostile_station_yaml_is_one_line_exit_2(tmp_path, capsys, text, match):
    import re

    cfg = tmp_path / "station.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError):
        load_station_config(cfg)
    assert main(["run", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err), err


@given(
    doc=st.dictionaries(
        st.sampled_from(["station_id", "camera", "mqtt", "outbox", "trigger", "status_interval"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=8), inner, max_size=3)
            ),
            max_leaves=8,
        ),
    )
)
@settings(max_examples=150, deadline=None)
def test_generated_station_yaml_loads_or_raises_one_config_error(tmp_path_factory, doc):
    path = tmp_path_factory.mktemp("y") / "station.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML
    try:
        load_station_config(path)
    except ConfigError as exc:
        assert "\n" not in str(exc).strip()
