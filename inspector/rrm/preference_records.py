"""Preferences between inspections: the records and the file that holds them.

A preferences file is JSON Lines, one judged pair per line, written by
``profile pairs`` (or by hand from ``profile explain`` traces)::

    {"part_id": "synthetic-0042", "profile_sha256": "3f...", "values": {"step_cost": -0.01, ...},
     "a": {"terms": {"step_cost": -0.07, "correct_class": 0.5, ...}, "verdict": "line", ...},
     "b": {"terms": {...}, ...}, "choice": "a"}

``a`` and ``b`` are two recorded inspections of the same part; ``terms`` holds each
term's raw return over the inspection (the sum of the per-step values that
``profile explain`` prints); ``choice`` is ``a``, ``b`` or ``tie``. ``values`` are the
term values the raw returns were recorded under: a profile fitted since (whose values
are the old ones times a factor per term) converts them exactly, so preferences keep
their worth across profile versions. Without ``values`` the record's
``profile_sha256`` must be the profile's own.

The file is untrusted input: its size, line length, record count, strings and
numbers are bounded, nothing is unpickled, and every problem is one line naming the
file, the line and the field. :mod:`inspector.rrm.preferences` fits values to them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inspector.errors import PreferenceError
from inspector.profile import Profile

#: Bytes of a preferences file; a million judged pairs is more than people will click.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Bytes of one line (a pair with two paths of the longest step budget fits easily).
MAX_LINE_BYTES = 1024 * 1024
MAX_RECORDS = 200_000
MAX_STRING = 256
MAX_PATH_POINTS = 1000
#: Raw returns and values beyond this are corrupt, not rewards.
MAX_ABS = 1e6
CHOICES = {"a": 1.0, "b": 0.0, "tie": 0.5}
_TOP_KEYS = (
    "part_id",
    "profile_sha256",
    "values",
    "a",
    "b",
    "choice",
    "judge",
    "recorded_at",
    "pair",
)
_INSPECTION_KEYS = ("terms", "verdict", "label", "steps", "path", "policy")


@dataclass(frozen=True)
class Inspection:
    """One recorded inspection of a part.

    :param terms: term -> raw return over the inspection.
    :param verdict: the declared class (None: none, the budget ran out).
    :param label: the true class when known.
    :param steps: steps taken.
    :param path: the glimpse path as (x, y, zoom) viewport centres (fractions of the frame).
    :param policy: what produced it (``teacher``, ``explore-0.2``, a model file ...).
    """

    terms: Mapping[str, float]
    verdict: str | None = None
    label: str | None = None
    steps: int = 0
    path: tuple[tuple[float, float, int], ...] = ()
    policy: str = ""

    def to_json(self) -> dict[str, Any]:
        """The inspection as a JSON-ready dict."""
        return {
            "terms": {k: float(v) for k, v in self.terms.items()},
            "verdict": self.verdict,
            "label": self.label,
            "steps": int(self.steps),
            "path": [[float(x), float(y), int(z)] for x, y, z in self.path],
            "policy": self.policy,
        }


@dataclass(frozen=True)
class Preference:
    """One judged pair.

    :param part_id: the part both inspections looked at.
    :param a: the first inspection.
    :param b: the second inspection.
    :param choice: ``a``, ``b`` or ``tie``.
    :param values: term -> value (number or class -> number) the raw returns were recorded
        under; empty when unknown.
    :param profile_sha256: sha256 of the profile they were recorded under ("" unknown).
    :param line: 1-based line in the file (0 in memory), for messages.
    :param judge: who judged (free text).
    """

    part_id: str
    a: Inspection
    b: Inspection
    choice: str
    values: Mapping[str, Any]
    profile_sha256: str = ""
    line: int = 0
    judge: str = ""

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON-ready dict (a line of the preferences file)."""
        out: dict[str, Any] = {
            "part_id": self.part_id,
            "profile_sha256": self.profile_sha256,
            "values": {k: plain_value(v) for k, v in self.values.items()},
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "choice": self.choice,
        }
        if self.judge:
            out["judge"] = self.judge
        return out


def profile_values(profile: Profile) -> dict[str, Any]:
    """term -> value (a number or class -> number) of every term of ``profile``."""
    return {t.term: plain_value(t.reward) for t in profile.terms}


def plain_value(v: Any) -> Any:
    return {str(k): float(x) for k, x in v.items()} if isinstance(v, Mapping) else float(v)


# -- reading -----------------------------------------------------------------------------------


def load_preferences(path: str) -> tuple[list[Preference], str]:
    """Read and check a preferences file.

    :param path: the JSON Lines file.
    :returns: the preferences and the sha256 of the file's bytes.
    :raises PreferenceError: unreadable, too large, or a record is malformed (one line).
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise PreferenceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise PreferenceError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    return parse_preferences(data, path), hashlib.sha256(data).hexdigest()


def parse_preferences(data: bytes, name: str = "<preferences>") -> list[Preference]:
    """Parse preferences from bytes (see :func:`load_preferences`).

    :param data: the file's bytes.
    :param name: the file name used in messages.
    """
    out: list[Preference] = []
    for no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"{name}:{no}"
        if len(raw) > MAX_LINE_BYTES:
            raise PreferenceError(f"{where}: line longer than {MAX_LINE_BYTES} bytes")
        if len(out) >= MAX_RECORDS:
            raise PreferenceError(f"{where}: more than {MAX_RECORDS} preferences")
        try:
            text = raw.decode("utf-8")
            doc = json.loads(text, parse_constant=_no_constant)
        except UnicodeDecodeError:
            raise PreferenceError(f"{where}: not UTF-8 text") from None
        except RecursionError:
            raise PreferenceError(f"{where}: JSON nested too deeply") from None
        except ValueError as exc:
            raise PreferenceError(f"{where}: not a JSON object: {_one_line(str(exc))}") from None
        out.append(_record(doc, where, no))
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a preference may carry")


def _one_line(text: str) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= 200 else text[:197] + "..."


def fail(where: str, field: str, message: str) -> PreferenceError:
    """A one-line error ``file:line: field: message``."""
    return PreferenceError(
        _one_line(f"{where}: {field}: {message}" if field else f"{where}: {message}")
    )


def _describe(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, str):
        return repr(v if len(v) <= 40 else v[:37] + "...")
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return str(v)


def _number(v: Any, where: str, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise fail(where, field, f"expected a number, got {_describe(v)}")
    x = float(v)
    if not math.isfinite(x) or abs(x) > MAX_ABS:
        raise fail(where, field, f"{x:g} is out of range (|x| <= {MAX_ABS:g})")
    return x


def _string(v: Any, where: str, field: str, *, optional: bool = False) -> str | None:
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise fail(where, field, f"expected a string, got {_describe(v)}")
    if len(v) > MAX_STRING:
        raise fail(where, field, f"longer than {MAX_STRING} characters")
    return v


def _keys(doc: Any, allowed: Sequence[str], where: str, field: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise fail(where, field, f"expected an object, got {_describe(doc)}")
    for k in doc:
        if k not in allowed:
            raise fail(
                where, f"{field}.{k}" if field else k, f"unknown key; allowed: {', '.join(allowed)}"
            )
    return doc


def _record(doc: Any, where: str, line: int) -> Preference:
    doc = _keys(doc, _TOP_KEYS, where, "")
    for req in ("part_id", "a", "b", "choice"):
        if req not in doc:
            raise fail(where, req, "missing")
    choice = doc["choice"]
    if choice not in CHOICES:
        raise fail(where, "choice", f"expected 'a', 'b' or 'tie', got {_describe(choice)}")
    sha = _string(doc.get("profile_sha256", ""), where, "profile_sha256") or ""
    values = _values(doc.get("values", {}), where)
    if not values and not sha:
        raise fail(where, "", "needs 'values' or 'profile_sha256' (what the rewards were under)")
    return Preference(
        part_id=str(_string(doc["part_id"], where, "part_id")),
        a=_inspection(doc["a"], where, "a"),
        b=_inspection(doc["b"], where, "b"),
        choice=choice,
        values=values,
        profile_sha256=sha,
        line=line,
        judge=_string(doc.get("judge", ""), where, "judge") or "",
    )


def _values(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise fail(where, "values", f"expected an object, got {_describe(doc)}")
    if len(doc) > 64:
        raise fail(where, "values", "more than 64 terms")
    out: dict[str, Any] = {}
    for term, v in doc.items():
        _string(term, where, "values")
        if isinstance(v, dict):
            if len(v) > 65:
                raise fail(where, f"values.{term}", "more than 65 classes")
            out[term] = {
                str(_string(c, where, f"values.{term}")): _number(x, where, f"values.{term}.{c}")
                for c, x in v.items()
            }
        else:
            out[term] = _number(v, where, f"values.{term}")
    return out


def _inspection(doc: Any, where: str, side: str) -> Inspection:
    doc = _keys(doc, _INSPECTION_KEYS, where, side)
    terms = doc.get("terms")
    if not isinstance(terms, dict) or not terms:
        raise fail(where, f"{side}.terms", "expected an object term -> raw return")
    if len(terms) > 64:
        raise fail(where, f"{side}.terms", "more than 64 terms")
    parsed = {
        str(_string(k, where, f"{side}.terms")): _number(v, where, f"{side}.terms.{k}")
        for k, v in terms.items()
    }
    steps = doc.get("steps", 0)
    if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= 100_000:
        raise fail(where, f"{side}.steps", f"expected a count, got {_describe(steps)}")
    path = doc.get("path", [])
    if not isinstance(path, list) or len(path) > MAX_PATH_POINTS:
        raise fail(where, f"{side}.path", f"expected a list of at most {MAX_PATH_POINTS} points")
    points = []
    for i, p in enumerate(path):
        f = f"{side}.path[{i}]"
        if not isinstance(p, list) or len(p) != 3:
            raise fail(where, f, "expected [x, y, zoom]")
        x, y = _number(p[0], where, f), _number(p[1], where, f)
        z = _number(p[2], where, f)
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0 and z == int(z) and 0 <= z <= 64):
            raise fail(where, f, "x and y are fractions of the frame, zoom a level")
        points.append((x, y, int(z)))
    return Inspection(
        terms=parsed,
        verdict=_string(doc.get("verdict"), where, f"{side}.verdict", optional=True),
        label=_string(doc.get("label"), where, f"{side}.label", optional=True),
        steps=steps,
        path=tuple(points),
        policy=_string(doc.get("policy", ""), where, f"{side}.policy") or "",
    )
