"""The station end to end: ``inspector run`` as a process, a real mosquitto, a real model.

Each test starts the station with a YAML it writes, lets an independent paho
subscriber collect what arrives, and checks delivery (each id once after
de-duplication, seq order), the schema, and the station's behaviour when the
broker, the process or the credentials go wrong.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from inspector.station.outbox import Outbox
from inspector.station.result import validate_result
from tests.integration._mqtt_harness import Collector, make_tls_files, wait_until
from tests.integration._station_proc import (
    StationProc,
    committed,
    first_copies,
    station_yaml,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _topic(station: str, leaf: str) -> str:
    return f"inspector/v1/{station}/{leaf}"


def _check_delivery(docs: list[dict], expected_ids: list[str] | None = None) -> list[dict]:
    firsts = first_copies(docs)
    seqs = [d["seq"] for d in firsts]
    assert seqs == sorted(seqs), "results arrived out of seq order after de-duplication"
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a gap in seq: a result was lost"
    if expected_ids is not None:
        assert [d["id"] for d in firsts] == expected_ids
    return firsts


def test_500_parts_arrive_once_and_valid(station_model, broker, collector, tmp_path):
    cfg = station_yaml(tmp_path, station_model, station="st500", port=broker.port)
    sub = collector(broker, _topic("st500", "result"))
    proc = StationProc(cfg, "--max-parts", "500")
    assert proc.wait(90) == 0, proc.text()
    wait_until(lambda: len(first_copies(sub.documents(_topic("st500", "result")))) >= 500, 20,
               "500 results at the subscriber")  # fmt: skip
    firsts = _check_delivery(sub.documents(_topic("st500", "result")))
    assert len(firsts) == 500 and firsts[0]["seq"] == 1
    assert [d["id"] for d in firsts] == [d["id"] for d in committed(tmp_path / "results.jsonl")]
    for d in firsts:
        validate_result(d)
        assert d["station"] == "st500" and d["error"] is None
        assert d["verdict"] in ("ok", "defect") and len(d["model"]["sha256"]) == 64
        assert d["profile"]["name"] == "lcd_panel" and d["glimpse_path"]
    with Outbox(tmp_path / "outbox.sqlite") as box:
        assert box.depth() == 0  # every result was acknowledged before exit
    text = proc.text()
    assert "model    " in text and "sha256" in text and "trigger  free-run" in text
    assert "parts/s" in text and "broker connected" in text


def test_broker_restarts_twice_no_loss_order_kept(station_model, mosquitto, tmp_path):
    # Graceful broker stops with persistence and a persistent subscriber session, so what
    # the broker acknowledged survives its restart (docs/mqtt.md, "a gap in seq").
    broker = mosquitto(persistence=True)
    topic = _topic("strs", "result")
    sub = Collector(broker, topic, persistent=True, client_id="station-restart-collector")
    try:
        cfg = station_yaml(tmp_path, station_model, station="strs", port=broker.port)
        proc = StationProc(cfg, "--max-parts", "400")
        jsonl = tmp_path / "results.jsonl"
        for mark in (100, 220):
            wait_until(lambda m=mark: len(committed(jsonl)) >= m, 60, f"{mark} parts committed")
            broker.stop()
            time.sleep(1.5)  # parts keep coming and wait in the outbox
            broker.start()
        assert proc.wait(90) == 0, proc.text()
        wait_until(lambda: len(first_copies(sub.documents(topic))) >= 400, 30, "400 results")
        ids = [d["id"] for d in committed(jsonl)]
        assert len(ids) == 400
        _check_delivery(sub.documents(topic), expected_ids=ids)
        assert "lost the broker" in proc.text()
    finally:
        sub.close()


def test_station_sigkilled_and_restarted_loses_nothing(station_model, broker, collector, tmp_path):
    topic = _topic("stkill", "result")
    sub = collector(broker, topic)
    cfg = station_yaml(tmp_path, station_model, station="stkill", port=broker.port)
    jsonl = tmp_path / "results.jsonl"
    first = StationProc(cfg)
    wait_until(lambda: len(committed(jsonl)) >= 120, 60, "120 parts committed")
    first.signal(signal.SIGKILL)
    first.wait(10)
    before = committed(jsonl)
    second = StationProc(cfg, "--max-parts", "40")
    assert second.wait(60) == 0, second.text()
    ids = [d["id"] for d in committed(jsonl)]
    assert len(ids) >= len(before) + 40
    wait_until(lambda: {d["id"] for d in sub.documents(topic)} >= set(ids), 20, "all results")
    firsts = _check_delivery(sub.documents(topic))
    # Whatever was committed before the kill arrived (a result committed in the instant
    # before the kill may precede its jsonl line, so the outbox's seq is the reference).
    assert {d["id"] for d in before} <= {d["id"] for d in firsts}
    assert firsts[0]["seq"] == 1 and firsts[-1]["seq"] == len(firsts)


def test_password_and_acl(station_model, mosquitto, collector, tmp_path):
    acl = (
        "user station\ntopic write inspector/v1/stacl/#\ntopic read inspector/v1/stacl/trigger\n"
        "user reader\ntopic read inspector/v1/#\n"
    )
    broker = mosquitto(users={"station": "s3cret", "reader": "r3ad"}, acl=acl)
    topic = _topic("stacl", "result")
    sub = collector(broker, topic, username="reader", password="r3ad")
    mqtt = {"username": "station", "password_env": "STATION_MQTT_PW", "protocol": "5"}

    good = station_yaml(tmp_path / "good", station_model, station="stacl", port=broker.port,
                        mqtt=mqtt)  # fmt: skip
    proc = StationProc(good, "--max-parts", "30", env={"STATION_MQTT_PW": "s3cret"})
    assert proc.wait(60) == 0, proc.text()
    wait_until(lambda: len(first_copies(sub.documents(topic))) >= 30, 20, "30 results")
    assert len(_check_delivery(sub.documents(topic))) == 30

    bad = station_yaml(tmp_path / "bad", station_model, station="stacl", port=broker.port,
                       mqtt=mqtt, outbox={"flush_timeout_s": 1.0})  # fmt: skip
    proc = StationProc(bad, "--max-parts", "25", env={"STATION_MQTT_PW": "wrong"})
    assert proc.wait(60) == 0, proc.text()
    text = proc.text()
    assert "refused the connection" in text and "Not authorized" in text
    assert "broker DOWN (broker 127.0.0.1" in text  # the status line says why
    assert "Traceback" not in text
    with Outbox(tmp_path / "bad" / "outbox.sqlite") as box:
        assert box.depth() == 25  # kept for the next start, none lost
    assert len(first_copies(sub.documents(topic))) == 30  # nothing from the bad station


def test_tls_with_generated_certificates(station_model, mosquitto, collector, tmp_path):
    tls = make_tls_files(tmp_path / "pki")
    broker = mosquitto(tls=tls)
    topic = _topic("sttls", "result")
    sub = collector(broker, topic, tls=tls)
    mqtt = {"tls": {"ca": str(tls.ca), "cert": str(tls.client_cert), "key": str(tls.client_key)}}
    cfg = station_yaml(tmp_path, station_model, station="sttls", port=broker.port, mqtt=mqtt)
    proc = StationProc(cfg, "--max-parts", "20")
    assert proc.wait(60) == 0, proc.text()
    wait_until(lambda: len(first_copies(sub.documents(topic))) >= 20, 20, "20 results over TLS")
    assert len(_check_delivery(sub.documents(topic))) == 20
    assert " TLS" in proc.text()


def test_triggers_echoed_then_sigterm_exits_offline(station_model, broker, collector, tmp_path):
    import paho.mqtt.client as mqtt

    station = "sttrig"
    sub = collector(broker, "inspector/v1/sttrig/#")
    footage = tmp_path / "footage"
    cfg = station_yaml(tmp_path, station_model, station=station, port=broker.port,
                       trigger={"mode": "mqtt"}, footage={"path": str(footage)})  # fmt: skip
    proc = StationProc(cfg)

    def state() -> str | None:
        docs = sub.documents(_topic(station, "status"))
        return docs[-1]["state"] if docs else None

    # The station subscribes to triggers before it publishes "online" on the same link,
    # so once "online" is here the broker routes triggers to it.
    wait_until(lambda: state() == "online", 30, "the station online")
    sender = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2)
    sender.connect(broker.host, broker.port)
    sender.loop_start()
    try:
        for i in range(50):
            body = json.dumps({"part_id": f"P-{i:03d}", "correlation_id": f"corr-{i}"})
            sender.publish(_topic(station, "trigger"), body, qos=1).wait_for_publish(5)
    finally:
        sender.disconnect()
        sender.loop_stop()
    topic = _topic(station, "result")
    wait_until(lambda: len(first_copies(sub.documents(topic))) >= 50, 30, "50 results")
    firsts = _check_delivery(sub.documents(topic))
    assert [d["correlation_id"] for d in firsts] == [f"corr-{i}" for i in range(50)]
    assert [d["part_id"] for d in firsts] == [f"P-{i:03d}" for i in range(50)]
    assert all(d["trigger_part_id"] == d["part_id"] for d in firsts)
    for d in firsts:
        validate_result(d)
    assert any(d["footage"] for d in firsts)

    proc.signal(signal.SIGTERM)
    assert proc.wait(30) == 0, proc.text()
    # Frames are written by a background thread (the loop never waits on the disk
    # unless the queue is full) and flushed on exit: every frame a result names is
    # on disk once the station has stopped, not necessarily when its result arrives.
    for d in firsts:
        if d["footage"] is not None:
            assert (footage / d["footage"]).is_file(), d["footage"]
    wait_until(lambda: state() == "offline", 10, "status offline")
    last = sub.documents(_topic(station, "status"))[-1]
    assert last["reason"] == "closed"
    late = Collector(broker, _topic(station, "status"))  # a newcomer gets the retained one
    try:
        wait_until(lambda: late.documents(_topic(station, "status")), 10, "retained status")
        assert late.documents(_topic(station, "status"))[-1]["state"] == "offline"
    finally:
        late.close()
    assert "trigger  mqtt" in proc.text()
