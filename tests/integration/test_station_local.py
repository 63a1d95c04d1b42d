"""The station in this process: bad frames, a hung or failing camera, a full outbox,
metrics, and the errors an operator sees for a bad config or model (exit 2, one line)."""

from __future__ import annotations

import io
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from inspector import CameraDriver, ConfigError, Frame, ModelError
from inspector.cli import main
from inspector.station.config import apply_overrides, load_station_config
from inspector.station.loop import Station
from inspector.station.outbox import Outbox
from inspector.station.result import validate_result
from tests.integration._mqtt_harness import free_port, wait_until
from tests.integration._station_proc import REPO, committed, station_yaml


class FlakyCamera(CameraDriver):
    """A real driver that misbehaves on cue: ``script`` is a string of
    ``g`` (good frame), ``c`` (corrupt frame), ``h`` (hang until ``release()`` is true,
    then deliver a frame late), ``x`` (raise, as a device error does)."""

    def __init__(self, script: str, release=lambda: True) -> None:
        super().__init__()
        self.script = script
        self.release = release
        self.rng = np.random.default_rng(0)

    def frames(self) -> Iterator[Frame]:
        for i, op in enumerate(self.script):
            if op == "h":
                while not self.release():  # hang until the station has timed out
                    time.sleep(0.01)
                op = "g"  # the late frame still arrives
            if op == "x":
                raise OSError("USB device went away")
            img = self.rng.integers(0, 255, (128, 128), dtype=np.uint8)
            if op == "c":
                img = np.full((4, 128), np.nan, dtype=np.float32)  # garbage from the driver
            yield Frame(image=img, part_id=f"f{i}", timestamp=time.time(), source="flaky")


def _station(tmp_path: Path, model: Path, factory=None, **overrides) -> Station:
    cfg = load_station_config(station_yaml(tmp_path, model, station="local", **overrides))
    return Station(cfg, camera_factory=factory, out=io.StringIO())


def test_corrupt_frame_timeout_and_camera_error_become_error_results(station_model, tmp_path):
    scripts = iter(["gchgx", "gg"])  # the second open is the reopen after the error
    opened: list[FlakyCamera] = []
    holder: list[Station] = []

    def timed_out() -> bool:
        return holder[0].metrics.errors["camera_timeout"] >= 1

    def factory() -> FlakyCamera:
        cam = FlakyCamera(next(scripts), release=timed_out)
        opened.append(cam)
        return cam

    port = free_port()
    st = _station(tmp_path, station_model, factory,
                  camera={"timeout_s": 0.5, "reopen_delay_s": 0.0}, metrics_port=port)  # fmt: skip
    holder.append(st)
    st.start()
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    assert b"inspector_parts_total 0.0" in scraped
    assert st.run(max_parts=9) == 0
    docs = committed(tmp_path / "results.jsonl")
    for d in docs:
        validate_result(d)
    errors = [d["error"] for d in docs]
    assert errors[0] is None  # g
    assert errors[1].startswith("corrupt frame: expected uint8 pixels")  # c
    assert errors[2] == "camera timeout after 0.5 s"  # h: the timeout ...
    assert errors[3] is None  # ... and the late frame is the next part
    assert errors[4] is None  # g
    assert errors[5].startswith("camera error: OSError: USB device went away")  # x
    assert errors[6:] == [None, None]  # reopened: g g
    assert all(d["verdict"] is None and d["label"] is None for d in docs if d["error"])
    assert len(opened) == 2 and st.metrics.camera_reconnects == 1
    assert st.metrics.errors["corrupt_frame"] == 1 and st.metrics.errors["camera_timeout"] == 1
    # The second script ended: the station stopped cleanly after 8 parts.
    assert len(docs) == 8
    with Outbox(tmp_path / "outbox.sqlite") as box:
        assert box.depth() == 8  # MQTT off: results kept for a later run


def test_metrics_endpoint_counts_parts(station_model, tmp_path):
    port = free_port()
    st = _station(tmp_path, station_model, metrics_port=port)
    st.start()
    st.run(max_parts=5)
    # run() closed the endpoint; the registry still holds what it served.
    from prometheus_client import generate_latest

    text = generate_latest(st.metrics.registry).decode()
    assert "inspector_parts_total 5.0" in text
    assert "inspector_decision_latency_seconds_count 5.0" in text
    assert 'inspector_errors_total{kind="camera_timeout"} 0.0' in text


def test_full_outbox_stops_taking_parts(station_model, tmp_path):
    # A broker that is not there: nothing is acknowledged, the outbox fills at 5.
    st = _station(tmp_path, station_model, port=free_port(), outbox={"limit": 5,
                  "flush_timeout_s": 0.2}, status_interval=0.1)  # fmt: skip
    done = threading.Thread(target=st.run, kwargs={"max_parts": 50})
    done.start()
    try:
        wait_until(lambda: st.metrics.parts >= 5, 30, "5 parts")
        time.sleep(0.5)
        assert st.metrics.parts == 5  # waiting, not dropping
        assert "OUTBOX FULL" in st.out.getvalue()
        assert "outbox 5 FULL" in st.status_text()
        wait_until(lambda: st.metrics.errors["broker"] >= 1, 10, "a broker error counted")
    finally:
        st.request_stop()
        done.join(20)
    assert not done.is_alive()
    with Outbox(tmp_path / "outbox.sqlite") as box:
        assert box.depth() == 5


def test_zip_model_refused_with_export_first(tmp_path, capsys):
    fake = tmp_path / "model.zip"
    fake.write_bytes(b"PK\x03\x04 not for stations")
    cfg = station_yaml(tmp_path, fake)
    assert main(["run", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "export first" in err and "model.zip" in err


def test_bad_station_yaml_gives_file_line_col(tmp_path, capsys):
    cfg = tmp_path / "station.yaml"
    cfg.write_text("station_id: a\nmqtt:\n  host: h\n  port: high\n")
    assert main(["run", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{cfg}:4:9: mqtt.port: expected int, got 'high'" in err
    cfg.write_text("station_id: a\ncamera:\n  drivr: synthetic\n")
    with pytest.raises(
        ConfigError, match=r":3:3: camera.drivr: unknown key 'drivr' \(did you mean 'driver'"
    ):
        load_station_config(cfg)


def test_profile_must_match_the_model(station_model, tmp_path):
    with pytest.raises(ModelError, match="classes are ok, line, point"):
        _station(tmp_path, station_model,
                 profile=str(REPO / "reward_profiles" / "magnetic_tile.yaml"))  # fmt: skip


def test_flags_override_the_config(station_model, tmp_path):
    cfg = load_station_config(station_yaml(tmp_path, station_model, port=1883))
    out = apply_overrides(cfg, params={"size": "256"}, station_id="line9", no_mqtt=True,
                          footage=str(tmp_path / "f"), mqtt_port=1999)  # fmt: skip
    assert out.camera.params == {"size": "256", "seed": 1} and out.station_id == "line9"
    assert out.mqtt.enabled is False and out.mqtt.port == 1999
    assert out.footage.path == str(tmp_path / "f")
    other = apply_overrides(cfg, camera="folder", params={"path": "x"})
    assert other.camera.params == {"path": "x"}  # another driver: its own parameters only
    with pytest.raises(ConfigError, match="station_id"):
        apply_overrides(cfg, station_id="a/b")
    assert cfg.mqtt_config().topic_prefix == "inspector/v1/st1"


def test_shipped_station_configs_load(tmp_path):
    example = load_station_config(REPO / "stations" / "example.yaml")
    assert example.trigger.mode == "free-run" and example.mqtt.enabled
    # The Jetson config names certificates that exist only on a Jetson: point them here.
    text = (REPO / "deploy" / "jetson" / "station.yaml").read_text()
    for name in ("mqtt-ca.pem", "station.crt", "station.key"):
        (tmp_path / name).write_text("placeholder")
        text = text.replace(f"/etc/inspector/{name}", str(tmp_path / name))
    jetson = tmp_path / "station.yaml"
    jetson.write_text(text)
    cfg = load_station_config(jetson)
    assert cfg.model.backend == "tensorrt" and cfg.camera.driver == "opencv"
    assert cfg.mqtt_config().password_env == "INSPECTOR_MQTT_PASSWORD"
    assert cfg.mqtt_config().topic_prefix == "inspector/v1/jetson-line1-st01"
    assert cfg.footage.max_size_mb == 20480 and cfg.outbox.synchronous == "FULL"


def test_a_trigger_and_a_stop_wake_the_loop_without_a_poll(
    station_model, broker, tmp_path, monkeypatch
):
    # The loop's beat is an hour here: if a trigger or a stop waited for it, the result
    # would not come and the thread would not end within the test's bounds.
    import json

    import paho.mqtt.client as mqtt

    monkeypatch.setattr(Station, "BEAT_S", 3600.0)
    st = _station(tmp_path, station_model, port=broker.port, trigger={"mode": "mqtt"})
    st.start()
    loop = threading.Thread(target=st.run, daemon=True)
    loop.start()
    sender = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2)
    try:
        wait_until(st.publisher.trigger_subscribed.is_set, 20, "the trigger subscription")
        sender.connect(broker.host, broker.port)
        sender.loop_start()
        body = json.dumps({"part_id": "woken", "correlation_id": "c1"})
        sender.publish("inspector/v1/local/trigger", body, qos=1).wait_for_publish(10)
        wait_until(lambda: st.metrics.parts == 1, 30, "the triggered part")
        st.request_stop()
        loop.join(30)
        assert not loop.is_alive(), "the stop waited for the loop's beat"
    finally:
        sender.loop_stop()
        sender.disconnect()
        st.request_stop()
        loop.join(30)
    assert committed(tmp_path / "results.jsonl")[-1]["correlation_id"] == "c1"
