"""The PLC handshake: triggers in, results out, nothing overwritten before it is acknowledged.

The convention is the one machine-vision PLC programs already use (trigger enable,
trigger, busy, result valid, result acknowledge, a small buffer of results)::

    PLC                          station
    waits for TriggerEnable ──▶  TriggerEnable = true  (ready, buffer not full)
    Trigger = true          ──▶  takes the trigger: Trigger = false, Busy = true,
                                 TriggerEnable = false
                                 inspects, commits the result to the outbox, then here
                                 Busy = false; the oldest unacknowledged result is shown
                                 (ResultSequence, ResultId, PartId, ...), ResultValid = true
    reads the result        ◀──
    ResultAck = true        ──▶  drops that result, ResultAck = false; the next buffered
                                 result (if any) is shown, else ResultValid = false

:class:`Handshake` is that state machine, thread-safe and free of any OPC UA code: the
station loop calls :meth:`Handshake.next_trigger` and :meth:`Handshake.deliver`, the
OPC UA server (another thread) calls :meth:`Handshake.request` and :meth:`Handshake.ack`.
Unacknowledged results live in :class:`PendingResults`, a table in the station's SQLite
outbox file, so a restarted station shows the PLC exactly the results it had not yet
acknowledged, in order, with the same sequence numbers.

A result is added here after it was committed to the outbox. A station that dies between
the two never shows that result to the PLC (it still reaches MQTT); the PLC sees the
station go offline while Busy and handles the part as not inspected, which is what a PLC
does with a camera that fails mid-part.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from inspector.errors import StationError

#: Longest part id / correlation id a PLC may hand over (the MQTT trigger's limits).
MAX_ID_CHARS = 256


@dataclass(frozen=True)
class PlcResult:
    """What the PLC reads for one part (a subset of the MQTT result document).

    :param seq: the handshake's own sequence number (1, 2, ...; survives restarts).
    :param result_id: the result's ``id`` (the same as over MQTT).
    :param part_id: the part id (the trigger's, when it carried one).
    :param correlation_id: the trigger's correlation id ("" when none).
    :param verdict: ``ok``, ``defect`` or ``failed`` (the part could not be judged).
    :param label: the declared class ("" when failed).
    :param confidence: probability of the declared class (0 when failed).
    :param decided_at: seconds since the epoch.
    :param model_sha256: the model that decided.
    :param profile_sha256: the reward profile it was checked against.
    :param glimpses: glimpses taken.
    :param error: why the part could not be judged ("" when decided).
    :param model_version: the registry version that decided (``v0003``; "" for a model file).
    :param model_channel: the channel it came through (``stable``, ``canary``, ``shadow``,
        ``pinned``; "" for a model file).
    """

    seq: int
    result_id: str
    part_id: str
    correlation_id: str
    verdict: str
    label: str
    confidence: float
    decided_at: float
    model_sha256: str
    profile_sha256: str
    glimpses: int
    error: str
    model_version: str = ""
    model_channel: str = ""

    @classmethod
    def from_result(cls, seq: int, doc: Mapping[str, Any]) -> PlcResult:
        """Build from a result document (``Result.to_dict()``)."""
        error = doc.get("error") or ""
        # A Result document nests them (model.sha256, profile.sha256); flat keys also read.
        model = doc.get("model") if isinstance(doc.get("model"), Mapping) else {}
        profile = doc.get("profile") if isinstance(doc.get("profile"), Mapping) else {}
        return cls(
            seq=int(seq),
            result_id=str(doc.get("id") or ""),
            part_id=str(doc.get("part_id") or ""),
            correlation_id=str(doc.get("correlation_id") or ""),
            verdict="failed" if error else str(doc.get("verdict") or ""),
            label=str(doc.get("label") or ""),
            confidence=float(doc.get("confidence") or 0.0),
            decided_at=_seconds(doc.get("decided_at")),
            model_sha256=str(model.get("sha256") or doc.get("model_sha256") or ""),
            profile_sha256=str(profile.get("sha256") or doc.get("profile_sha256") or ""),
            glimpses=int(doc.get("steps") or 0),
            error=str(error),
            model_version=str(model.get("version") or ""),
            model_channel=str(model.get("channel") or ""),
        )


def _seconds(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value:
        from inspector.station.result import parse_iso_utc

        return parse_iso_utc(value)
    return time.time()


class PendingResults:
    """Unacknowledged PLC results, oldest first, in the outbox's SQLite file.

    :param path: the SQLite file (the station's outbox; its own table ``plc_results``).
    :param capacity: results held before the station stops taking parts.
    :raises StationError: the file cannot be opened.
    """

    def __init__(self, path: str | Path, capacity: int) -> None:
        if capacity < 1:
            raise StationError(f"opcua.buffer must be at least 1, got {capacity}")
        self.path = Path(path)
        self.capacity = int(capacity)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), timeout=10.0, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS plc_results "
                "(seq INTEGER PRIMARY KEY, doc TEXT NOT NULL)"
            )
            # The next sequence number survives acknowledgement of every row.
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS plc_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"
            )
        except sqlite3.Error as exc:
            raise StationError(f"{self.path}: cannot open the PLC result buffer: {exc}") from exc

    def _last_seq(self) -> int:
        row = self._db.execute("SELECT v FROM plc_meta WHERE k='last_seq'").fetchone()
        return int(row[0]) if row else 0

    def add(self, doc: Mapping[str, Any]) -> PlcResult:
        """Append a result (durably) and return it with its sequence number.

        :raises StationError: the commit failed (the caller must not claim it was kept).
        """
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                seq = self._last_seq() + 1
                item = PlcResult.from_result(seq, doc)
                self._db.execute(
                    "INSERT INTO plc_results (seq, doc) VALUES (?, ?)",
                    (seq, json.dumps(asdict(item))),
                )
                self._db.execute(
                    "INSERT INTO plc_meta (k, v) VALUES ('last_seq', ?) "
                    "ON CONFLICT(k) DO UPDATE SET v=excluded.v",
                    (seq,),
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise StationError(f"{self.path}: PLC result not committed: {exc}") from exc
            return item

    def head(self) -> PlcResult | None:
        """The oldest unacknowledged result."""
        with self._lock:
            row = self._db.execute("SELECT doc FROM plc_results ORDER BY seq LIMIT 1").fetchone()
        return PlcResult(**json.loads(row[0])) if row else None

    def remove(self, seq: int) -> bool:
        """Drop result ``seq`` when it is the oldest; False otherwise (nothing changes)."""
        with self._lock:
            row = self._db.execute("SELECT MIN(seq) FROM plc_results").fetchone()
            if row is None or row[0] is None or int(row[0]) != int(seq):
                return False
            self._db.execute("DELETE FROM plc_results WHERE seq=?", (int(seq),))
            return True

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM plc_results").fetchone()[0])

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                pass


@dataclass(frozen=True)
class PlcTrigger:
    """A trigger the PLC gave (the station turns it into its own Trigger)."""

    part_id: str | None
    correlation_id: str | None
    received_at: float


class Handshake:
    """The trigger / result handshake between one PLC and the station loop.

    :param pending: the durable buffer of unacknowledged results.
    :param on_change: called (from whichever thread changed it) after any change the PLC
        should see; the OPC UA server re-publishes its variables from :meth:`snapshot`.
    """

    def __init__(self, pending: PendingResults, on_change: Callable[[], None] | None = None):
        self.pending = pending
        #: Called after any change the PLC should see (the OPC UA server sets it).
        self.on_change: Callable[[], None] = on_change or (lambda: None)
        self._cond = threading.Condition()
        self._trigger: PlcTrigger | None = None
        self._busy = False
        self._running = False
        self._woken = False
        self.triggers = 0
        self.refused = 0
        self.acknowledged = 0
        self.last_refusal = ""

    # -- station side ------------------------------------------------------------------
    def set_running(self, running: bool) -> None:
        """The station takes parts (True) or is stopping / stopped (False)."""
        with self._cond:
            self._running = bool(running)
        self.on_change()

    def wake(self) -> None:
        """Make a :meth:`next_trigger` waiting now return None (the station is stopping)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    @property
    def full(self) -> bool:
        """The buffer holds ``capacity`` unacknowledged results."""
        return len(self.pending) >= self.pending.capacity

    def next_trigger(self, timeout: float) -> PlcTrigger | None:
        """Wait up to ``timeout`` s for a PLC trigger; taking it makes the station busy.

        A trigger wakes the caller at once, a :meth:`wake` too (then None).
        """
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while self._trigger is None:
                left = deadline - time.monotonic()
                if left <= 0 or self._woken:
                    self._woken = False
                    return None
                self._cond.wait(left)
            trig, self._trigger = self._trigger, None
            self._busy = True
        self.on_change()
        return trig

    def deliver(self, doc: Mapping[str, Any]) -> PlcResult:
        """A result was committed: buffer it for the PLC and end the busy phase.

        :raises StationError: the buffer could not commit it (the station must stop).
        """
        try:
            item = self.pending.add(doc)
        finally:
            with self._cond:
                self._busy = False
            self.on_change()
        return item

    # -- PLC side (the OPC UA server's thread) -----------------------------------------
    def request(self, part_id: str | None = None, correlation_id: str | None = None) -> str:
        """The PLC triggers a part. Returns "" when taken, else why it was refused."""
        part_id, correlation_id = part_id or None, correlation_id or None
        for name, value in (("part id", part_id), ("correlation id", correlation_id)):
            if value is not None and (len(value) > MAX_ID_CHARS or not value.isprintable()):
                return self._refuse(f"{name} longer than {MAX_ID_CHARS} or not printable")
        with self._cond:
            why = ""
            if not self._running:
                why = "station not running"
            elif self._busy or self._trigger is not None:
                why = "busy with the previous part"
            elif len(self.pending) >= self.pending.capacity:
                why = f"result buffer full ({self.pending.capacity} unacknowledged)"
            if not why:
                self._trigger = PlcTrigger(part_id, correlation_id, time.time())
                self.triggers += 1
                self._cond.notify_all()
        if why:
            return self._refuse(why)
        self.on_change()
        return ""

    def _refuse(self, why: str) -> str:
        with self._cond:
            self.refused += 1
            self.last_refusal = why
        self.on_change()
        return why

    def ack(self, seq: int | None = None) -> bool:
        """The PLC acknowledges the shown result (``seq`` None: whichever is shown).

        A repeated or stale acknowledgement (``seq`` not the shown one) changes nothing,
        so a PLC that retries after a reconnect never drops a result it has not read.
        """
        head = self.pending.head()
        if head is None or (seq is not None and int(seq) != head.seq):
            return False
        done = self.pending.remove(head.seq)
        if done:
            with self._cond:
                self.acknowledged += 1
            self.on_change()
        return done

    def snapshot(self) -> dict[str, Any]:
        """Everything the PLC sees, as plain values (the server writes them in order)."""
        head = self.pending.head()
        with self._cond:
            busy, running = self._busy, self._running
            waiting = self._trigger is not None
            counts = (self.triggers, self.refused, self.acknowledged, self.last_refusal)
        pending = len(self.pending)
        return {
            "state": "busy" if busy or waiting else ("ready" if running else "stopped"),
            "trigger_enable": running
            and not busy
            and not waiting
            and pending < self.pending.capacity,
            "busy": busy or waiting,
            "result_valid": head is not None,
            "result": head,
            "pending": pending,
            "buffer_full": pending >= self.pending.capacity,
            "triggers": counts[0],
            "refused": counts[1],
            "acknowledged": counts[2],
            "last_refusal": counts[3],
        }
