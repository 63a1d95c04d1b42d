"""The footage store: content hash, split by hash, idempotent adds, label priority, review."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector.errors import FootageError
from inspector.footage.store import FootageStore, frame_hash, split_of


def _img(seed: int, shape=(24, 32)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@given(st.integers(0, 255), st.integers(0, 256))
def test_split_depends_only_on_the_first_byte(first, threshold):
    fid = f"{first:02x}" + "0" * 62
    other = f"{first:02x}" + "f" * 62
    assert split_of(fid, threshold) == split_of(other, threshold)
    assert (split_of(fid, threshold) == "heldout") == (first < threshold)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_frame_hash_is_the_pixels_not_the_container(seed):
    import cv2

    img = _img(seed, (9, 11))
    ok, png = cv2.imencode(".png", img)
    ok2, bmp = cv2.imencode(".bmp", img)
    assert ok and ok2
    a = cv2.imdecode(png, cv2.IMREAD_GRAYSCALE)
    b = cv2.imdecode(bmp, cv2.IMREAD_GRAYSCALE)
    assert frame_hash(a) == frame_hash(b) == frame_hash(img)
    assert frame_hash(img.T.copy()) != frame_hash(img) or img.shape[0] == img.shape[1]


def test_held_out_share_is_about_a_fifth():
    ids = [frame_hash(_img(s, (4, 4))) for s in range(2000)]
    share = sum(split_of(i) == "heldout" for i in ids) / len(ids)
    assert 0.16 < share < 0.24


def test_add_is_idempotent_and_files_follow_the_layout(tmp_path):
    with FootageStore(tmp_path / "s", create=True) as s:
        img = _img(1)
        mask = np.zeros_like(img)
        mask[3:6, 4:9] = 1
        a = s.add(img, label="crack", mask=mask, source_file="x.jpg", source_format="csv")
        b = s.add(img, label="crack", mask=mask, source_file="x.jpg", source_format="csv")
        assert (a.status, b.status) == ("new", "present")
        assert len(s) == 1
        rec = s.get(a.frame_id)
        assert rec.image_path == f"frames/{a.frame_id[:2]}/{a.frame_id}.png"
        assert rec.mask_path == f"frames/{a.frame_id[:2]}/{a.frame_id}.mask.png"
        assert np.array_equal(s.load_image(rec), img)
        assert np.array_equal(s.load_mask(rec) > 0, mask > 0)
        assert rec.split == split_of(a.frame_id)
    journal = (tmp_path / "s" / "index.sqlite").parent
    import sqlite3

    mode = sqlite3.connect(journal / "index.sqlite").execute("PRAGMA journal_mode").fetchone()
    assert mode[0] == "wal"


def test_a_stronger_label_source_replaces_a_weaker_one_never_the_reverse(tmp_path):
    with FootageStore(tmp_path / "s", create=True) as s:
        img = _img(2)
        result = {"schema": "inspector.result/1", "label": "ok", "confidence": 0.9}
        s.add(img, result=result)
        fid = frame_hash(img)
        assert (s.get(fid).label, s.get(fid).label_source) == ("ok", "station-verdict")
        assert s.add(img, label="crack").status == "updated"
        assert (s.get(fid).label, s.get(fid).label_source) == ("crack", "import")
        s.set_label(fid, "blowhole")
        assert s.add(img, label="crack").status == "present"
        assert (s.get(fid).label, s.get(fid).label_source) == ("blowhole", "operator")


def test_review_lists_unlabelled_low_confidence_and_disagreement(tmp_path):
    with FootageStore(tmp_path / "s", create=True) as s:
        unl = s.add(_img(10)).frame_id
        low = s.add(_img(11), result={"label": "ok", "confidence": 0.4}).frame_id
        s.add(_img(12), result={"label": "ok", "confidence": 0.95})  # confident: not listed
        dis = s.add(_img(13), result={"label": "ok", "confidence": 0.9}).frame_id
        s.add(_img(13), label="crack")  # a human label that disagrees with the station
        op = s.add(_img(14)).frame_id
        s.set_label(op, "crack")  # settled by an operator
        s.add(_img(15), label="crack")  # imported with a label: fine
        listed = {r.frame_id: why for r, why in s.needs_review()}
    assert set(listed) == {unl, low, dis}
    assert listed[unl] == "unlabelled"
    assert listed[low].startswith("low confidence")
    assert listed[dis].startswith("disagreement")


def test_resolve_prefix_and_errors(tmp_path):
    with FootageStore(tmp_path / "s", create=True) as s:
        fid = s.add(_img(3)).frame_id
        assert s.resolve(fid[:10]) == fid
        assert s.resolve(fid.upper()) == fid
        assert s.resolve("abc") is None
        assert s.resolve("g" * 12) is None
        with pytest.raises(FootageError, match="mask is"):
            s.add(_img(4), mask=np.zeros((3, 3), np.uint8))
    with pytest.raises(FootageError, match="does not exist"):
        FootageStore(tmp_path / "nope")
