"""Roll-out channels: promote and rollback are logged, shares follow the station hash,
and a station's Rollout follows every change on its next part."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inspector.cli import main
from inspector.errors import FootageError, StationError
from inspector.footage import channels as ch
from inspector.footage.registry import register
from inspector.station.rollout import Rollout, parse_ref


@pytest.fixture
def registry(tmp_path) -> Path:
    root = tmp_path / "registry"
    for i in range(3):
        model = tmp_path / f"m{i}.onnx"
        model.write_bytes(f"model {i}".encode())
        register(root, model, metrics={}, profile_sha256="", footage_manifest=None)
    return root


def test_bucket_is_stable_and_spread():
    assert ch.bucket("line1-st01") == ch.bucket("line1-st01")
    buckets = [ch.bucket(f"st-{i:03d}") for i in range(1000)]
    assert all(0 <= b < 100 for b in buckets)
    # Roughly uniform: each share takes about its share of a large fleet.
    for share in ch.SHARES:
        frac = sum(b < share for b in buckets) / len(buckets)
        assert abs(frac - share / 100) < 0.05


def test_promote_canary_steps_and_graduate(registry):
    ch.promote(registry, "line1", 1, "stable", by="eng")
    s = ch.promote(registry, "line1", 2, "canary", 5, by="eng", note="new lighting")
    assert (s["stable"], s["canary"], s["share"], s["revision"]) == (1, 2, 5, 2)
    for share in (20, 75, 100):
        s = ch.promote(registry, "line1", 2, "canary", share)
    assert s["share"] == 100
    s = ch.promote(registry, "line1", 2, "stable")
    assert (s["stable"], s["canary"], s["share"]) == (2, None, 0)
    log = ch.history(registry, "line1")
    assert [e["action"] for e in log] == ["promote stable"] + ["promote canary"] * 4 + [
        "promote stable"
    ]
    assert log[1]["by"] == "eng" and log[1]["note"] == "new lighting"
    assert log[-1]["before"]["canary"] == 2 and log[-1]["after"]["stable"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((9, "stable", None), "no version v0009"),
        ((2, "canary", None), "a canary needs --share"),
        ((2, "canary", 50), "a canary needs --share, one of 5, 20, 75, 100"),
        ((2, "stable", 20), "--share is for the canary"),
        ((2, "beta", None), "channel 'beta'"),
    ],
)
def test_bad_promotions(registry, args, message):
    with pytest.raises(FootageError, match=message):
        ch.promote(registry, "line1", *args)
    assert ch.history(registry, "line1") == []


def test_bad_line_names(registry):
    for bad in ("../x", "a/b", "", ".hidden", "x" * 65):
        with pytest.raises(FootageError, match="line"):
            ch.promote(registry, bad, 1, "stable")


def test_rollbacks(registry):
    ch.promote(registry, "line1", 1, "stable")
    ch.promote(registry, "line1", 2, "stable")
    ch.promote(registry, "line1", 3, "canary", 20)
    s = ch.rollback(registry, "line1")  # the canary
    assert (s["stable"], s["canary"]) == (2, None)
    with pytest.raises(FootageError, match="no canary to roll back"):
        ch.rollback(registry, "line1")
    ch.promote(registry, "line1", 3, "canary", 75)
    s = ch.rollback(registry, "line1", "stable")  # back to v1, and no canary
    assert (s["stable"], s["canary"], s["share"]) == (1, None, 0)
    with pytest.raises(FootageError, match="no earlier stable"):
        ch.rollback(registry, "line1", "stable")
    assert ch.history(registry, "line1")[-1]["action"] == "rollback stable"


def test_assign_follows_the_share(registry):
    ch.promote(registry, "line1", 1, "stable")
    ch.promote(registry, "line1", 2, "canary", 20)
    ch.promote(registry, "line1", 3, "shadow")
    state = ch.read_state(registry, "line1")
    for i in range(200):
        sid = f"st-{i}"
        a = ch.assign(state, sid)
        assert (a.version, a.channel) == ((2, "canary") if ch.bucket(sid) < 20 else (1, "stable"))
        assert ch.assign(state, sid, "shadow") == ch.Assignment(3, "shadow", state["revision"])
        assert ch.assign(state, sid, "canary") == ch.Assignment(2, "canary", state["revision"])
    ch.rollback(registry, "line1")
    state = ch.read_state(registry, "line1")
    assert ch.assign(state, "st-1", "canary") == ch.Assignment(1, "stable", state["revision"])


def test_corrupt_state_is_an_error(registry):
    (registry / "channels").mkdir(exist_ok=True)
    (registry / "channels" / "line1.json").write_text(json.dumps({"stable": "v1"}))
    with pytest.raises(FootageError, match="stable: expected a version number"):
        ch.read_state(registry, "line1")
    (registry / "channels" / "line1.json").write_text("{")
    with pytest.raises(FootageError, match="not a channel state"):
        ch.read_state(registry, "line1")


def test_parse_ref():
    assert str(parse_ref("registry:line1@stable")) == "registry:line1@stable"
    assert parse_ref("registry:line1@v3").version == 3
    assert parse_ref("registry:line1@shadow").follow == "shadow"
    assert parse_ref("registry:line1@canary").follow == "canary"
    for bad, msg in (
        ("registry:line1", "expected registry:LINE@stable"),
        ("registry:../x@stable", "line"),
        ("registry:line1@latest", "give stable, canary, shadow or a version"),
    ):
        with pytest.raises(ValueError, match=msg):
            parse_ref(bad)


def loads(path: Path) -> str:
    return path.read_text()  # the "policy" is the model file's text


def test_rollout_follows_changes_on_the_next_part(registry):
    ch.promote(registry, "line1", 1, "stable")
    sid = next(f"st-{i}" for i in range(100) if ch.bucket(f"st-{i}") < 5)
    ro = Rollout(registry, parse_ref("registry:line1@stable"), sid, loads)
    assert (ro.policy, ro.label, ro.channel) == ("model 0", "v0001", "stable")
    assert ro.current() == ("model 0", False)
    ch.promote(registry, "line1", 2, "canary", 5)
    assert ro.current() == ("model 1", True) and ro.channel == "canary"
    ch.rollback(registry, "line1")
    assert ro.current() == ("model 0", True) and ro.channel == "stable"


def test_rollout_keeps_its_model_when_the_new_one_fails(registry, caplog):
    ch.promote(registry, "line1", 1, "stable")
    (registry / "v0002" / "model.onnx").write_text("broken")

    def picky(path: Path) -> str:
        from inspector.errors import ModelError

        if path.read_text() == "broken":
            raise ModelError(f"{path}: not an ONNX model")
        return path.read_text()

    ro = Rollout(registry, parse_ref("registry:line1@stable"), "st-1", picky)
    ch.promote(registry, "line1", 2, "stable")
    assert ro.current() == ("model 0", False) and ro.label == "v0001" and ro.failures == 1
    assert "cannot be loaded" in caplog.text
    assert ro.current() == ("model 0", False) and ro.failures == 1  # logged once


def test_rollout_refuses_to_start_without_a_model(registry):
    with pytest.raises(StationError, match="nothing promoted to stable yet"):
        Rollout(registry, parse_ref("registry:line1@stable"), "st-1", loads)
    ro = Rollout(registry, parse_ref("registry:line1@v2"), "st-1", loads)
    assert (ro.policy, ro.channel) == ("model 1", "pinned")


def test_models_cli_promote_rollback_channels(registry, capsys):
    r = ["--registry", str(registry)]
    assert main(["models", "promote", "v1", "--line", "line1", "--to", "stable", *r]) == 0
    assert main(["models", "promote", "2", "--line", "line1", "--to", "canary", "--share",
                 "20", "--by", "ana", "--note", "trial", *r]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "line line1 (revision 2): stable v0001, canary v0002 at 20 %" in out
    assert main(["models", "rollback", "--line", "line1", *r]) == 0
    assert main(["models", "channels", "--line", "line1", *r]) == 0
    out = capsys.readouterr().out
    assert "rollback canary" in out and "by ana" in out and "# trial" in out
    assert main(["models", "promote", "v7", "--line", "line1", "--to", "stable", *r]) == 2
    assert "no version v0007" in capsys.readouterr().err
