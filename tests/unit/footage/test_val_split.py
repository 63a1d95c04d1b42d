"""The store's val split (by hash, like held-out) and the per-frame listing (issue #33)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from inspector.cli import main
from inspector.footage.store import FootageStore, frame_hash, split_of


def _frames(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (6, 8), dtype=np.uint8) for _ in range(n)]


def test_split_bands_follow_the_first_byte():
    assert split_of("32" + "0" * 62) == "heldout"  # 0x32 = 50 < 51
    assert split_of("33" + "0" * 62) == "val"  # 51
    assert split_of("4c" + "0" * 62) == "val"  # 76 = 51 + 26 - 1
    assert split_of("4d" + "0" * 62) == "train"  # 77
    assert split_of("4d" + "0" * 62, 51, 0) == "train"
    assert split_of("ff" + "0" * 62, 0, 256) == "val"


def test_a_frames_split_does_not_depend_on_import_order(tmp_path):
    frames = _frames(120)
    a = FootageStore(tmp_path / "a", create=True)
    b = FootageStore(tmp_path / "b", create=True)
    for f in frames:
        a.add(f, label="x")
    for f in reversed(frames):
        b.add(f, label="x")
    sa = {r.frame_id: r.split for r in a.records()}
    sb = {r.frame_id: r.split for r in b.records()}
    assert sa == sb and set(sa.values()) == {"train", "val", "heldout"}
    assert all(s == split_of(fid) for fid, s in sa.items())
    assert a.summary()["val_width"] == 26
    a.close()
    b.close()


def test_an_older_store_gets_the_val_split_when_opened(tmp_path):
    frames = _frames(120, seed=1)
    with FootageStore(tmp_path / "s", create=True) as s:
        for f in frames:
            s.add(f, label="x")
        before = {r.frame_id: r.split for r in s.records()}
    # What a store written before the val split looks like: no val_width, no val frames.
    db = sqlite3.connect(tmp_path / "s" / "index.sqlite")
    db.execute("DELETE FROM meta WHERE key = 'val_width'")
    db.execute("UPDATE frames SET split = 'train' WHERE split = 'val'")
    db.commit()
    db.close()
    with FootageStore(tmp_path / "s") as s:
        after = {r.frame_id: r.split for r in s.records()}
        assert s.val_width == 26
    assert after == before  # the same splits as a store made with val from the start
    held = {f for f, sp in before.items() if sp == "heldout"}
    assert held == {f for f, sp in after.items() if sp == "heldout"}


def test_val_band_is_chosen_at_creation_and_bounded(tmp_path, capsys):
    with pytest.raises(Exception, match="val width must be 0..205"):
        FootageStore(tmp_path / "x", create=True, heldout_threshold=51, val_width=206)
    with FootageStore(tmp_path / "y", create=True, val_width=0) as s:
        for f in _frames(40):
            s.add(f)
        assert "val" not in s.summary()["splits"]
    args = ["footage", "import", str(tmp_path), "--format", "folder", "--store", str(tmp_path)]
    assert main([*args, "--heldout-percent", "20", "--val-percent", "90"]) == 2
    assert "--val-percent must be 0..80" in capsys.readouterr().err


def test_store_camera_replays_the_val_split(tmp_path):
    from camera_drivers.footage_store import StoreCamera

    with FootageStore(tmp_path / "s", create=True) as s:
        for f in _frames(60, seed=2):
            s.add(f, label="x")
        n_val = len(s.records(split="val"))
    cam = StoreCamera(str(tmp_path / "s"), split="val")
    assert len(cam) == n_val > 0 and all(fr.meta["split"] == "val" for fr in cam.frames())
    cam.close()


def test_footage_frames_lists_and_filters(tmp_path, capsys):
    store = tmp_path / "s"
    with FootageStore(store, create=True) as s:
        for i, f in enumerate(_frames(30, seed=3)):
            s.add(f, label="dent" if i % 2 else None, source_file=f"cam{i % 3}/f{i}.png",
                  source_format="folder")  # fmt: skip
        recs = s.records()
    assert main(["footage", "frames", str(store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "30 frames" and len(out) == 31
    first = recs[0]
    assert out[0].split()[:2] == [first.frame_id, first.split]
    assert main(["footage", "frames", str(store), "--json", "--label", "dent",
                 "--source", "cam1/*", "--limit", "3"]) == 0  # fmt: skip
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert 0 < len(rows) <= 3
    assert all(r["label"] == "dent" and r["source_file"].startswith("cam1/") for r in rows)
    assert set(rows[0]) >= {"frame_id", "split", "label", "label_source", "source_file"}
    assert main(["footage", "frames", str(store), "--split", "val", "--label", "-"]) == 0
    lines = capsys.readouterr().out.splitlines()[:-1]
    want = [r for r in recs if r.split == "val" and r.label is None]
    assert [ln.split()[0] for ln in lines] == [r.frame_id for r in want]
    assert frame_hash(_frames(1, seed=3)[0]) in {r.frame_id for r in recs}
