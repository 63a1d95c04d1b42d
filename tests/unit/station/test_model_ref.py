"""``model: registry:LINE@...`` in a station config: validated with one clear line."""

from __future__ import annotations

import pytest

from inspector import ConfigError
from inspector.station.config import ModelSection, StationConfig, load_station_config


def config(path: str, **model) -> StationConfig:
    return StationConfig(station_id="st1", model=ModelSection(path=path, **model))


@pytest.mark.parametrize(
    "path", ["registry:line1@stable", "registry:line1@canary", "registry:line1@shadow",
             "registry:line1@v0003", "registry:line-2.b@7"],
)  # fmt: skip
def test_registry_refs_validate(path):
    config(path).check()  # the registry folder is the station's to find, not the config's


@pytest.mark.parametrize(
    ("path", "model", "message"),
    [
        ("registry:line1", {}, "expected registry:LINE@stable, @canary, @shadow or a version"),
        ("registry:line1@latest", {}, "after @ give stable, canary, shadow or a version"),
        ("registry:../x@stable", {}, "line '../x'"),
        ("registry:line1@stable", {"backend": "tensorrt"}, "registry versions are ONNX files"),
        ("registry:line1@stable", {"registry": ""}, "model.registry"),
    ],
)
def test_bad_registry_refs_say_what_is_wrong(path, model, message):
    with pytest.raises(ConfigError, match=message):
        config(path, **model).check()


def test_a_bad_ref_in_yaml_names_its_line(tmp_path):
    cfg = tmp_path / "station.yaml"
    cfg.write_text("station_id: st1\nmodel:\n  path: registry:line1@beta\n")
    with pytest.raises(ConfigError) as info:
        load_station_config(cfg)
    assert "station.yaml" in str(info.value) and "registry:line1@beta" in str(info.value)
