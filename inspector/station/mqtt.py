"""MQTT reporting: results from the outbox to the broker, status, and part triggers.

Topics under ``prefix`` (default ``inspector/v1/<station>``):

* ``<prefix>/result``  QoS 1, one :mod:`inspector.station.result` document per part;
* ``<prefix>/status``  QoS 1, retained; the last will sets it to ``offline``;
* ``<prefix>/trigger`` subscribed when triggers are on; payload ``{part_id?, correlation_id?}``.

Delivery is at least once and in order:

* a result is deleted from the :class:`~inspector.station.outbox.Outbox` only when its
  PUBACK arrives (``on_publish`` with the message id -> result id map);
* results are published in ascending ``seq``, at most ``window`` unacknowledged at a
  time, by whichever thread holds the fill lock: the thread that just committed them
  (:meth:`Publisher.notify`, the common case: no hand-off per part) or the pump thread
  (after a reconnect, or when the committing thread found the lock taken). paho's
  ``max_inflight_messages`` is set above the window, so paho never holds a message back
  and releases it later; paho writes them in call order to one TCP stream, and an MQTT
  broker forwards the messages of one client on one topic in the order received (MQTT
  3.1.1 section 4.6, 5.0 section 4.6);
* every new connection is a clean session and starts again from the oldest unacknowledged
  row. paho's own in-memory copies are dropped on connect (``drop_out_messages``), so the
  outbox is the only source of retransmission. A receiver therefore sees results in seq
  order if it keeps only the first copy of each id; the copies it drops are re-sends of
  results whose PUBACK was lost.

Acknowledged rows are deleted in batches (every ``ACK_BATCH`` PUBACKs or ``ACK_DELAY_S``,
and at once while someone waits in :meth:`Publisher.flush`): one SQLite transaction and one
pump wake-up per batch instead of per part. A crash between PUBACK and delete only means
the result is published again, which receivers de-duplicate anyway.

A result the broker will not take (larger than ``max_payload`` or than the broker's
maximum packet size, or refused in an MQTT 5 PUBACK as too large or malformed) would sit
at the head of the outbox and hold back every later result, across restarts; it is moved
to the outbox's dead-letter table instead (:meth:`Outbox.dead_letter`), with an ERROR log
line and the ``dead_letters`` count in :class:`LinkStatus`.

Triggers are untrusted input: the payload is bounded (:data:`MAX_TRIGGER_BYTES`), and so
are ``part_id`` and ``correlation_id`` (:data:`MAX_TRIGGER_ID`, printable); every paho
callback catches everything (a RecursionError from a deeply nested payload included), so
paho's network thread never dies under the station while its status says ``online``.

Errors never reach the station: a refused connection (bad credentials, ACL), a TLS failure
or a lost broker is logged at ERROR on every attempt, kept in :attr:`Publisher.last_error`,
and retried with exponential back-off (paho's ``reconnect_delay_set`` and ``loop_start``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.errors import MissingDependencyError, StationError
from inspector.station.outbox import Outbox, OutboxItem
from inspector.station.result import iso_utc

log = logging.getLogger(__name__)

#: Acknowledged rows are deleted once this many PUBACKs are waiting ...
ACK_BATCH = 64
#: ... or when the oldest waiting PUBACK is this old (seconds).
ACK_DELAY_S = 0.05

#: Schema id of the status document.
STATUS_SCHEMA = "inspector.status/1"
#: The largest trigger payload read (bytes); larger ones are counted and dropped.
MAX_TRIGGER_BYTES = 4096
#: The longest ``part_id`` or ``correlation_id`` a trigger may carry (characters).
MAX_TRIGGER_ID = 128
#: MQTT 5 PUBACK reason codes that concern the message itself (not the client's rights):
#: Packet too large, Payload format invalid. Such a result is dead-lettered, not retried.
_MESSAGE_REFUSALS = (0x95, 0x99)
_PROTOCOLS = {"3.1.1": "MQTTv311", "311": "MQTTv311", "v311": "MQTTv311", "5": "MQTTv5",
              "5.0": "MQTTv5", "v5": "MQTTv5"}  # fmt: skip


@dataclass(frozen=True)
class TlsConfig:
    """TLS to the broker.

    :param ca: CA certificate file that signed the broker's certificate (None: system CAs).
    :param cert: client certificate file, for brokers that require one.
    :param key: the client certificate's private key file.
    :param insecure: skip the host name check (the chain is still verified). Never on a line.
    """

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False


@dataclass(frozen=True)
class MqttSettings:
    """The broker settings, as a station's YAML (``mqtt:``) and the publisher share them.

    :param host: broker host name or address.
    :param port: broker port (None: 8883 with TLS, else 1883).
    :param tls: TLS settings (``ca``, ``cert``, ``key``, ``insecure``), or None for plain TCP.
    :param username: user name, or None for anonymous.
    :param password: password given in the config (prefer ``password_env``: keep secrets
        out of the YAML).
    :param password_env: name of an environment variable holding the password.
    :param client_id: MQTT client id (default ``inspector-<station>``).
    :param prefix: topic prefix (default ``inspector/v1/<station>``).
    :param keepalive: keep-alive interval in seconds.
    :param protocol: ``3.1.1`` or ``5``. MQTT 5 also reports a result the broker refused
        (ACL) in its PUBACK; 3.1.1 cannot, so a denied result is lost silently there.
    :param window: results published but not yet acknowledged, at most.
    :param reconnect_min_delay: first back-off delay in seconds.
    :param reconnect_max_delay: back-off ceiling in seconds.
    :param max_payload: the largest result published (bytes); a larger one goes to the
        outbox's dead-letter table instead of blocking every later result. Brokers cap
        packets (AWS IoT at 128 KiB); with MQTT 5 the broker's own cap also counts.
    """

    host: str = "127.0.0.1"
    port: int | None = None
    tls: TlsConfig | None = None
    username: str | None = None
    password: str | None = None
    password_env: str | None = None
    client_id: str | None = None
    prefix: str | None = None
    keepalive: int = 30
    protocol: str = "3.1.1"
    window: int = 32
    reconnect_min_delay: float = 1.0
    reconnect_max_delay: float = 30.0
    max_payload: int = 128 * 1024


@dataclass(frozen=True)
class MqttConfig(MqttSettings):
    """How the station talks to its broker: the :class:`MqttSettings` and who is talking.

    :param station: station id; names the default prefix and client id (required:
        :meth:`check` refuses an empty one).
    :param triggers: subscribe to ``<prefix>/trigger``.
    :param trigger_queue: triggers waiting for the station, at most (more are dropped, loudly).
    """

    station: str = ""
    triggers: bool = False
    trigger_queue: int = 1000

    @property
    def topic_prefix(self) -> str:
        """The prefix in use."""
        return (self.prefix or f"inspector/v1/{self.station}").rstrip("/")

    @property
    def broker_port(self) -> int:
        """The port in use."""
        if self.port is not None:
            return int(self.port)
        return 8883 if self.tls is not None else 1883

    def resolved_password(self) -> str | None:
        """The password: from ``password_env`` when set, else ``password``.

        :raises StationError: ``password_env`` names a variable that is not set.
        """
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise StationError(
                    f"mqtt.password_env: environment variable {self.password_env} is not set"
                )
            return value
        return self.password

    def check(self) -> None:
        """Validate values that would otherwise fail deep inside paho.

        :raises StationError: one line naming the bad setting.
        """
        if not self.station or any(c in self.station for c in "+#/"):
            raise StationError(f"mqtt: station id {self.station!r} must be non-empty without + # /")
        if not 1024 <= int(self.max_payload) <= 268_435_455:
            raise StationError(
                f"mqtt.max_payload must be 1024 to 268435455 bytes, got {self.max_payload}"
            )
        if any(c in self.topic_prefix for c in "+#") or not self.topic_prefix:
            raise StationError(f"mqtt.prefix {self.topic_prefix!r} must not contain + or #")
        if str(self.protocol) not in _PROTOCOLS:
            raise StationError(f"mqtt.protocol must be 3.1.1 or 5, got {self.protocol!r}")
        if not 0 < self.broker_port < 65536:
            raise StationError(f"mqtt.port {self.broker_port} is not a TCP port")
        if self.keepalive < 1:
            raise StationError(f"mqtt.keepalive must be at least 1 s, got {self.keepalive}")
        if self.window < 1:
            raise StationError(f"mqtt.window must be at least 1, got {self.window}")
        if self.password is not None and self.password_env:
            raise StationError("mqtt: give password or password_env, not both")
        if self.tls is not None:
            for name in ("ca", "cert", "key"):
                p = getattr(self.tls, name)
                if p is not None and not Path(p).is_file():
                    raise StationError(f"mqtt.tls.{name}: file not found: {p}")
            if (self.tls.cert is None) != (self.tls.key is None):
                raise StationError("mqtt.tls: cert and key go together")


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


@dataclass(frozen=True)
class LinkStatus:
    """What the status line and the metrics show about reporting.

    :param connected: the broker accepted the connection and it is up.
    :param outbox_depth: results committed and not yet acknowledged.
    :param outbox_full: depth has reached the outbox limit (station stops taking parts).
    :param last_error: the latest connection or delivery error, None after a good connect.
    :param published: result publishes handed to the broker (re-sends included).
    :param acknowledged: results the broker acknowledged.
    :param republished: publishes of a result that had been sent before.
    :param connects: successful connections so far.
    :param errors: connection and delivery errors so far.
    :param triggers: triggers received.
    :param bad_triggers: trigger payloads that were not understood (logged, dropped).
    :param dead_letters: results in the outbox's dead-letter table (never delivered: the
        broker would not take them); they no longer hold back the others.
    :param callback_errors: exceptions caught in paho callbacks (logged).
    """

    connected: bool
    outbox_depth: int
    outbox_full: bool
    last_error: str | None
    published: int
    acknowledged: int
    republished: int
    connects: int
    errors: int
    triggers: int
    bad_triggers: int
    dead_letters: int = 0
    callback_errors: int = 0


def _paho() -> Any:
    try:
        import paho.mqtt.client as mqtt
    except ImportError:
        raise MissingDependencyError(
            "paho-mqtt", "MQTT reporting", "pip install 'paho-mqtt>=2,<3'"
        ) from None
    if not hasattr(mqtt, "CallbackAPIVersion"):
        raise MissingDependencyError("paho-mqtt>=2", "MQTT reporting", "pip install -U paho-mqtt")
    return mqtt


class Publisher:
    """Publishes an outbox to a broker; owns the MQTT client and a pump thread.

    Nothing here raises into the station after :meth:`start`: errors are logged,
    counted and kept in :attr:`last_error`.

    :param config: broker and topic settings.
    :param outbox: where results wait for their PUBACK.
    :raises StationError: a bad setting (checked before any connection is tried).
    :raises MissingDependencyError: paho-mqtt 2.x is not installed.
    """

    def __init__(self, config: MqttConfig, outbox: Outbox) -> None:
        config.check()
        self.config = config
        self.outbox = outbox
        self.prefix = config.topic_prefix
        self.result_topic = f"{self.prefix}/result"
        self.status_topic = f"{self.prefix}/status"
        self.trigger_topic = f"{self.prefix}/trigger"
        #: Triggers for the station, in arrival order (see :meth:`next_trigger`).
        self.triggers: queue.Queue[Trigger] = queue.Queue(maxsize=max(1, config.trigger_queue))
        self.last_error: str | None = None
        #: Set while the broker has granted the trigger subscription (cleared on disconnect).
        self.trigger_subscribed = threading.Event()
        self._trigger_mid: int | None = None

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
        self._counts: dict[str, Any] = {}
        self._n = dict.fromkeys(
            ("published", "acknowledged", "republished", "connects", "errors", "triggers",
             "bad_triggers", "callback_errors"), 0,
        )  # fmt: skip
        # Results the broker will not take, waiting for the pump to move them aside.
        self._dead: dict[str, tuple[OutboxItem, str]] = {}
        self._broker_max_packet: int | None = None
        self._pump_thread: threading.Thread | None = None
        self._client = self._make_client()

    # -- set-up ----------------------------------------------------------------------
    def _make_client(self) -> Any:
        mqtt = _paho()
        cfg = self.config
        owner = self

        class _Client(mqtt.Client):
            # paho's loop catches OSError from (re)connecting and only says "failed";
            # this override keeps the reason (refused, TLS, DNS) for last_error.
            def reconnect(self) -> Any:
                try:
                    return super().reconnect()
                except OSError as exc:
                    owner._connect_failed(exc)
                    raise

        v5 = _PROTOCOLS[str(cfg.protocol)] == "MQTTv5"
        kwargs: dict[str, Any] = {
            "callback_api_version": mqtt.CallbackAPIVersion.VERSION2,
            "client_id": cfg.client_id or f"inspector-{cfg.station}",
            "protocol": mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
        }
        if not v5:
            # A clean session: the outbox, not the broker, remembers what is unacknowledged.
            kwargs["clean_session"] = True
        client = _Client(**kwargs)
        self._v5 = v5
        client.max_inflight_messages_set(cfg.window + 8)
        client.max_queued_messages_set(0)
        client.reconnect_delay_set(cfg.reconnect_min_delay, cfg.reconnect_max_delay)
        if cfg.username is not None:
            client.username_pw_set(cfg.username, cfg.resolved_password())
        if cfg.tls is not None:
            try:
                client.tls_set(
                    ca_certs=cfg.tls.ca,
                    certfile=cfg.tls.cert,
                    keyfile=cfg.tls.key,
                    cert_reqs=ssl.CERT_REQUIRED,
                    tls_version=ssl.PROTOCOL_TLS_CLIENT,
                )
            except (OSError, ValueError) as exc:
                raise StationError(f"mqtt.tls: cannot load the certificates: {exc}") from None
            client.tls_insecure_set(bool(cfg.tls.insecure))
        client.will_set(
            self.status_topic, self._status_payload("offline", "connection lost"), 1, True
        )
        # Every callback is guarded: an exception escaping one kills paho's network thread.
        client.on_connect = self._guarded(self._on_connect)
        client.on_disconnect = self._guarded(self._on_disconnect)
        client.on_publish = self._guarded(self._on_publish)
        client.on_message = self._guarded(self._on_message)
        client.on_subscribe = self._guarded(self._on_subscribe)
        return client

    def _guarded(self, callback: Any) -> Any:
        """``callback``, with every exception caught, counted and logged."""

        def run(*args: Any) -> None:
            try:
                callback(*args)
            except Exception as exc:  # RecursionError, MemoryError's cousins, bugs
                with self._lock:
                    self._n["callback_errors"] += 1
                log.error(
                    "mqtt: %s failed (%s: %s); carrying on",
                    callback.__name__, type(exc).__name__, str(exc)[:200],
                )  # fmt: skip

        return run

    def start(self) -> Publisher:
        """Start connecting (in the background) and publishing. Returns self."""
        if self._pump_thread is not None:
            return self
        cfg = self.config
        log.info(
            "mqtt: broker %s:%d%s, prefix %s, protocol %s",
            cfg.host, cfg.broker_port, " (TLS)" if cfg.tls else "", self.prefix, cfg.protocol,
        )  # fmt: skip
        connect_kwargs: dict[str, Any] = {"keepalive": int(cfg.keepalive)}
        if self._v5:
            connect_kwargs["clean_start"] = True
        self._client.connect_async(cfg.host, cfg.broker_port, **connect_kwargs)
        self._client.loop_start()
        self._pump_thread = threading.Thread(
            target=self._pump, name=f"inspector-mqtt-{cfg.station}", daemon=True
        )
        self._pump_thread.start()
        return self

    # -- what the station calls ------------------------------------------------------
    @property
    def connected(self) -> bool:
        """The broker accepted us, the connection is up and paho's network thread runs."""
        with self._lock:
            up = self._connected
        return up and self._network_alive()

    def _network_alive(self) -> bool:
        thread = getattr(self._client, "_thread", None)
        return thread is None or thread.is_alive()

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

    def next_trigger(self, timeout: float | None = None) -> Trigger | None:
        """The oldest waiting trigger, or None after ``timeout`` seconds.

        :param timeout: seconds to wait (None: forever, 0: do not wait).
        """
        try:
            return (
                self.triggers.get(timeout=timeout) if timeout != 0 else self.triggers.get_nowait()
            )
        except queue.Empty:
            return None

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

    def update_status(self, counts: Mapping[str, Any] | None = None) -> None:
        """Publish the retained status now, with the station's counters.

        :param counts: e.g. ``{"parts": 120, "ok": 110, "defect": 9, "errors": 1}``;
            kept and repeated in later status messages.
        """
        if counts is not None:
            with self._lock:
                self._counts = dict(counts)
        self._publish_status()

    def status(self) -> LinkStatus:
        """A snapshot for the status line and the metrics."""
        depth = self.outbox.depth()
        dead = self.outbox.dead_letter_count()
        alive = self._network_alive()
        with self._lock:
            return LinkStatus(
                connected=self._connected and alive,
                outbox_depth=depth,
                outbox_full=depth >= self.outbox.limit,
                last_error=self.last_error,
                dead_letters=dead,
                **self._n,
            )

    def close(self, timeout: float = 5.0) -> None:
        """Publish status ``offline`` (retained), disconnect cleanly, stop the threads.

        Unacknowledged results stay in the outbox for the next start. Call
        :meth:`flush` first to wait for them. Idempotent; never raises.

        :param timeout: seconds to wait for the offline status to be acknowledged.
        """
        if self._closing:
            return
        self._closing = True
        try:
            if self.connected:
                info = self._publish_status("offline", "closed")
                if info is not None:
                    info.wait_for_publish(timeout)
        except Exception as exc:  # the broker may vanish at any moment
            log.warning("mqtt: offline status not delivered: %s", exc)
        try:
            self._client.disconnect()
            self._client.loop_stop()
        except Exception as exc:
            log.warning("mqtt: disconnect: %s", exc)
        with self._cond:
            self._connected = False
            self._stopping = True
            self._cond.notify_all()
        if self._pump_thread is not None:
            # The pump applies the acknowledgements that arrived before the disconnect.
            self._pump_thread.join(timeout)

    def __enter__(self) -> Publisher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- errors ----------------------------------------------------------------------
    def _error(self, message: str) -> None:
        with self._lock:
            self.last_error = message
            self._n["errors"] += 1
        log.error("mqtt: %s", message)

    def _where(self) -> str:
        return f"{self.config.host}:{self.config.broker_port}"

    def _connect_failed(self, exc: OSError) -> None:
        if isinstance(exc, ssl.SSLError):
            self._error(f"TLS with broker {self._where()} failed: {exc}; retrying")
        elif isinstance(exc, ConnectionRefusedError):
            self._error(f"cannot connect to broker {self._where()}: connection refused; retrying")
        else:
            self._error(f"cannot connect to broker {self._where()}: {exc}; retrying")

    # -- paho callbacks (paho's network thread) --------------------------------------
    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            self._error(
                f"broker {self._where()} refused the connection: {reason} "
                f"(check username, password and the broker's ACL); retrying"
            )
            return
        cap = getattr(props, "MaximumPacketSize", None) if props is not None else None
        self._broker_max_packet = int(cap) if isinstance(cap, int) and cap > 0 else None
        with self._publish_lock:
            # paho would re-send its in-memory copies after this callback; the outbox
            # re-sends instead, from the oldest unacknowledged row, so order holds.
            client.drop_out_messages()
            with self._cond:
                self._connected = True
                self._session += 1
                self._cursor = 0
                self._inflight.clear()
                self._early.clear()
                self._status_mids.clear()
                self._ignore.clear()
                self._retry_at = 0.0
                self._dirty = True
                self.last_error = None
                self._n["connects"] += 1
                self._cond.notify_all()
        log.info("mqtt: connected to %s (%s)", self._where(), self.prefix)
        if self.config.triggers:
            _, self._trigger_mid = client.subscribe(self.trigger_topic, qos=1)
        self._publish_status()

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, reasons: Any, props: Any) -> None:
        if mid != self._trigger_mid:
            return
        if any(r.is_failure for r in reasons):
            self._error(f"broker refused the subscription to {self.trigger_topic}: {reasons[0]}")
            return
        self.trigger_subscribed.set()
        log.info("mqtt: listening for triggers on %s", self.trigger_topic)

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        with self._cond:
            was = self._connected
            self._connected = False
            self._session += 1
            self._inflight.clear()
            self._early.clear()
            self._status_mids.clear()
            self._ignore.clear()
            self._cond.notify_all()
        if was and not self._closing:
            self._error(f"lost the broker {self._where()}: {reason}; reconnecting")

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

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        if msg.topic != self.trigger_topic:
            return
        try:
            trig = parse_trigger(msg.payload)
        except Exception as exc:  # ValueError, and anything a hostile payload finds
            with self._lock:
                self._n["bad_triggers"] += 1
            log.warning("mqtt: ignored a trigger on %s: %s", msg.topic, str(exc)[:200])
            return
        try:
            self.triggers.put_nowait(trig)
        except queue.Full:
            with self._lock:
                self._n["bad_triggers"] += 1
            log.error("mqtt: trigger queue full (%d); dropped a trigger", self.triggers.maxsize)
            return
        with self._lock:
            self._n["triggers"] += 1

    # -- status ----------------------------------------------------------------------
    def _status_payload(self, state: str, reason: str | None = None) -> str:
        doc: dict[str, Any] = {
            "schema": STATUS_SCHEMA,
            "station": self.config.station,
            "state": state,
            "at": iso_utc(time.time()),
        }
        if reason:
            doc["reason"] = reason
        if state != "offline" or reason == "closed":
            depth = self.outbox.depth()
            doc["outbox_depth"] = depth
            doc["outbox_limit"] = self.outbox.limit
            doc["counts"] = dict(self._counts)
        return json.dumps(doc, separators=(",", ":"))

    def _publish_status(self, state: str | None = None, reason: str | None = None) -> Any:
        if state is None:
            state = "outbox_full" if self.outbox.full else "online"
        try:
            info = self._client.publish(
                self.status_topic, self._status_payload(state, reason), qos=1, retain=True
            )
        except Exception as exc:
            log.warning("mqtt: status not published: %s", exc)
            return None
        with self._lock:
            if info.mid in self._early:
                self._early.pop(info.mid)
            else:
                self._status_mids.add(info.mid)
        return info

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
