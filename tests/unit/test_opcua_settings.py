"""``opcua:`` in a station config: users as a list of sections, and what is refused."""

from __future__ import annotations

import pytest

from inspector.errors import ConfigError
from inspector.station.config import load_station_config


def load(tmp_path, body: str):
    p = tmp_path / "station.yaml"
    p.write_text("station_id: s1\nmodel: {path: m.onnx}\n" + body)
    return load_station_config(p)


def test_users_load_as_a_list_of_sections(tmp_path, monkeypatch):
    monkeypatch.setenv("PLC_PW", "s3cret")
    users = "  users:\n    - {name: plc, password_env: PLC_PW}\n    - {name: hmi, password: pw}\n"
    cfg = load(tmp_path, "opcua:\n  enabled: true\n  endpoint: opc.tcp://10.1.2.3:4840/x\n" + users)
    assert cfg.opcua.passwords() == {"plc": "s3cret", "hmi": "pw"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("  users:\n    - {name: plc, passwrd: x}\n", r"opcua\.users\[0\]\.passwrd: unknown key"),
        ("  users:\n    - {name: plc, password_env: NOPE_UNSET}\n", "NOPE_UNSET is not set"),
        ("  users:\n    - {name: a, password: x}\n    - {name: a, password: y}\n", "distinct"),
        ("  endpoint: opc.tcp://0.0.0.0:4840/x\n", "configure opcua.users"),
        ("  endpoint: http://127.0.0.1:4840/x\n", "opcua.endpoint must look like"),
        ("  secure_only: true\n", "secure_only needs certificate"),
        ("  certificate: c.der\n", "certificate and private_key go together"),
        ("  buffer: 0\n", "opcua.buffer"),
    ],
)
def test_bad_opcua_settings_are_one_line_errors(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message) as err:
        load(tmp_path, "opcua:\n  enabled: true\n" + body)
    assert "\n" not in str(err.value)


def test_trigger_mode_opcua_needs_the_server(tmp_path):
    with pytest.raises(ConfigError, match="trigger.mode opcua needs opcua.enabled"):
        load(tmp_path, "trigger: {mode: opcua}\nmqtt: {enabled: false}\n")
