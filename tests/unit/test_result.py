"""The Result document and its JSON Schema (inspector.result/1)."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inspector.station.result import (
    SCHEMA,
    SCHEMA_ROLLOUT,
    SCHEMA_SHADOW,
    GlimpsePoint,
    Result,
    iso_utc,
    parse_iso_utc,
    result_schema,
    validate_result,
)


def decided(**kw) -> Result:
    args = dict(
        station="line1",
        part_id="p-1",
        classes=["ok", "crack", "blowhole"],
        probabilities=[0.1, 0.7, 0.2],
        label="crack",
        glimpse_path=[GlimpsePoint(0.5, 0.5, 0), {"x": 0.2, "y": 0.8, "zoom": 2}, (0.3, 0.3, 1)],
        steps=3,
        captured_at=1_700_000_000.25,
        decided_at=1_700_000_000.5,
        latency_ms=3.25,
        model_sha256="a" * 64,
        profile_name="magnetic-tile",
        profile_sha256="b" * 64,
    )
    args.update(kw)
    return Result.decided(**args)


def test_schema_file_is_valid_and_packaged():
    schema = result_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["enum"] == [SCHEMA, SCHEMA_SHADOW, SCHEMA_ROLLOUT]


def test_a_shadow_moves_the_version_compatibly():
    plain = {**decided().to_dict(), "seq": 7}
    assert plain["schema"] == SCHEMA and "shadow" not in plain  # no shadow: /1 exactly
    shadow = {"model_sha256": "c" * 64, "label": "line", "verdict": "defect",
              "confidence": 0.7, "probabilities": {"ok": 0.3, "line": 0.7},
              "glimpse_path": [{"x": 0.5, "y": 0.5, "zoom": 1}], "steps": 2,
              "latency_ms": 1.5}  # fmt: skip
    doc = Result.from_dict({**plain, "schema": SCHEMA_SHADOW, "shadow": shadow})
    out = doc.to_dict()
    assert out["schema"] == SCHEMA_SHADOW and out["shadow"] == shadow
    validate_result(out)
    skipped = {**plain, "schema": SCHEMA_SHADOW, "shadow": {"model_sha256": "", "skipped": "late"}}
    validate_result(skipped)
    with pytest.raises(ValueError):
        validate_result({**plain, "shadow": {"label": "ok"}})  # no model hash


def test_a_registry_model_moves_the_version_compatibly():
    r = decided(model_version="v0003", model_channel="canary").with_seq(2)
    d = r.to_dict()
    assert d["schema"] == SCHEMA_ROLLOUT
    assert d["model"] == {"sha256": "a" * 64, "version": "v0003", "channel": "canary"}
    validate_result(d)
    back = Result.from_dict(d)
    assert (back.model_version, back.model_channel) == ("v0003", "canary")
    failed = Result.failed(station="line1", part_id="p", error="camera timeout",
                           model_version="v0001", model_channel="pinned").with_seq(3)  # fmt: skip
    validate_result(failed.to_dict())
    with pytest.raises(ValueError, match="model"):
        validate_result({**d, "model": {"sha256": "", "version": "v3", "channel": "canary"}})
    with pytest.raises(ValueError, match="model"):
        validate_result({**d, "model": {"sha256": "", "version": "v0003", "channel": "beta"}})
    # A /1 document (a station that names a model file) is unchanged and still read.
    plain = decided().to_dict()
    assert plain["schema"] == SCHEMA and plain["model"] == {"sha256": "a" * 64}
    assert Result.from_dict({**plain, "seq": 1}).model_version is None


def test_decided_result_document():
    r = decided().with_seq(7)
    d = r.to_dict()
    validate_result(d)
    validate_result(r.to_json())
    assert d["schema"] == SCHEMA and d["seq"] == 7
    assert d["verdict"] == "defect" and d["label"] == "crack" and d["confidence"] == 0.7
    assert d["probabilities"] == {"ok": 0.1, "crack": 0.7, "blowhole": 0.2}
    assert d["glimpse_path"][1] == {"x": 0.2, "y": 0.8, "zoom": 2}
    assert d["captured_at"] == "2023-11-14T22:13:20.250000Z"
    assert d["model"] == {"sha256": "a" * 64}
    assert d["profile"] == {"name": "magnetic-tile", "sha256": "b" * 64}
    assert d["error"] is None and d["footage"] is None


def test_ok_verdict_follows_the_ok_class():
    assert decided(probabilities=[0.9, 0.05, 0.05], label="ok").verdict == "ok"
    good = decided(classes=["free", "crack"], probabilities=[0.8, 0.2], label="free")
    assert good.verdict == "ok"
    other = decided(classes=["crack", "good"], probabilities=[0.3, 0.7], label="good",
                    ok_class="good")  # fmt: skip
    assert other.verdict == "ok"


def test_error_result_has_no_verdict():
    r = Result.failed(station="line1", part_id="p-9", error="camera timeout after 2.0 s",
                      correlation_id="c-1", trigger_part_id="p-9").with_seq(1)  # fmt: skip
    d = r.to_dict()
    validate_result(d)
    assert d["verdict"] is None and d["label"] is None and d["confidence"] is None
    assert d["error"] == "camera timeout after 2.0 s" and d["correlation_id"] == "c-1"


def test_ids_are_unique():
    assert len({decided().id for _ in range(200)}) == 200


@pytest.mark.parametrize(
    "change, field",
    [
        ({"seq": None}, "seq"),
        ({"verdict": None}, "verdict"),  # a judged part needs a verdict
        ({"verdict": "maybe"}, "verdict"),
        ({"error": "corrupt frame"}, "confidence|label|verdict"),  # errors claim no verdict
        ({"captured_at": "2023-11-14 22:13:20"}, "captured_at"),
        ({"confidence": 1.5}, "confidence"),
        ({"glimpse_path": [{"x": 0.5, "y": 0.5}]}, "glimpse_path"),
        ({"model": {"sha256": "XYZ"}}, "model"),
        ({"extra": 1}, r"\(document\)"),
        ({"schema": "inspector.result/2"}, "schema"),
    ],
)
def test_schema_rejects_bad_documents(change, field):
    d = decided().with_seq(1).to_dict()
    d.update(change)
    with pytest.raises(ValueError, match=field):
        validate_result(d)


def test_builder_rejects_broken_decisions():
    with pytest.raises(ValueError, match="not one of the classes"):
        decided(label="fray")
    with pytest.raises(ValueError, match="non-finite"):
        decided(probabilities=[math.nan, 0.5, 0.5])
    with pytest.raises(ValueError, match="3 classes but 2"):
        decided(probabilities=[0.5, 0.5])
    with pytest.raises(ValueError, match="inspector.result/1"):
        Result.from_dict({"schema": "other"})


probs = st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=6)


@given(
    p=probs,
    t=st.floats(0, 4e9, allow_nan=False),
    path=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.integers(0, 5)), max_size=8),
    corr=st.none() | st.text(max_size=20),
)
def test_json_round_trip_is_exact_and_valid(p, t, path, corr):
    classes = [f"c{i}" for i in range(len(p))]
    r = Result.decided(
        station="s", part_id="p", classes=classes, probabilities=p, label=classes[-1],
        glimpse_path=path, steps=len(path), captured_at=t, decided_at=t, correlation_id=corr,
    ).with_seq(3)  # fmt: skip
    d = json.loads(r.to_json())
    validate_result(d)
    assert Result.from_json(r.to_json()).to_dict() == d


@given(t=st.floats(0, 4e9, allow_nan=False))
def test_iso_utc_round_trips_to_the_microsecond(t):
    s = iso_utc(t)
    assert s.endswith("Z")
    assert abs(parse_iso_utc(s) - t) <= 1e-6
