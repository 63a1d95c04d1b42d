"""search_controls section 4b (why native glimpses hurt on the tiles): the record of one
pass per model and the aggregations scored offline from it, on small frames with a policy
whose verdict reads the current glimpse (a bright spot is a defect)."""

from __future__ import annotations

import numpy as np
import pytest

from inspector.frames import Truth
from tests.unit.test_search_controls_tiles import SpotPolicy


@pytest.fixture(autouse=True)
def one_torch_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class _Frame:
    def __init__(self, image, truth):
        self.image, self.truth = image, truth


def frames(n: int, seed: int) -> list:
    """Frames of several sizes; every other one has a bright spot, marked in its mask."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        h, w = int(rng.integers(16, 40)), int(rng.integers(16, 40))
        img = np.full((h, w), 20, np.uint8)
        mask = np.zeros((h, w), np.uint8)
        if i % 2:
            y, x = int(rng.integers(h)), int(rng.integers(w))
            img[y, x] = mask[y, x] = 250
        out.append(_Frame(img, Truth("spot" if i % 2 else "free", mask=mask)))
    return out


def record(n: int = 8) -> dict:
    from benchmarks.studies.search_controls.tiles_why import record_split

    policy = SpotPolicy(moves=4)
    return {
        "val": record_split(policy, frames(n, 0), seed=0, k=3),
        "test": record_split(policy, frames(n, 1), seed=1, k=3),
        "classes": ["free", "spot"],
        "levels": np.asarray(3),
        "measured": "now",
    }


def test_the_record_holds_every_condition_and_the_oracle_sees_the_spot():
    rec = record()
    t = rec["test"]
    n = len(t["labels"])
    assert t["acc"].shape == t["keep"].shape == t["alone"].shape == (n, 3, 2)
    assert t["agent"].shape[:2] == t["agent_level"].shape == (n, 7)
    assert t["agent_keep"].shape == t["agent"].shape
    assert t["mid_alone"].shape == t["mid_acc"].shape and t["mid_alone"].shape[0] == n
    # Frames of different sizes hold different middle-level tilings: padded with NaN.
    assert (np.isfinite(t["mid_alone"][..., 0]).sum(axis=1) == t["mid_n"]).all()
    spot = t["labels"] == 1
    # The best-placed native glimpse holds the spot, and this policy then says defect.
    assert (t["oracle_def"][spot] > 0).all()
    assert np.allclose(t["oracle"][spot, 1], 250 / 255, atol=0.02)
    assert np.isnan(t["oracle"][~spot]).all()
    # Alone after the overview, a glimpse without the spot reads as free here.
    off = (t["glimpse_def"] == 0) & ~spot[:, None]
    assert np.allclose(t["alone"][off][:, 1], 20 / 255, atol=0.02)


def test_the_aggregations_score_from_the_record_and_render():
    from benchmarks.studies.search_controls import tiles_why_report as r

    rec = record()
    rows = r.rows_for(rec)
    assert [row["key"] for row in rows] == list(r.AGGREGATIONS)
    for row in rows:
        assert 0.0 <= row["recall"] <= 1.0 and 0.0 <= row["false_alarms"] <= 1.0
    text = r.section({"toy": rec}, ["A note."])
    assert "Aggregations, toy" in text and text.rstrip().endswith("A note.")
    from benchmarks.studies.search_controls.tiles_why_notes import notes

    found = notes({"toy": rec})
    assert any(line.startswith("Findings") for line in found)


def test_combinations_and_the_stop_before_native():
    from benchmarks.studies.search_controls import tiles_why_report as r

    s = np.array([[0.5, 0.5], [0.9, 0.1]])
    assert np.allclose(r.noisy_or(s), [0.75, 0.91])
    assert np.allclose(r.mean_logodds(s), [0.5, 0.5], atol=1e-6)
    part = {
        "agent_level": np.array([[0, 1, 2, 2], [0, 1, 1, 1], [0, 2, 2, 2]]),
        "agent_len": np.array([4, 3, 2]),
    }
    assert list(r.before_native(part, 2)) == [1, 2, 0]
