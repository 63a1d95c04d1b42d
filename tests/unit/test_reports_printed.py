"""What train and retrain print at the end: the frames each figure comes from, per-class
figures, and the parts whose verdict was forced at the step budget."""

from __future__ import annotations

import numpy as np

from inspector.commands.retrain import print_comparison
from inspector.commands.train import print_report
from inspector.policy.agent import Decision
from inspector.train.evaluate import judged_frames, metrics


def _m(classes, labels, verdicts, stopped):
    ds = [
        Decision(v, np.full(len(classes), 1 / len(classes)), 4, [], stopped=s)
        for v, s in zip(verdicts, stopped)
    ]
    return metrics(classes, classes[0], labels, ds)


def test_train_says_its_figures_are_on_training_frames(capsys):
    r = _m(("ok", "scratch"), ["ok", "scratch"], ["ok", "ok"], [True, False])
    r["eval_frames"] = judged_frames(
        "folder",
        {"path": "/d", "split": "train"},
        2,
        10,
        ("folder", {"path": "/d", "split": "train"}),
    )
    print_report(r)
    out = capsys.readouterr().out
    assert "eval on 2 training frames from folder path=/d split=train (2 of 10, evenly" in out
    assert "not a held-out figure" in out
    assert "50% of parts (1 of 2) ran out of steps: verdict forced" in out
    assert "for a held-out figure: inspector eval RUN" in out


def test_retrain_prints_each_class_and_the_forced_verdicts(capsys):
    classes = ("ok", "crack", "blowhole")
    labels = ["ok", "crack", "blowhole", "crack"]
    base = _m(classes, labels, ["ok", "ok", "blowhole", "crack"], [True, True, True, True])
    cand = _m(classes, labels, ["ok", "crack", "ok", "crack"], [True, False, True, True])

    def ev(full, forced):
        binary = _m(("ok", "defect"), ["ok", "defect", "defect", "defect"], ["ok"] * 4, [True] * 4)
        return {
            "full": full,
            "binary": binary,
            "frames": 4,
            "judged": judged_frames("store", {"path": "/s", "split": "heldout"}, 4, 4),
            "forced_parts": forced,
        }

    report = {
        "comparison_view": "full",
        "base_metrics": ev(base, []),
        "candidate_metrics": ev(cand, ["abc123"]),
        "initialisation": "weights from the base",
        "heldout_frames": 4,
    }
    print_comparison(report)
    out = capsys.readouterr().out
    assert "held-out: 4 held-out frames from store path=/s split=heldout (all 4, once)" in out
    assert "recall per class" in out
    assert "crack            base 0.500  candidate 1.000" in out
    assert "blowhole         base 1.000  candidate 0.000" in out
    assert "candidate: 25% of parts (1 of 4) ran out of steps: verdict forced" in out
    assert "(e.g. abc123)" in out
    assert "base: " not in out.split("recall per class")[1]  # the base forced none
