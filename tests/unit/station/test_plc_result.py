"""What the PLC is shown of a result: the model that decided it, registry version included."""

from __future__ import annotations

import json
from dataclasses import asdict

from inspector.station.opcua.handshake import PlcResult
from inspector.station.result import Result


def _result(**kw) -> Result:
    return Result.decided(
        station="plc1", part_id="P-1", classes=["ok", "line"], probabilities=[0.2, 0.8],
        label="line", captured_at=1.0, model_sha256="a" * 64, profile_name="lcd",
        profile_sha256="b" * 64, **kw,
    )  # fmt: skip


def test_the_plc_sees_the_model_of_a_result_document():
    item = PlcResult.from_result(
        7, _result(model_version="v0003", model_channel="canary").to_dict()
    )
    assert (item.model_sha256, item.profile_sha256) == ("a" * 64, "b" * 64)
    assert (item.model_version, item.model_channel) == ("v0003", "canary")
    plain = PlcResult.from_result(8, _result().to_dict())  # a station naming a model file
    assert (plain.model_sha256, plain.model_version, plain.model_channel) == ("a" * 64, "", "")


def test_rows_buffered_before_the_version_fields_still_load():
    row = asdict(PlcResult.from_result(1, _result().to_dict()))
    for key in ("model_version", "model_channel"):
        row.pop(key)
    assert PlcResult(**json.loads(json.dumps(row))).model_version == ""
