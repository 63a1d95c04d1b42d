"""A fleet on one registry: stations that name ``model: registry:line1@...`` run the
version their channel and share give them, and follow a promotion or a rollback on
their next part; a version that cannot take over leaves the running one in place."""

from __future__ import annotations

import io
import json
from pathlib import Path

import paho.mqtt.client as mqtt

from inspector.cli import main
from inspector.footage import channels as ch
from inspector.footage.registry import register
from inspector.station.config import load_station_config
from inspector.station.console.config import ConsoleSection
from inspector.station.console.hub import ConsoleHub
from inspector.station.loop import Station
from inspector.station.result import SCHEMA_ROLLOUT, validate_result
from tests.integration._mqtt_harness import wait_until
from tests.integration._station_proc import StationProc, station_yaml


def _registry(folder: Path, model: Path, n: int) -> Path:
    root = folder / "registry"
    for _ in range(n):
        register(root, model, metrics={}, profile_sha256="", footage_manifest=None)
    return root


def _yaml(folder: Path, model: Path, ref: str, reg: Path, **kw) -> Path:
    """A station config (``station_yaml``) whose model is ``ref`` in ``reg``."""
    import yaml

    path = station_yaml(folder, model, **kw)
    doc = yaml.safe_load(path.read_text())
    doc["model"] = {"path": ref, "registry": str(reg)}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _station_id(inside: bool, share: int = 20) -> str:
    """A station id whose hash puts it inside (or outside) a canary of ``share`` %."""
    return next(f"cell-{i}" for i in range(1000) if (ch.bucket(f"cell-{i}") < share) == inside)


def _renamed_classes(model: Path, out: Path) -> Path:
    """``model`` with other class names in its metadata: a valid ONNX file whose contract
    does not fit a station running ``model``."""
    import onnx

    m = onnx.load(str(model))
    for p in m.metadata_props:
        if p.key.endswith("classes"):
            p.value = json.dumps([f"{c}_x" for c in json.loads(p.value)])
    onnx.save(m, str(out))
    return out


def test_a_station_follows_its_line_part_by_part(station_model, tmp_path):
    reg = _registry(tmp_path, station_model, 2)
    ch.promote(reg, "line1", 1, "stable")
    cfg = load_station_config(
        _yaml(tmp_path, station_model, "registry:line1@stable", reg, station="solo")
    )
    out = io.StringIO()
    st = Station(cfg, out=out)
    st.start()
    try:
        last = []

        def part() -> tuple[str, str]:
            r = st.step()
            assert r is not None and r.error is None, r
            last.append(r)
            d = r.to_dict()
            validate_result({**d, "seq": 1})  # committed in the background: no seq yet
            assert d["schema"] == SCHEMA_ROLLOUT
            return d["model"]["version"], d["model"]["channel"]

        assert part() == ("v0001", "stable")
        assert "-> v0001 (stable)" in out.getvalue()  # the banner
        ch.promote(reg, "line1", 2, "canary", 100)
        assert part() == ("v0002", "canary")
        assert "registry:line1@stable: v0001 (stable) -> v0002 (canary)" in out.getvalue()
        assert st.metrics.model_switches == 1
        # The console's model line and each of its parts name the version.
        hub = ConsoleHub(st, ConsoleSection())
        assert (hub.info()["model"]["version"], hub.info()["model"]["channel"]) == (
            "v0002", "canary")  # fmt: skip
        doc = hub._take(0.0, last[-1], None).doc
        assert (doc["model_version"], doc["model_channel"]) == ("v0002", "canary")
        ch.promote(reg, "line1", 2, "stable")  # graduates: same model, another channel
        assert part() == ("v0002", "stable")
        ch.rollback(reg, "line1", "stable")
        assert part() == ("v0001", "stable")

        # Versions that cannot take over: unreadable, and a contract that does not fit.
        (tmp_path / "broken.onnx").write_bytes(b"not an onnx model")
        register(reg, tmp_path / "broken.onnx", metrics={}, profile_sha256="",
                 footage_manifest=None)  # v0003  # fmt: skip
        odd = _renamed_classes(station_model, tmp_path / "odd.onnx")
        register(reg, odd, metrics={}, profile_sha256="", footage_manifest=None)  # v0004
        ch.promote(reg, "line1", 3, "canary", 100)
        assert part() == ("v0001", "stable")
        assert st.metrics.errors["model"] == 1
        ch.promote(reg, "line1", 4, "canary", 100)
        assert part() == ("v0001", "stable")
        assert st.metrics.errors["model"] == 2
        assert part() == ("v0001", "stable") and st.metrics.errors["model"] == 2  # once each
        assert st.metrics.model_switches == 3
    finally:
        st.close()


def _online(sub_docs, station: str) -> bool:
    docs = sub_docs(f"inspector/v1/{station}/status")
    return bool(docs) and docs[-1]["state"] == "online"


def _status_model(sub_docs, station: str) -> tuple[str, str] | None:
    docs = sub_docs(f"inspector/v1/{station}/status")
    model = docs[-1].get("model") if docs else None
    return (model["version"], model["channel"]) if model else None


def _trigger_all(broker, stations: list[str], part: str) -> None:
    sender = mqtt.Client(callback_api_version=mqtt.CallbackAPIVersion.VERSION2)
    sender.connect(broker.host, broker.port)
    sender.loop_start()
    try:
        for s in stations:
            body = json.dumps({"part_id": f"{s}-{part}"})
            sender.publish(f"inspector/v1/{s}/trigger", body, qos=1).wait_for_publish(5)
    finally:
        sender.disconnect()
        sender.loop_stop()


def test_a_fleet_picks_by_channel_and_share_and_a_rollback_reaches_every_station(
    station_model, broker, collector, tmp_path
):
    """Four station processes on one registry and one broker, one part each before and
    after ``inspector models rollback``: every station's next part runs what the line
    says now."""
    reg = _registry(tmp_path, station_model, 3)
    r = ["--registry", str(reg)]
    for argv in (["promote", "v1", "--to", "stable"], ["promote", "v2", "--to", "stable"],
                 ["promote", "v3", "--to", "canary", "--share", "20"],
                 ["promote", "v1", "--to", "shadow"]):  # fmt: skip
        assert main(["models", *argv, "--line", "line1", *r]) == 0
    inside, outside = _station_id(True), _station_id(False)
    fleet = {  # station id -> (what it follows, before the rollback, after it)
        inside: ("stable", ("v0003", "canary"), ("v0001", "stable")),
        outside: ("stable", ("v0002", "stable"), ("v0001", "stable")),
        "trial": ("canary", ("v0003", "canary"), ("v0001", "stable")),
        "shadowing": ("shadow", ("v0001", "shadow"), ("v0001", "shadow")),
    }
    assert ch.bucket("trial") >= 20  # outside the share: @canary alone puts it on the canary
    sub = collector(broker, "inspector/v1/#")
    procs = []
    try:
        for sid, (follow, _, _) in fleet.items():
            cfg = _yaml(tmp_path / sid, station_model, f"registry:line1@{follow}", reg,
                        station=sid, port=broker.port, trigger={"mode": "mqtt"})  # fmt: skip
            procs.append(StationProc(cfg))
        for sid in fleet:
            wait_until(lambda sid=sid: _online(sub.documents, sid), 60, f"{sid} online")
        # The retained status names the version and channel each station runs.
        assert {sid: _status_model(sub.documents, sid) for sid in fleet} == {
            sid: before for sid, (_, before, _) in fleet.items()
        }

        def versions(part: str) -> dict[str, tuple[str, str]]:
            got = {}
            for sid in fleet:
                for d in sub.documents(f"inspector/v1/{sid}/result"):
                    if d["part_id"] == f"{sid}-{part}":
                        validate_result(d)
                        got[sid] = (d["model"]["version"], d["model"]["channel"])
            return got

        _trigger_all(broker, list(fleet), "p1")
        wait_until(lambda: len(versions("p1")) == len(fleet), 30, "one result per station")
        assert versions("p1") == {sid: before for sid, (_, before, _) in fleet.items()}

        assert main(["models", "rollback", "--line", "line1", "--channel", "stable",
                     "--note", "false alarms", *r]) == 0  # fmt: skip
        _trigger_all(broker, list(fleet), "p2")
        wait_until(lambda: len(versions("p2")) == len(fleet), 30, "the next part of each")
        assert versions("p2") == {sid: after for sid, (_, _, after) in fleet.items()}
        for sid, (_, _, after) in fleet.items():  # a switch publishes the status again
            wait_until(lambda s=sid, a=after: _status_model(sub.documents, s) == a, 10, sid)
    finally:
        for p in procs:
            p.stop()
    logs = {sid: p.text() for sid, p in zip(fleet, procs)}
    assert "registry:line1@stable: v0003 (canary) -> v0001 (stable)" in logs[inside]
    assert "registry:line1@stable: v0002 (stable) -> v0001 (stable)" in logs[outside]
    assert "registry:line1@shadow: v" not in logs["shadowing"]  # it never switched
