"""Is the station alive? Its heartbeat, read from its own Prometheus endpoint.

The station loop sets the gauge ``inspector_heartbeat_timestamp_seconds`` (Unix
time) on every turn, whether or not a part arrives, a broker is up or the outbox
is full: those are states the station handles itself and reports, not reasons to
restart it. A heartbeat older than ``max_age`` seconds means the loop is stuck (a
camera read that never returns, a wedged backend), which a restart cures. A
Kubernetes liveness probe (deploy/k3s) runs ``inspector health`` in the station's
container; it reads the endpoint on loopback, so no port needs opening for it.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request

from inspector.errors import StationError

HEARTBEAT = "inspector_heartbeat_timestamp_seconds"
#: A metrics page larger than this is not the station's.
MAX_BYTES = 4 * 1024 * 1024
_LINE = re.compile(rf"^{HEARTBEAT}(?:\{{[^}}]*\}})?\s+(\S+)", re.M)


def heartbeat_age(host: str, port: int, timeout: float = 3.0, now: float | None = None) -> float:
    """Seconds since the station's last heartbeat.

    :param host: the endpoint's address (the station's ``metrics_host``; loopback).
    :param port: its ``metrics_port``.
    :param timeout: seconds to wait for the page.
    :param now: the current Unix time (tests).
    :raises StationError: no endpoint, no heartbeat on it, or an unreadable value.
    """
    url = f"http://{host}:{int(port)}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read(MAX_BYTES + 1)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise StationError(f"no metrics endpoint at {url}: {reason}") from None
    if len(body) > MAX_BYTES:
        raise StationError(f"{url}: the page is larger than {MAX_BYTES} bytes")
    m = _LINE.search(body.decode("utf-8", "replace"))
    if m is None:
        raise StationError(f"{url}: no {HEARTBEAT} (not a station, or it has not started)")
    try:
        beat = float(m.group(1))
    except ValueError:
        raise StationError(f"{url}: {HEARTBEAT} is {m.group(1)[:20]!r}, not a number") from None
    return (time.time() if now is None else now) - beat


def check(host: str, port: int, max_age: float, timeout: float = 3.0) -> str:
    """One line saying the station is alive.

    :param host: see :func:`heartbeat_age`.
    :param port: see :func:`heartbeat_age`.
    :param max_age: the oldest heartbeat that still counts as alive, in seconds.
    :param timeout: see :func:`heartbeat_age`.
    :raises StationError: no heartbeat, or one older than ``max_age``.
    """
    age = heartbeat_age(host, port, timeout)
    if age > max_age:
        raise StationError(f"station loop stuck: last heartbeat {age:.1f} s ago (> {max_age:g} s)")
    return f"ok: heartbeat {max(age, 0.0):.1f} s ago"
