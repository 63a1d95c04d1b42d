"""The station's watch over itself between parts: back-pressure (outbox full, commits
failing, the PLC's buffer), the errors background threads counted, the metrics' link
gauges and the live status line.

:class:`StationStatus` is a part of :class:`~inspector.station.loop.Station` (a mixin:
it reads the attributes ``Station.__init__`` sets).
"""

from __future__ import annotations

import time
from typing import Any


class StationStatus:
    """Back-pressure, error counts and the status line (see the module docstring)."""

    # -- back-pressure ---------------------------------------------------------------
    def _commit_failure(self) -> str | None:
        """Why the station must stop (commits failing for too long), or None."""
        since = getattr(self.reporter, "failing_since", None)
        if since is None:
            return None
        waited = time.monotonic() - since
        if waited < self.cfg.outbox.commit_timeout_s:
            return None
        err = getattr(self.reporter, "last_commit_error", None) or "unknown error"
        return f"outbox commits failed for {waited:.0f} s ({err})"

    def _accepting(self) -> bool:
        if self.opcua is not None and not self.opcua.check_room(self._say_station):
            return False
        ok = bool(getattr(self.reporter, "accepting", True))
        now = time.monotonic()
        if not ok and self._full_since is None:
            self._full_since = now
            err = getattr(self.reporter, "last_commit_error", None)
            if err:
                self._say_station(f"OUTBOX COMMITS FAIL ({err}): not taking parts")
            else:
                self._say_station("OUTBOX FULL: not taking parts until the broker takes results")
            self._status_line()
        elif ok and self._full_since is not None:
            waited = now - self._full_since
            self._say_station(f"outbox below its limit after {waited:.1f} s: taking parts")
            self._full_since = None
        return ok

    # -- status ----------------------------------------------------------------------
    def _count_errors(self, kind: str, total: Any) -> None:
        """Count as ``kind`` errors what a background thread's counter gained since last time.

        The footage writer, the committer and the publisher log their own errors and only
        keep a running total; this turns the new ones into metrics.
        """
        n = int(total or 0)
        seen = self._thread_errors.get(kind, 0)
        for _ in range(n - seen):
            self.metrics.error(kind)
        self._thread_errors[kind] = max(seen, n)

    def _tick(self) -> None:
        self.metrics.beat()
        self._count_errors("footage", getattr(self.recorder, "errors", 0))
        self._count_errors("outbox", getattr(self.reporter, "commit_errors", 0))
        st = self.reporter.status() if hasattr(self.reporter, "status") else None
        if st is not None:
            self.metrics.link(
                st.outbox_depth, st.outbox_full, st.connected, getattr(st, "dead_letters", 0)
            )
            self._count_errors("broker", st.errors)  # refused, lost, TLS
        if time.monotonic() - self._last_status >= self.cfg.status_interval:
            self._status_line(st)

    def status_text(self, st: Any = None, word: str = "") -> str:
        """The live status line (``word`` goes after the station id, e.g. ``stopped:``)."""
        if st is None and hasattr(self.reporter, "status"):
            st = self.reporter.status()
        c = self.metrics.counts()
        head = f"[{self.cfg.station_id}] {word + ' ' if word else ''}"
        text = (
            f"{head}parts {c['parts']} ok {c['ok']} defect {c['defect']} "
            f"errors {c['errors']} | {self.metrics.rate():.1f} parts/s"
        )
        if st is not None:
            if self.publisher is None:
                broker = "off"
            elif st.connected:
                broker = "connected"
            else:
                broker = f"DOWN ({st.last_error})" if st.last_error else "connecting"
            full = " FULL" if st.outbox_full else ""
            dead = getattr(st, "dead_letters", 0)
            full += f" ({dead} dead-lettered)" if dead else ""
            text += f" | outbox {st.outbox_depth}{full} | broker {broker}"
        return text

    def _status_line(self, st: Any = None) -> None:
        self._last_status = time.monotonic()
        self._say(self.status_text(st))
        if self.publisher is not None and self.publisher.connected:
            self.publisher.update_status(self.metrics.counts())
