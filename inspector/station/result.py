"""The Result of one inspected part: what the station commits to its outbox and publishes.

The JSON form is versioned (``"schema": "inspector.result/1"``) and described by
``inspector/schemas/result.schema.json``; docs/mqtt.md explains every field to
receivers. A result either carries a decision (``error`` is null, ``verdict``,
``label`` and ``confidence`` set) or reports a part that could not be judged
(``error`` is a string, e.g. a corrupt frame or a camera timeout, and ``verdict``,
``label`` and ``confidence`` are null): an undecided part is never reported as ok.

Example::

    r = Result.decided(station="line1", part_id="p-17", classes=policy.classes,
                       probabilities=decision.probabilities, label=decision.verdict,
                       glimpse_path=decision.path, steps=decision.steps,
                       captured_at=frame.timestamp, latency_ms=1e3 * decision.latency_s,
                       model_sha256=meta.model_sha256, profile_name=meta.profile_name,
                       profile_sha256=meta.profile_sha256)
    seq = outbox.put(r)        # commits, fills in r.seq
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

#: The schema identifier every result carries; bumped when a field changes meaning.
SCHEMA = "inspector.result/1"
#: A result with a ``shadow`` field (a shadow model ran); otherwise the same as /1, so
#: a station without a shadow writes exactly the /1 documents it always did.
SCHEMA_SHADOW = "inspector.result/1.1"
#: A result whose model came from the registry: ``model`` also carries ``version`` and
#: ``channel`` (and ``shadow`` may be present, as in /1.1). Stations that name a model
#: file write /1 or /1.1 as before, so consumers of those see nothing new.
SCHEMA_ROLLOUT = "inspector.result/1.2"
#: Schema ids :meth:`Result.from_dict` reads.
SCHEMAS = (SCHEMA, SCHEMA_SHADOW, SCHEMA_ROLLOUT)
#: Channels ``model_channel`` may name (``pinned``: the config names one version).
MODEL_CHANNELS = ("stable", "canary", "shadow", "pinned")
#: Verdicts: the declared class is the ok class, or any defect class.
VERDICTS = ("ok", "defect")


def new_id() -> str:
    """A fresh result id (uuid4, 36 characters): unique across stations and restarts."""
    return str(uuid.uuid4())


def iso_utc(t: float) -> str:
    """``t`` (seconds since the epoch) as ISO 8601 UTC with microseconds and ``Z``."""
    dt = datetime.fromtimestamp(float(t), tz=timezone.utc)
    return dt.isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_iso_utc(text: str) -> float:
    """Inverse of :func:`iso_utc` (accepts ``Z`` or an explicit offset)."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text).timestamp()


@dataclass(frozen=True)
class GlimpsePoint:
    """One step of the glimpse path.

    :param x: viewport centre, fraction of the frame width (0..1).
    :param y: viewport centre, fraction of the frame height (0..1).
    :param zoom: zoom level, 0 = whole frame, deepest = native pixels.
    """

    x: float
    y: float
    zoom: int

    def to_dict(self) -> dict[str, Any]:
        """``{"x": .., "y": .., "zoom": ..}`` (x, y rounded to 6 places)."""
        return {"x": round(float(self.x), 6), "y": round(float(self.y), 6), "zoom": int(self.zoom)}


def _point(p: Any) -> GlimpsePoint:
    # Accepts scan.PathPoint, GlimpsePoint, a mapping or an (x, y, zoom) triple, so the
    # station can hand over whatever the scanner recorded without converting it first.
    if isinstance(p, GlimpsePoint):
        return p
    if isinstance(p, Mapping):
        return GlimpsePoint(float(p["x"]), float(p["y"]), int(p["zoom"]))
    if hasattr(p, "zoom"):
        return GlimpsePoint(float(p.x), float(p.y), int(p.zoom))
    x, y, z = p
    return GlimpsePoint(float(x), float(y), int(z))


@dataclass
class Result:
    """One part's result. Build it with :meth:`decided` or :meth:`failed`.

    :param station: station id.
    :param part_id: the inspected part (the trigger's part id when it gave one).
    :param captured_at: frame capture time, seconds since the epoch.
    :param decided_at: decision (or failure) time, seconds since the epoch.
    :param verdict: ``ok`` or ``defect``; None for an error result.
    :param label: the declared class; None for an error result.
    :param confidence: probability of ``label``; None for an error result.
    :param probabilities: class -> probability at the decision.
    :param glimpse_path: the viewport of every glimpse, in order.
    :param steps: actions taken (moves, zooms and the stop).
    :param latency_ms: decision latency in milliseconds.
    :param model_sha256: sha256 of the model that decided.
    :param profile_name: reward profile name.
    :param profile_sha256: sha256 of the reward profile file.
    :param footage: where the frame was stored (footage store reference), or None.
    :param error: None, or why the part could not be judged.
    :param correlation_id: echoed from the trigger, when it carried one.
    :param trigger_part_id: the part id the trigger carried, echoed verbatim.
    :param id: unique result id; receivers de-duplicate by it.
    :param seq: per-station sequence number, assigned by the outbox on commit.
    :param shadow: what the shadow model decided on the same frame (label, verdict,
        confidence, probabilities, glimpse path, steps, latency, model sha256), or why it
        was skipped; None when no shadow runs.
    :param model_version: the registry version that decided (``v0003``); None when the
        station names a model file.
    :param model_channel: the channel that version came through: ``stable``, ``canary``,
        ``shadow`` or ``pinned``; None with ``model_version``.
    """

    station: str
    part_id: str
    captured_at: float
    decided_at: float
    verdict: str | None
    label: str | None
    confidence: float | None
    probabilities: dict[str, float] = field(default_factory=dict)
    glimpse_path: tuple[GlimpsePoint, ...] = ()
    steps: int = 0
    latency_ms: float = 0.0
    model_sha256: str = ""
    profile_name: str = ""
    profile_sha256: str = ""
    footage: str | None = None
    error: str | None = None
    correlation_id: str | None = None
    trigger_part_id: str | None = None
    id: str = field(default_factory=new_id)
    seq: int | None = None
    shadow: dict[str, Any] | None = None
    model_version: str | None = None
    model_channel: str | None = None

    # -- builders -------------------------------------------------------------------
    @classmethod
    def decided(
        cls,
        *,
        station: str,
        part_id: str,
        classes: Sequence[str],
        probabilities: Sequence[float],
        label: str,
        glimpse_path: Iterable[Any] = (),
        steps: int = 0,
        captured_at: float,
        decided_at: float | None = None,
        latency_ms: float = 0.0,
        model_sha256: str = "",
        profile_name: str = "",
        profile_sha256: str = "",
        ok_class: str | None = None,
        classification_only: bool = False,
        footage: str | None = None,
        correlation_id: str | None = None,
        trigger_part_id: str | None = None,
        model_version: str | None = None,
        model_channel: str | None = None,
    ) -> Result:
        """A result for a part the agent judged.

        :param classes: verdict classes in model order (the ok class first).
        :param probabilities: class probabilities in the same order.
        :param label: the declared class (must be one of ``classes``).
        :param glimpse_path: points with ``x``, ``y``, ``zoom`` (e.g. ``scan.PathPoint``).
        :param ok_class: the class that means ok (default ``classes[0]``).
        :param classification_only: no class means ok (every part has a defect): the
            verdict is ``defect`` whatever the class.
        :param decided_at: default now.
        :raises ValueError: ``label`` is not a class, lengths differ, or a probability is
            not finite (a broken model output; the station reports it with :meth:`failed`).
        """
        classes = [str(c) for c in classes]
        probs = [float(p) for p in probabilities]
        if len(classes) != len(probs):
            raise ValueError(f"{len(classes)} classes but {len(probs)} probabilities")
        if label not in classes:
            raise ValueError(f"label {label!r} is not one of the classes {classes}")
        if not all(math.isfinite(p) for p in probs):
            raise ValueError(f"non-finite class probabilities {probs}")
        ok = None if classification_only else (classes[0] if ok_class is None else ok_class)
        pmap = dict(zip(classes, probs))
        return cls(
            station=station,
            part_id=str(part_id),
            captured_at=float(captured_at),
            decided_at=time.time() if decided_at is None else float(decided_at),
            verdict="ok" if label == ok else "defect",
            label=label,
            confidence=pmap[label],
            probabilities=pmap,
            glimpse_path=tuple(_point(p) for p in glimpse_path),
            steps=int(steps),
            latency_ms=float(latency_ms),
            model_sha256=model_sha256,
            profile_name=profile_name,
            profile_sha256=profile_sha256,
            footage=footage,
            correlation_id=correlation_id,
            trigger_part_id=trigger_part_id,
            model_version=model_version,
            model_channel=model_channel,
        )

    @classmethod
    def failed(
        cls,
        *,
        station: str,
        part_id: str,
        error: str,
        captured_at: float | None = None,
        decided_at: float | None = None,
        latency_ms: float = 0.0,
        model_sha256: str = "",
        profile_name: str = "",
        profile_sha256: str = "",
        footage: str | None = None,
        correlation_id: str | None = None,
        trigger_part_id: str | None = None,
        model_version: str | None = None,
        model_channel: str | None = None,
    ) -> Result:
        """An error result: the part was seen (or expected) but could not be judged.

        :param error: one line saying why, e.g. ``camera timeout after 2.0 s``.
        :param captured_at: default ``decided_at`` (a camera timeout has no frame).
        """
        now = time.time() if decided_at is None else float(decided_at)
        return cls(
            station=station,
            part_id=str(part_id),
            captured_at=now if captured_at is None else float(captured_at),
            decided_at=now,
            verdict=None,
            label=None,
            confidence=None,
            latency_ms=float(latency_ms),
            model_sha256=model_sha256,
            profile_name=profile_name,
            profile_sha256=profile_sha256,
            footage=footage,
            error=str(error) or "unknown error",
            correlation_id=correlation_id,
            trigger_part_id=trigger_part_id,
            model_version=model_version,
            model_channel=model_channel,
        )

    # -- JSON -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON document as a dict: ``inspector.result/1``, ``/1.1`` with a shadow,
        ``/1.2`` with a registry model."""
        model: dict[str, Any] = {"sha256": self.model_sha256}
        schema = SCHEMA if self.shadow is None else SCHEMA_SHADOW
        if self.model_version is not None:
            model.update(version=self.model_version, channel=self.model_channel)
            schema = SCHEMA_ROLLOUT
        doc = {
            "schema": schema,
            "id": self.id,
            "seq": self.seq,
            "station": self.station,
            "part_id": self.part_id,
            "trigger_part_id": self.trigger_part_id,
            "correlation_id": self.correlation_id,
            "captured_at": iso_utc(self.captured_at),
            "decided_at": iso_utc(self.decided_at),
            "verdict": self.verdict,
            "label": self.label,
            "confidence": None if self.confidence is None else float(self.confidence),
            "probabilities": {str(k): float(v) for k, v in self.probabilities.items()},
            "glimpse_path": [p.to_dict() for p in self.glimpse_path],
            "steps": int(self.steps),
            "latency_ms": round(float(self.latency_ms), 3),
            "model": model,
            "profile": {"name": self.profile_name, "sha256": self.profile_sha256},
            "footage": self.footage,
            "error": self.error,
        }
        if self.shadow is not None:
            doc["shadow"] = self.shadow
        return doc

    def to_json(self) -> str:
        """Compact JSON text; NaN or infinity raise ValueError (they are not JSON)."""
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Result:
        """Read a document written by :meth:`to_dict` (receivers, tests, retraining).

        :raises ValueError: the schema id is not ``inspector.result/1`` or a field is missing.
        """
        if doc.get("schema") not in SCHEMAS:
            raise ValueError(f"not an {SCHEMA} document (schema={doc.get('schema')!r})")
        try:
            return cls(
                station=doc["station"],
                part_id=doc["part_id"],
                captured_at=parse_iso_utc(doc["captured_at"]),
                decided_at=parse_iso_utc(doc["decided_at"]),
                verdict=doc["verdict"],
                label=doc["label"],
                confidence=doc["confidence"],
                probabilities=dict(doc["probabilities"]),
                glimpse_path=tuple(_point(p) for p in doc["glimpse_path"]),
                steps=int(doc["steps"]),
                latency_ms=float(doc["latency_ms"]),
                model_sha256=doc["model"]["sha256"],
                profile_name=doc["profile"]["name"],
                profile_sha256=doc["profile"]["sha256"],
                footage=doc.get("footage"),
                error=doc.get("error"),
                correlation_id=doc.get("correlation_id"),
                trigger_part_id=doc.get("trigger_part_id"),
                id=doc["id"],
                seq=doc.get("seq"),
                shadow=dict(doc["shadow"]) if isinstance(doc.get("shadow"), dict) else None,
                model_version=doc["model"].get("version"),
                model_channel=doc["model"].get("channel"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{SCHEMA} document is missing or has a bad field: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> Result:
        """Parse JSON text written by :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    def with_seq(self, seq: int) -> Result:
        """A copy carrying ``seq``."""
        return replace(self, seq=int(seq))


@lru_cache(maxsize=1)
def result_schema() -> dict[str, Any]:
    """The JSON Schema of ``inspector.result/1`` (shipped as package data)."""
    from importlib.resources import files

    text = files("inspector").joinpath("schemas/result.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def validate_result(doc: Mapping[str, Any] | str | bytes) -> None:
    """Check a result document against the JSON Schema.

    :param doc: a dict or JSON text.
    :raises ValueError: the document does not match; the message names the field.
    """
    import jsonschema

    if isinstance(doc, (str, bytes)):
        doc = json.loads(doc)
    validator = jsonschema.Draft202012Validator(
        result_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.absolute_path) or "(document)"
        raise ValueError(f"{SCHEMA}: {where}: {e.message}")
