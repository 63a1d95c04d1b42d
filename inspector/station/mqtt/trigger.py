"""Part triggers from ``<prefix>/trigger``: untrusted input, parsed with bounds."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

#: The largest trigger payload read (bytes); larger ones are counted and dropped.
MAX_TRIGGER_BYTES = 4096
#: The longest ``part_id`` or ``correlation_id`` a trigger may carry (characters).
MAX_TRIGGER_ID = 128


@dataclass(frozen=True)
class Trigger:
    """A request to inspect a part, from ``<prefix>/trigger``.

    :param part_id: the part id to report, when the sender knows it.
    :param correlation_id: an id the result echoes, for the sender to match replies.
    :param received_at: arrival time, seconds since the epoch.
    """

    part_id: str | None = None
    correlation_id: str | None = None
    received_at: float = field(default_factory=time.time)


def _trigger_id(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"trigger {key} must be a string, got {type(value).__name__}")
    if isinstance(value, int) and abs(value) >= 2**63:
        raise ValueError(f"trigger {key} is an integer beyond 64 bits")
    text = str(value)
    if not text or len(text) > MAX_TRIGGER_ID:
        raise ValueError(f"trigger {key} must be 1 to {MAX_TRIGGER_ID} characters, got {len(text)}")
    if not text.isprintable():
        raise ValueError(f"trigger {key} holds control characters")
    return text


def parse_trigger(payload: bytes) -> Trigger:
    """Parse a trigger payload: empty, or a JSON object with optional string fields.

    Bounded: at most :data:`MAX_TRIGGER_BYTES` of UTF-8, ``part_id`` and
    ``correlation_id`` strings (or integers) of 1 to :data:`MAX_TRIGGER_ID` printable
    characters. Other keys are ignored.

    :raises ValueError: too large, not UTF-8 JSON, nested too deeply, not an object, or a
        field of the wrong type or size.
    """
    if len(payload) > MAX_TRIGGER_BYTES:
        raise ValueError(f"payload of {len(payload)} bytes (limit {MAX_TRIGGER_BYTES})")
    if not payload.strip():
        return Trigger()
    try:
        doc = json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("payload is not UTF-8") from None
    except RecursionError:
        raise ValueError("payload nested too deeply") from None
    if not isinstance(doc, dict):
        raise ValueError("a trigger must be a JSON object")
    out = {key: _trigger_id(key, doc.get(key)) for key in ("part_id", "correlation_id")}
    return Trigger(**out)
