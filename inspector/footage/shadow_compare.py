"""Live against shadow on the line: agreement, and each model's errors where truth is known.

The station records every result (with its ``shadow`` field when a shadow model ran) in
footage. :func:`compare_shadow` reads those records: it counts how often the two models
agree, and on parts whose label did not come from the station itself (imported labels,
operator confirmations and corrections) each model's recall, false alarms and accuracy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inspector.footage.store import FrameRecord

#: Label sources that are not ground truth: the station's own verdict.
NOT_TRUTH = ("station-verdict", "station")


@dataclass
class ModelErrors:
    """One model's figures on labelled parts.

    :param parts: labelled parts it decided.
    :param correct: of those, the declared class was the label.
    :param defects: labelled defective parts; ``caught`` of them declared a defect.
    :param oks: labelled ok parts; ``false_alarms`` of them declared a defect.
    """

    parts: int = 0
    correct: int = 0
    defects: int = 0
    caught: int = 0
    oks: int = 0
    false_alarms: int = 0

    def add(self, label: str, truth: str, ok_class: str) -> None:
        """Count one decision ``label`` on a part whose true class is ``truth``."""
        self.parts += 1
        self.correct += int(label == truth)
        if truth == ok_class:
            self.oks += 1
            self.false_alarms += int(label != ok_class)
        else:
            self.defects += 1
            self.caught += int(label != ok_class)

    def figures(self) -> dict[str, Any]:
        """Recall, false-alarm rate and accuracy (None where undefined)."""
        return {
            "parts": self.parts,
            "accuracy": self.correct / self.parts if self.parts else None,
            "defect_recall": self.caught / self.defects if self.defects else None,
            "false_alarm_rate": self.false_alarms / self.oks if self.oks else None,
            "defects": self.defects,
            "oks": self.oks,
        }


@dataclass
class ShadowComparison:
    """What :func:`compare_shadow` found.

    :param results: station results read.
    :param with_shadow: of those, results where the shadow decided.
    :param skipped: shadow skipped, by reason (late, busy, failed ...).
    :param agree_label: both declared the same class.
    :param agree_verdict: both said ok, or both said defect.
    :param live: the live model's figures on labelled parts.
    :param shadow: the shadow's figures on the same parts.
    :param shadow_models: the shadow model hashes seen.
    """

    results: int = 0
    with_shadow: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    agree_label: int = 0
    agree_verdict: int = 0
    live: ModelErrors = field(default_factory=ModelErrors)
    shadow: ModelErrors = field(default_factory=ModelErrors)
    shadow_models: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready figures."""
        n = self.with_shadow
        return {
            "results": self.results,
            "with_shadow": n,
            "skipped": dict(self.skipped),
            "label_agreement": self.agree_label / n if n else None,
            "verdict_agreement": self.agree_verdict / n if n else None,
            "live": self.live.figures(),
            "shadow": self.shadow.figures(),
            "shadow_models": sorted(self.shadow_models),
        }


def _truth(rec: FrameRecord) -> str | None:
    source = (rec.label_source or "").split(":")[0]
    if rec.label is None or source in NOT_TRUTH:
        return None
    return rec.label


def compare_shadow(records: Iterable[FrameRecord], ok_class: str) -> ShadowComparison:
    """Compare live and shadow decisions in footage records.

    :param records: footage records (those without a station result are ignored).
    :param ok_class: the class that means ok.
    """
    out = ShadowComparison()
    for rec in records:
        res = rec.result
        if not isinstance(res, dict) or res.get("error"):
            continue
        out.results += 1
        sh = res.get("shadow")
        if not isinstance(sh, dict):
            continue
        if sh.get("skipped"):
            reason = str(sh["skipped"]).split(":")[0]
            out.skipped[reason] = out.skipped.get(reason, 0) + 1
            continue
        live, shadow = res.get("label"), sh.get("label")
        if not isinstance(live, str) or not isinstance(shadow, str):
            continue
        out.with_shadow += 1
        out.shadow_models.add(str(sh.get("model_sha256") or ""))
        out.agree_label += int(live == shadow)
        out.agree_verdict += int((live == ok_class) == (shadow == ok_class))
        truth = _truth(rec)
        if truth is not None:
            out.live.add(live, truth, ok_class)
            out.shadow.add(shadow, truth, ok_class)
    return out
