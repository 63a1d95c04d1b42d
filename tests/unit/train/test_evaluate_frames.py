"""Figures name their frames; a finite source is judged whole by default; forced verdicts
are counted and named."""

from __future__ import annotations

import numpy as np

from inspector.cli import build_parser
from inspector.policy.agent import Decision
from inspector.train.evaluate import (
    ENDLESS_EPISODES,
    EVAL_INDEX_BASE,
    eval_indices,
    forced_line,
    judged_frames,
    metrics,
)


class Finite:
    def __len__(self) -> int:
        return 7

    def load(self, i):  # pragma: no cover - only its presence matters
        raise NotImplementedError


class Endless:
    def load(self, i):  # pragma: no cover
        raise NotImplementedError


def test_a_finite_source_is_judged_whole_once_by_default_an_endless_one_in_a_block():
    assert eval_indices(Finite(), None) == list(range(7))
    assert eval_indices(Finite(), 3) == [0, 3, 6]
    block = eval_indices(Endless(), None)
    assert len(block) == ENDLESS_EPISODES and block[0] == EVAL_INDEX_BASE
    assert build_parser().parse_args(["eval", "run", "--camera", "folder"]).episodes is None
    assert build_parser().parse_args(["calibrate", "run", "--camera", "folder"]).episodes is None


def test_training_closes_on_every_held_out_frame_unless_told_otherwise():
    import pytest

    from inspector.train.config import TrainConfig

    assert TrainConfig().final_eval_episodes is None  # evaluate()'s "all of them, once"
    for ok in (None, 0, 263):
        TrainConfig().replace(final_eval_episodes=ok)
    for bad in (-1, 2.5, True, "all"):
        with pytest.raises(ValueError, match="final_eval_episodes"):
            TrainConfig().replace(final_eval_episodes=bad)


def test_training_frames_are_never_called_held_out():
    train = ("folder", {"path": "/d", "split": "train"})
    doc = judged_frames("folder", {"path": "/d", "split": "train"}, 100, 1000, train)
    assert (doc["role"], doc["held_out"], doc["count"]) == ("training", False, 100)
    assert doc["about"] == (
        "100 training frames from folder path=/d split=train (100 of 1,000, evenly spaced): "
        "the frames it was trained on, not a held-out figure"
    )
    test = judged_frames("folder", {"path": "/d", "split": "test"}, 263, 263, train)
    assert (test["role"], test["held_out"]) == ("held-out (test)", True)
    assert test["about"].endswith("(all 263, once)")
    val = judged_frames("store", {"path": "/s", "split": "val"}, 40, 40)
    assert val["role"] == "validation" and "chosen on" in val["about"]
    seed = judged_frames("synthetic", {"seed": 0}, 100, None, ("synthetic", {"seed": "0"}))
    assert seed["role"] == "training seed" and not seed["held_out"]
    assert judged_frames("folder", {"path": "/d"}, 5, 5)["role"] == "unsplit"


def _decision(verdict: str, stopped: bool) -> Decision:
    return Decision(verdict, np.array([0.5, 0.5]), 3, [], stopped=stopped)


def test_parts_that_ran_out_of_steps_are_counted_and_said():
    labels = ["ok", "bad", "bad", "ok"]
    ds = [
        _decision("ok", True),
        _decision("bad", False),
        _decision("ok", False),
        _decision("ok", True),
    ]
    m = metrics(("ok", "bad"), "ok", labels, ds)
    assert m["forced_verdicts"] == {"count": 2, "share": 0.5}
    assert forced_line(m).startswith("50% of parts (2 of 4) ran out of steps: verdict forced")
    none = metrics(("ok", "bad"), "ok", labels[:1], ds[:1])
    assert forced_line(none) is None
