"""One guarded YAML loader: TrainConfig and StationConfig get the profile loader's guards."""

from __future__ import annotations

import pytest

from inspector.errors import ConfigError
from inspector.station.config import StationConfig, load_station_config
from inspector.train.config import TrainConfig
from inspector.yamlio.dataclass_load import load_dataclass_text
from inspector.yamlio.located import MAX_DEPTH

BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefg", "bcdefgh")
)


@pytest.mark.parametrize("cls", [TrainConfig, StationConfig])
def test_duplicate_keys_are_refused_with_their_line(cls):
    key = "seed" if cls is TrainConfig else "station_id"
    value = "1" if cls is TrainConfig else "s1"
    with pytest.raises(
        ConfigError, match=rf"x.yaml:2:1: duplicate key '{key}' \(first at line 1\)"
    ):
        load_dataclass_text(cls, f"{key}: {value}\n{key}: {value}\n", "x.yaml")


@pytest.mark.parametrize("cls", [TrainConfig, StationConfig])
def test_alias_bombs_and_deep_nesting_are_refused(cls):
    with pytest.raises(ConfigError, match="document too large"):
        load_dataclass_text(cls, BOMB, "x.yaml")
    deep = "a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n"
    with pytest.raises(ConfigError, match="nesting deeper than"):
        load_dataclass_text(cls, deep, "x.yaml")


def test_unsafe_tags_and_wrong_types_are_located(tmp_path):
    with pytest.raises(ConfigError, match=r"x.yaml:1:\d+: .*unsupported tag|x.yaml:1:\d+: YAML"):
        load_dataclass_text(TrainConfig, "seed: !!python/object:os.system ls\n", "x.yaml")
    with pytest.raises(ConfigError, match=r"x.yaml:1:7: seed: "):
        load_dataclass_text(TrainConfig, "seed: [1, 2]\n", "x.yaml")
    with pytest.raises(ConfigError, match="expected a mapping of settings, got a list"):
        load_dataclass_text(TrainConfig, "- 1\n", "x.yaml")


@pytest.mark.parametrize(
    "cls,text,message",
    [
        (TrainConfig, "seed: lots\n", "x.yaml:1:7: seed: expected int, got 'lots'"),
        (TrainConfig, "seed: 1.5\n", "x.yaml:1:7: seed: expected an integer, got 1.5"),
        (TrainConfig, "give_up_below: .nan\n", "x.yaml:1:16: give_up_below: expected a finite"),
        (TrainConfig, "give_up_below: high\n", "x.yaml:1:16: give_up_below: expected float"),
        (StationConfig, "station_id: [a]\n", "x.yaml:1:13: station_id: expected one value"),
        (StationConfig, "mqtt: 3\n", "x.yaml:1:7: mqtt: expected a mapping of settings"),
        (StationConfig, "mqtt:\n  port: high\n", "x.yaml:2:9: mqtt.port: expected int"),
    ],
)
def test_a_bad_value_names_its_key_once(cls, text, message):
    """The located path names the key; the message must not name it again
    ("seed: seed: expected int" was the bug)."""
    with pytest.raises(ConfigError) as info:
        load_dataclass_text(cls, text, "x.yaml")
    assert str(info.value).startswith(message), str(info.value)
    key = message.split(": ")[1].rsplit(".", 1)[-1]
    assert str(info.value).count(f"{key}:") == 1, str(info.value)


def test_station_config_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_station_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"station_id: \xff\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:1:13: not UTF-8"):
        load_station_config(bad)
