"""Operator feedback: a confirmation or correction of a station's verdict, kept as data.

The operator console (and anything else that takes an operator's word, such as a
Label Studio import) calls :func:`record_feedback`: the frame goes into the footage
store (once, by content hash) with the station's Result, its label becomes the
operator's with the source ``operator:<name>``, and one row in the store's
``feedback`` table keeps who said what, when, on which station and about which
model (its sha256). ``calibrate`` replays operator-labelled frames with
``--camera store --param label_source=operator``; ``retrain`` trains on them like on
any labelled frame (an operator's label outranks an import's and the station's);
``footage review --select feedback`` lists them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from inspector.errors import FootageError
from inspector.footage.store import OPERATOR_RE, FootageStore, frame_hash, to_gray

_COLUMNS = ("frame_id", "result_id", "station", "model_sha256", "operator", "label",
            "station_label", "verdict", "operator_verdict", "at", "via")  # fmt: skip


@dataclass(frozen=True)
class Feedback:
    """One operator's word on one part.

    :param frame_id: the frame (store content hash).
    :param result_id: the station Result's ``id``, when the part came from a station.
    :param station: the station id.
    :param model_sha256: sha256 of the model that judged the part.
    :param operator: who (the name in ``operator:<name>``).
    :param label: the class the operator gave.
    :param station_label: the class the station declared (None for an error result).
    :param verdict: the station's verdict, ``ok`` or ``defect`` (None for an error result).
    :param operator_verdict: ``ok`` or ``defect`` by the operator's label (None when the
        ok class is not known).
    :param at: when, seconds since the epoch.
    :param via: what took it (``console``, ``label-studio``...).
    """

    frame_id: str
    result_id: str | None
    station: str | None
    model_sha256: str | None
    operator: str
    label: str
    station_label: str | None
    verdict: str | None
    operator_verdict: str | None
    at: float
    via: str

    @property
    def action(self) -> str:
        """``confirm`` when the operator agreed with the station's class, else ``correct``."""
        return "confirm" if self.label == self.station_label else "correct"

    @property
    def outcome(self) -> str | None:
        """``false alarm`` (station defect, operator ok), ``miss`` (the reverse) or None."""
        if self.verdict == "defect" and self.operator_verdict == "ok":
            return "false alarm"
        if self.verdict == "ok" and self.operator_verdict == "defect":
            return "miss"
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (with ``action`` and ``outcome``)."""
        d = {k: getattr(self, k) for k in _COLUMNS}
        d.update(action=self.action, outcome=self.outcome)
        return d


def check_operator(name: str) -> str:
    """``name`` when it may follow ``operator:``.

    :raises FootageError: empty or with other characters than letters, digits, ``_ . @ -``.
    """
    if not isinstance(name, str) or not OPERATOR_RE.match(name):
        raise FootageError(
            f"operator name {name!r}: 1-64 letters, digits, _ . @ - (starting with a letter "
            "or digit)"
        )
    return name


def record_feedback(
    store: FootageStore,
    image: np.ndarray,
    result: Mapping[str, Any],
    label: str,
    operator: str,
    *,
    ok_class: str,
    via: str = "console",
    at: float | None = None,
) -> tuple[Feedback, bool]:
    """Keep an operator's confirmation or correction of one part.

    :param store: the footage store (the frame is added when it is not there yet).
    :param image: the part's frame (gray or BGR uint8).
    :param result: the station's Result document for the part.
    :param label: the operator's class.
    :param operator: the operator's name.
    :param ok_class: the class that means ok (to tell false alarms and misses).
    :param via: what took the feedback.
    :param at: when (default now).
    :returns: the feedback row and whether the frame's label changed.
    :raises FootageError: a bad operator name or label source, or the store fails.
    """
    check_operator(operator)
    source = f"operator:{operator}"
    gray = to_gray(image)
    fid = frame_hash(gray)
    store.add(gray, result=dict(result), frame_id=fid, source_format="station",
              source_file=result.get("footage"), commit=False)  # fmt: skip
    changed = store.set_label(fid, label, source, commit=False)
    fb = Feedback(
        frame_id=fid,
        result_id=result.get("id"),
        station=result.get("station"),
        model_sha256=(result.get("model") or {}).get("sha256") or result.get("model_sha256"),
        operator=operator,
        label=label,
        station_label=result.get("label"),
        verdict=result.get("verdict"),
        operator_verdict="ok" if label == ok_class else "defect",
        at=time.time() if at is None else float(at),
        via=via,
    )
    _insert(store, fb)
    store.commit()
    return fb, changed


def _ok_class(result: Mapping[str, Any] | None) -> str | None:
    """The ok class as a station Result shows it (its first class), or None.

    None too for a classification-only model's Result: its first class declared with
    the verdict ``defect`` (with an ok class, declaring the first class is ``ok``).
    """
    if not result:
        return None
    if result.get("verdict") == "ok" and result.get("label"):
        return str(result["label"])
    probs = result.get("probabilities")
    first = next(iter(probs), None) if isinstance(probs, Mapping) and probs else None
    if first is not None and result.get("verdict") == "defect" and result.get("label") == first:
        return None
    return first


def _insert(store: FootageStore, fb: Feedback) -> None:
    store.db.execute(
        f"INSERT INTO feedback({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",  # noqa: S608
        tuple(getattr(fb, k) for k in _COLUMNS),
    )


def record_label(
    store: FootageStore,
    frame_id: str,
    label: str,
    operator: str,
    *,
    via: str,
    at: float | None = None,
    ok_class: str | None = None,
) -> bool:
    """An operator's label for a frame already in the store (e.g. from Label Studio).

    Sets the label with the source ``operator:<name>`` and, when it changed, adds a
    feedback row (station and model from the frame's Result when it has one). Giving the
    same label again changes nothing and adds no row.

    :returns: whether the label changed. Not committed (the caller commits the batch).
    :raises FootageError: unknown frame or bad operator name.
    """
    check_operator(operator)
    if not store.set_label(frame_id, label, f"operator:{operator}", commit=False):
        return False
    res = store.get(frame_id).result or {}
    ok = ok_class or _ok_class(res)
    _insert(store, Feedback(
        frame_id=frame_id, result_id=res.get("id"), station=res.get("station"),
        model_sha256=(res.get("model") or {}).get("sha256"), operator=operator, label=label,
        station_label=res.get("label"), verdict=res.get("verdict"),
        operator_verdict=None if ok is None else ("ok" if label == ok else "defect"),
        at=time.time() if at is None else float(at), via=via,
    ))  # fmt: skip
    return True


def list_feedback(
    store: FootageStore, *, station: str | None = None, limit: int | None = None
) -> list[Feedback]:
    """Feedback rows, newest first.

    :param station: only this station's.
    :param limit: at most this many.
    """
    q = f"SELECT {', '.join(_COLUMNS)} FROM feedback"  # noqa: S608
    args: list[Any] = []
    if station is not None:
        q += " WHERE station = ?"
        args.append(station)
    q += " ORDER BY at DESC, rowid DESC"
    if limit is not None:
        q += " LIMIT ?"
        args.append(int(limit))
    return [Feedback(**dict(zip(_COLUMNS, row))) for row in store.db.execute(q, args)]


def feedback_counts(store: FootageStore, *, station: str | None = None) -> dict[str, int]:
    """``{"feedback", "confirmed", "corrected", "false_alarms", "misses"}``.

    A part the operator spoke about more than once counts by the last word.
    """
    last: dict[str, Feedback] = {}
    for fb in reversed(list_feedback(store, station=station)):
        last[fb.result_id or fb.frame_id] = fb
    out = {"feedback": len(last), "confirmed": 0, "corrected": 0, "false_alarms": 0, "misses": 0}
    for fb in last.values():
        out["confirmed" if fb.action == "confirm" else "corrected"] += 1
        if fb.outcome == "false alarm":
            out["false_alarms"] += 1
        elif fb.outcome == "miss":
            out["misses"] += 1
    return out


__all__ = [
    "Feedback",
    "FootageError",
    "check_operator",
    "feedback_counts",
    "list_feedback",
    "record_feedback",
    "record_label",
]
