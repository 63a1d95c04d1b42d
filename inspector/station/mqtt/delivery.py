"""The outbox window: results published in seq order, PUBACKs applied in batches, results
the broker will not take moved to the dead-letter table, and the pump thread that does it
when the station's own thread does not (see the package docstring for the guarantees).

:class:`Delivery` is the half of :class:`~inspector.station.mqtt.publisher.Publisher`
that talks to the outbox; the publisher adds the MQTT client, its callbacks and the status.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from inspector.station.mqtt.settings import MqttConfig
from inspector.station.outbox import Outbox, OutboxItem

log = logging.getLogger("inspector.station.mqtt")

#: Acknowledged rows are deleted once this many PUBACKs are waiting ...
ACK_BATCH = 64
#: ... or when the oldest waiting PUBACK is this old (seconds).
ACK_DELAY_S = 0.05
#: MQTT 5 PUBACK reason codes that concern the message itself (not the client's rights):
#: Packet too large, Payload format invalid. Such a result is dead-lettered, not retried.
_MESSAGE_REFUSALS = (0x95, 0x99)


class Delivery:
    """Publishes an outbox's rows in order, at most ``window`` unacknowledged at a time.

    A subclass provides the client (``_client``), ``result_topic``, ``connected``,
    ``_error(message)`` and ``_publish_status()``.

    :param config: broker and topic settings (``window``, ``max_payload``, back-off).
    :param outbox: where results wait for their PUBACK.
    """

    _client: Any
    result_topic: str

    def __init__(self, config: MqttConfig, outbox: Outbox) -> None:
        self.config = config
        self.outbox = outbox
        self.last_error: str | None = None
        # _lock guards the state below; _cond wakes the pump and flush(). _publish_lock is
        # held around each client.publish() of a result and by on_connect, so a publish
        # can never straddle a reconnect (see _fill_locked). Lock order: _fill_lock,
        # _publish_lock, _lock.
        # on_publish runs with paho's message mutex held, so it takes only _lock, and
        # nobody holds _lock while calling into paho.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._publish_lock = threading.Lock()
        self._connected = False
        self._session = 0
        self._cursor = 0
        self._inflight: dict[int, OutboxItem] = {}
        self._early: dict[int, Any] = {}
        self._status_mids: set[int] = set()
        self._ignore: set[int] = set()
        self._acks: list[str] = []
        self._acks_since = 0.0
        self._flush_waiters = 0
        # Held by whoever runs _fill_locked (the station thread after a commit, or the pump), so
        # two threads never publish the same rows.
        self._fill_lock = threading.Lock()
        self._dirty = True
        self._retry_at = 0.0
        self._stopping = False
        self._closing = False
        self._max_sent = 0
        self._was_full = False
        self._n = dict.fromkeys(
            ("published", "acknowledged", "republished", "connects", "errors", "triggers",
             "bad_triggers", "callback_errors"), 0,
        )  # fmt: skip
        # Results the broker will not take, waiting for the pump to move them aside.
        self._dead: dict[str, tuple[OutboxItem, str]] = {}
        self._broker_max_packet: int | None = None

    @property
    def connected(self) -> bool:  # pragma: no cover - the publisher overrides it
        raise NotImplementedError

    def _error(self, message: str) -> None:  # pragma: no cover - the publisher overrides it
        raise NotImplementedError

    def _publish_status(self, state: str | None = None, reason: str | None = None) -> Any:
        raise NotImplementedError  # pragma: no cover - the publisher overrides it

    # -- what the station calls ------------------------------------------------------
    def notify(self) -> None:
        """The outbox has new results: publish them now, on the calling thread (call after put).

        When the pump is publishing already (a backlog after a reconnect), this only tells it
        to go on. Never raises: a failure is logged and left to the pump to retry.
        """
        with self._cond:
            self._dirty = True
        if not self._fill_lock.acquire(blocking=False):
            with self._cond:
                self._cond.notify_all()
            return
        try:
            self._fill_locked()
        except Exception as exc:  # the pump retries; the station must not see it
            self._error(f"publishing results failed: {exc}")
            with self._cond:
                self._dirty = True
                self._cond.notify_all()
        finally:
            self._fill_lock.release()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until the outbox is empty (everything acknowledged) or ``timeout`` passes.

        :returns: True when the outbox is empty.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            self._dirty = True
            self._flush_waiters += 1  # acknowledgements are applied at once meanwhile
            self._cond.notify_all()
            try:
                while True:
                    if self.outbox.depth() == 0 and not self._acks:
                        return True
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(min(left, 0.2))
            finally:
                self._flush_waiters -= 1

    # -- PUBACKs (paho's network thread) ---------------------------------------------
    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        refused = None
        with self._cond:
            if mid in self._status_mids:
                self._status_mids.discard(mid)
                return
            if mid in self._ignore:
                self._ignore.discard(mid)  # sent before a refusal; it is sent again
                return
            item = self._inflight.pop(mid, None)
            if item is None:
                # The PUBACK beat the pump's bookkeeping after publish() returned.
                self._early[mid] = reason
                return
            if reason is not None and reason.is_failure and reason.value in _MESSAGE_REFUSALS:
                # About this message, not our rights: retrying cannot help.
                self._dead[item.id] = (item, f"the broker refused it: {reason}")
                self._dirty = True
            elif reason is not None and reason.is_failure:
                refused = (item, reason)
                self._refuse_locked()
            else:
                self._add_ack_locked(item.id)
                self._dirty = True  # the window has room again
            if refused is not None or self._acks_due_locked() or self._flush_waiters:
                self._cond.notify_all()
        if refused is not None:
            self._error(
                f"broker refused result seq {refused[0].seq} on {self.result_topic}: "
                f"{refused[1]} (check the ACL); keeping it, retrying"
            )

    def _add_ack_locked(self, result_id: str) -> None:
        if not self._acks:
            self._acks_since = time.monotonic()
        self._acks.append(result_id)
        self._n["acknowledged"] += 1

    def _acks_due_locked(self) -> bool:
        """Time to delete the acknowledged rows (a batch is full, old, or someone waits)."""
        if not self._acks:
            return False
        return (
            len(self._acks) >= ACK_BATCH
            or self._flush_waiters > 0
            or self._stopping
            or time.monotonic() - self._acks_since >= ACK_DELAY_S
        )

    def _refuse_locked(self) -> None:
        # MQTT 5 negative PUBACK (ACL): keep the row, stop, and start over from the oldest
        # unacknowledged row after a back-off, so nothing is skipped and order holds.
        # PUBACKs still due for the abandoned messages are ignored, not taken as acks.
        self._ignore.update(self._inflight)
        self._inflight.clear()
        self._early.clear()
        self._cursor = 0
        self._session += 1
        self._retry_at = time.monotonic() + max(0.1, self.config.reconnect_min_delay)

    # -- the pump (its own thread) ---------------------------------------------------
    def _pump(self) -> None:
        while True:
            with self._cond:
                while not (
                    self._stopping
                    or self._acks_due_locked()
                    or self._can_fill_locked()
                    or self._dead
                ):
                    self._cond.wait(ACK_DELAY_S if self._acks else 0.25)
                    # Poll now and then: something else may have put into the outbox.
                    self._dirty = True
                acks = []
                if self._acks_due_locked():
                    acks, self._acks = self._acks, []
                stopping = self._stopping
            if acks:
                self.outbox.ack_many(acks)
                with self._cond:
                    self._cond.notify_all()  # flush() waits on the depth
            self._move_dead()
            if stopping:
                return
            self._check_full()
            try:
                with self._fill_lock:
                    self._fill_locked()
            except Exception as exc:  # never let the pump die: the station relies on it
                self._error(f"publishing results failed: {exc}")
                with self._cond:
                    self._cond.wait(0.5)

    def _move_dead(self) -> None:
        """Move the results the broker will not take to the dead-letter table."""
        with self._lock:
            dead = list(self._dead.values())
        for item, reason in dead:
            if self.outbox.dead_letter(item.id, reason):
                log.error(
                    "mqtt: result seq %d (id %s, %d bytes) moved to the outbox's dead-letter "
                    "table: %s; later results go on",
                    item.seq, item.id, len(item.payload.encode()), reason,
                )  # fmt: skip
            with self._cond:
                self._dead.pop(item.id, None)
                self._dirty = True
                self._cond.notify_all()  # flush() waits on the depth

    def payload_limit(self) -> int:
        """The largest result payload published now (bytes): ``max_payload``, and under
        MQTT 5 the broker's maximum packet size less the PUBLISH header."""
        limit = int(self.config.max_payload)
        if self._broker_max_packet:
            limit = min(limit, self._broker_max_packet - len(self.result_topic.encode()) - 16)
        return limit

    def _can_fill_locked(self) -> bool:
        return (
            self._connected
            and self._dirty
            and len(self._inflight) < self.config.window
            and time.monotonic() >= self._retry_at
        )

    def _fill_locked(self) -> None:
        """Publish what the window allows; the caller holds ``_fill_lock``."""
        with self._lock:
            if not self._can_fill_locked():
                return
            self._dirty = False
            session = self._session
            space = self.config.window - len(self._inflight)
            cursor = self._cursor
        rows = self.outbox.pending(space, after_seq=cursor)
        limit = self.payload_limit()
        for row in rows:
            size = len(row.payload.encode())
            with self._lock:
                if self._session != session:
                    return  # a reconnect started over; never move the cursor past its rows
                if row.id in self._dead:
                    self._cursor = max(self._cursor, row.seq)
                    continue
                if size > limit:
                    # Sent, it would be dropped (or the connection cut) and sent again
                    # forever, holding back every later result: move it aside.
                    self._dead[row.id] = (row, f"{size} bytes, over the limit of {limit}")
                    self._cursor = max(self._cursor, row.seq)
                    self._cond.notify_all()
                    continue
            with self._publish_lock:
                with self._lock:
                    if self._session != session or not self._connected:
                        return
                try:
                    info = self._client.publish(self.result_topic, row.payload, qos=1)
                except ValueError as exc:  # paho: payload beyond what MQTT can carry
                    with self._cond:
                        self._dead[row.id] = (row, str(exc))
                        if self._session == session:
                            self._cursor = max(self._cursor, row.seq)
                        self._cond.notify_all()
                    continue
                if info.rc != 0:  # MQTT_ERR_SUCCESS
                    # Not connected after all; on_connect starts over from the outbox.
                    return
                with self._cond:
                    self._n["published"] += 1
                    if row.seq <= self._max_sent:
                        self._n["republished"] += 1
                    self._max_sent = max(self._max_sent, row.seq)
                    if self._session != session:
                        return
                    self._cursor = row.seq
                    if info.mid in self._early:
                        reason = self._early.pop(info.mid)
                        if reason is not None and reason.is_failure:
                            self._refuse_locked()
                            return
                        self._add_ack_locked(row.id)
                        if self._acks_due_locked():
                            self._cond.notify_all()
                    else:
                        self._inflight[info.mid] = row
        if len(rows) == space:
            with self._lock:
                self._dirty = True

    def _check_full(self) -> None:
        full = self.outbox.full
        if full == self._was_full:
            return
        self._was_full = full
        if full:
            log.error(
                "outbox full: %d results unacknowledged (limit %d); the station stops taking "
                "parts until the broker takes results", self.outbox.depth(), self.outbox.limit,
            )  # fmt: skip
        else:
            log.warning("outbox below its limit again (%d); taking parts", self.outbox.depth())
        if self.connected:
            self._publish_status()
