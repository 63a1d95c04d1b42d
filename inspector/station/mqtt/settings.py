"""Broker settings: :class:`MqttSettings` as a station's YAML names them, :class:`MqttConfig`
with the station id, and :class:`TlsConfig`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from inspector.errors import StationError

#: The protocol names a config may give, and paho's name for each.
PROTOCOLS = {"3.1.1": "MQTTv311", "311": "MQTTv311", "v311": "MQTTv311", "5": "MQTTv5",
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
    :param tcp_nodelay: send each MQTT packet at once (``TCP_NODELAY``). With Nagle's
        algorithm on, a result waits for the ACK of the station's previous packet (its
        PUBACK of the trigger), which the broker's kernel delays by up to 40 ms. The
        broker's own side wants ``set_tcp_nodelay true`` in mosquitto.conf (docs/mqtt.md).
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
    tcp_nodelay: bool = True


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
        if str(self.protocol) not in PROTOCOLS:
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
