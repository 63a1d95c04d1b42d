"""The station's footage recorder: what it keeps, the size limit, atomic writes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from inspector.footage.writer import FootageWriter


def _result(i: int, verdict: str = "ok", conf: float = 0.95) -> dict:
    label = "ok" if verdict == "ok" else "crack"
    return {
        "schema": "inspector.result/1",
        "id": f"id-{i}",
        "part_id": f"p{i}",
        "verdict": verdict,
        "label": label,
        "confidence": conf,
        "error": None,
    }


def _img(i: int) -> np.ndarray:
    return np.random.default_rng(i).integers(0, 256, (40, 40), dtype=np.uint8)


def _kept(root) -> set[str]:
    return {p.name.split(".")[0] for p in (root / "frames").glob("*/*.result.json")}


def test_keeps_defects_low_confidence_and_one_ok_in_n(tmp_path):
    w = FootageWriter(tmp_path / "f", keep_ok_every=3, low_confidence=0.6, max_bytes=None)
    refs = [w.record(_img(i), _result(i)) for i in range(9)]
    assert [r is not None for r in refs] == [True, False, False] * 3
    assert w.record(_img(100), _result(100, "defect", 0.99)) is not None
    assert w.record(_img(101), _result(101, "ok", 0.5)) is not None
    ref = refs[0]
    doc = json.loads((tmp_path / "f" / ref).with_suffix("").with_suffix(".result.json").read_text())
    assert doc["footage"] == ref and ref.startswith("frames/")


def test_size_limit_evicts_the_oldest_ok_frames_first(tmp_path):
    w = FootageWriter(tmp_path / "f", keep_ok_every=1, max_bytes=None)
    ok_refs = [w.record(_img(i), _result(i)) for i in range(4)]
    defect_refs = [w.record(_img(50 + i), _result(50 + i, "defect")) for i in range(2)]
    one = w.total_bytes / 6
    w2 = FootageWriter(tmp_path / "f", keep_ok_every=1, max_bytes=int(one * 6.5))
    assert w2.total_bytes == w.total_bytes  # accounting rebuilt from disk
    new = w2.record(_img(99), _result(99))
    kept = _kept(tmp_path / "f")
    gone = {r.split("/")[-1][:-4] for r in ok_refs[:1]}
    assert not (gone & kept), "the oldest ok frame goes first"
    for r in ok_refs[1:] + defect_refs + [new]:
        assert r.split("/")[-1][:-4] in kept
    assert w2.total_bytes <= w2.max_bytes
    # Far over the limit: every ok frame goes before any defect frame.
    w3 = FootageWriter(tmp_path / "f", keep_ok_every=1, max_bytes=int(one * 3.2))
    w3.record(_img(98), _result(98, "defect"))
    kept = _kept(tmp_path / "f")
    assert all(r.split("/")[-1][:-4] in kept for r in defect_refs)
    assert not any(r.split("/")[-1][:-4] in kept for r in ok_refs)


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    w = FootageWriter(tmp_path / "f", keep_ok_every=1, max_bytes=None)

    def boom(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError):
        w.record(_img(1), _result(1))
    leftovers = [p for p in (tmp_path / "f").rglob("*") if p.is_file()]
    assert [p.name for p in leftovers] == ["footage.json"]


def test_background_writer_writes_everything_queued_and_matches_the_sync_one(tmp_path):
    sync = FootageWriter(tmp_path / "s", keep_ok_every=1, max_bytes=None)
    bg = FootageWriter(tmp_path / "b", keep_ok_every=1, max_bytes=None, background=True,
                       queue_frames=2)  # fmt: skip
    frames = [_img(i) for i in range(20)]
    refs_s = [sync.record(f, _result(i)) for i, f in enumerate(frames)]
    refs_b = []
    for i, f in enumerate(frames):
        refs_b.append(bg.record(f, _result(i)))
        f[:] = 0  # the camera reuses its buffer: the queued copy must not change
    bg.close()
    assert refs_b == refs_s  # references are known before the write
    assert bg.written == 20 and bg.errors == 0 and bg.pending() == 0
    for ref in refs_b:
        assert (tmp_path / "b" / ref).read_bytes() == (tmp_path / "s" / ref).read_bytes()
    bg.close()  # idempotent


def test_background_write_failures_are_counted_not_raised(tmp_path):
    bg = FootageWriter(tmp_path / "b", keep_ok_every=1, max_bytes=None, background=True)
    import inspector.footage.writer as mod

    real = mod.write_atomic

    def broken(path, data):
        raise OSError(28, "No space left on device")

    mod.write_atomic = broken
    try:
        assert bg.record(_img(1), _result(1)) is not None
        bg.flush()
    finally:
        mod.write_atomic = real
        bg.close()
    assert bg.errors == 1 and bg.written == 0
