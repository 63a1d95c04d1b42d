"""The MQTT client of a station: connection, paho callbacks, the retained status, triggers
in, and what the station calls (:class:`Publisher`)."""

from __future__ import annotations

import json
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inspector.errors import MissingDependencyError, StationError
from inspector.station.mqtt.delivery import Delivery
from inspector.station.mqtt.settings import PROTOCOLS, MqttConfig
from inspector.station.mqtt.trigger import Trigger, parse_trigger
from inspector.station.outbox import Outbox
from inspector.station.result import iso_utc

log = logging.getLogger("inspector.station.mqtt")

#: Schema id of the status document.
STATUS_SCHEMA = "inspector.status/1"


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


def _no_delay(client: Any, userdata: Any, sock: Any) -> None:
    """Turn Nagle's algorithm off on a new connection (paho's ``on_socket_open``).

    Every MQTT packet paho writes is whole; holding one back until the previous one is
    acknowledged only adds the peer's delayed ACK (40 ms on Linux) to a result's trip.
    """
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (AttributeError, OSError) as exc:  # not a TCP socket: nothing to turn off
        log.debug("mqtt: TCP_NODELAY not set: %s", exc)


class Publisher(Delivery):
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
        super().__init__(config, outbox)
        self.prefix = config.topic_prefix
        self.result_topic = f"{self.prefix}/result"
        self.status_topic = f"{self.prefix}/status"
        self.trigger_topic = f"{self.prefix}/trigger"
        #: Triggers for the station, in arrival order (see :meth:`next_trigger`); None is a
        #: wake-up (:meth:`wake`), not a trigger.
        self.triggers: queue.Queue[Trigger | None] = queue.Queue(
            maxsize=max(1, config.trigger_queue)
        )
        #: Set while the broker has granted the trigger subscription (cleared on disconnect).
        self.trigger_subscribed = threading.Event()
        self._trigger_mid: int | None = None
        self._counts: dict[str, Any] = {}
        self._model: dict[str, Any] | None = None
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

        v5 = PROTOCOLS[str(cfg.protocol)] == "MQTTv5"
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
        if cfg.tcp_nodelay:
            client.on_socket_open = self._guarded(_no_delay)
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

    def next_trigger(self, timeout: float | None = None) -> Trigger | None:
        """The oldest waiting trigger, or None after ``timeout`` seconds or a :meth:`wake`.

        A trigger wakes the caller at once: ``timeout`` only bounds the wait.

        :param timeout: seconds to wait (None: forever, 0: do not wait).
        """
        try:
            return (
                self.triggers.get(timeout=timeout) if timeout != 0 else self.triggers.get_nowait()
            )
        except queue.Empty:
            return None

    def wake(self) -> None:
        """Make a :meth:`next_trigger` waiting now return None (the station is stopping)."""
        try:
            self.triggers.put_nowait(None)
        except queue.Full:
            pass  # next_trigger returns at once anyway

    def update_status(self, counts: Mapping[str, Any] | None = None) -> None:
        """Publish the retained status now, with the station's counters.

        :param counts: e.g. ``{"parts": 120, "ok": 110, "defect": 9, "errors": 1}``;
            kept and repeated in later status messages.
        """
        if counts is not None:
            with self._lock:
                self._counts = dict(counts)
        self._publish_status()

    def set_model(self, model: Mapping[str, Any] | None) -> None:
        """Name the model the station runs in the status messages from now on.

        :param model: like a result's ``model``: ``{"sha256": ...}``, with ``version``
            and ``channel`` for a registry model; None leaves it out.
        """
        with self._lock:
            self._model = dict(model) if model else None

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
            with self._lock:
                if self._model:
                    doc["model"] = dict(self._model)
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
