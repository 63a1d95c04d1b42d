"""The MQTT test harness: mosquitto on a free loopback port, a subscriber, a relay, certificates.

The fixtures in ``tests/integration/conftest.py`` wrap these; tests import the
helpers (``wait_until``, ``make_tls_files``, ``free_port``) from here.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"


def mosquitto_binary() -> str | None:
    """Path of the mosquitto broker, or None."""
    found = shutil.which("mosquitto")
    if found:
        return found
    return "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_until(pred: Callable[[], Any], timeout: float, what: str, step: float = 0.02) -> Any:
    """Poll ``pred`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


@dataclass
class TlsFiles:
    """A test CA, a server certificate for 127.0.0.1/localhost, and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_tls_files(folder: Path, name: str = "test") -> TlsFiles:
    """Generate a CA and server/client certificates with ``cryptography`` (EC P-256)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def write_key(k: ec.EllipticCurvePrivateKey, path: Path) -> Path:
        path.write_bytes(
            k.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return path

    def write_cert(c: x509.Certificate, path: Path) -> Path:
        path.write_bytes(c.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        k = key()
        b = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_name)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if server:
            b = b.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
                ),
                critical=False,
            )
        return b.sign(ca_key, hashes.SHA256()), k

    server, server_key = leaf("localhost", True)
    client, client_key = leaf("inspector-station", False)
    return TlsFiles(
        ca=write_cert(ca, folder / "ca.crt"),
        server_cert=write_cert(server, folder / "server.crt"),
        server_key=write_key(server_key, folder / "server.key"),
        client_cert=write_cert(client, folder / "client.crt"),
        client_key=write_key(client_key, folder / "client.key"),
    )


class Broker:
    """One mosquitto process with a config written for it.

    :param binary: the mosquitto executable.
    :param folder: where the config, password file, log and persistence live.
    :param users: user -> password (a password file; anonymous access off).
    :param acl: the ACL file's text (with ``users``).
    :param tls: certificates for a TLS listener that requires a client certificate.
    :param persistence: keep sessions and queued messages across a graceful restart.
    :param extra: more mosquitto.conf lines (``max_packet_size 2048``).
    """

    def __init__(
        self,
        binary: str,
        folder: Path,
        *,
        users: dict[str, str] | None = None,
        acl: str | None = None,
        tls: TlsFiles | None = None,
        persistence: bool = False,
        extra: list[str] | None = None,
    ) -> None:
        self.binary = binary
        self.folder = folder
        self.port = free_port()
        self.host = HOST
        self.tls = tls
        self.proc: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / "mosquitto.log"
        lines = [f"listener {self.port} {HOST}", "log_dest stdout", "log_type all"]
        if os.geteuid() == 0:
            # mosquitto drops root for the 'mosquitto' user, which could not read our files.
            lines.append("user root")
        if users:
            pw = folder / "passwd"
            for i, (user, password) in enumerate(users.items()):
                flags = ["-b", "-c"] if i == 0 else ["-b"]
                subprocess.run(
                    ["mosquitto_passwd", *flags, str(pw), user, password],
                    check=True,
                    capture_output=True,
                )
            lines += ["allow_anonymous false", f"password_file {pw}"]
        else:
            lines.append("allow_anonymous true")
        if acl is not None:
            acl_path = folder / "acl"
            acl_path.write_text(acl)
            lines.append(f"acl_file {acl_path}")
        if tls is not None:
            lines += [
                f"cafile {tls.ca}",
                f"certfile {tls.server_cert}",
                f"keyfile {tls.server_key}",
                "require_certificate true",
            ]
        if persistence:
            # Saved only at a graceful exit (SIGTERM), which is what the restart test uses.
            lines += [
                "persistence true",
                f"persistence_location {folder}/",
                "persistence_file mosquitto.db",
                "autosave_interval 0",
                "max_queued_messages 100000",
            ]
        else:
            lines.append("persistence false")
        lines += list(extra or [])
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 10.0) -> Broker:
        """Start mosquitto and wait until its port accepts connections."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        logf = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.conf)], stdout=logf, stderr=subprocess.STDOUT
        )
        logf.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"mosquitto exited with {self.proc.returncode}:\n{self.log_path.read_text()}"
                )
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mosquitto did not listen on {self.port}:\n{self.log_path.read_text()}"
                    ) from None
                time.sleep(0.02)

    def stop(self, kill: bool = False) -> None:
        """Stop the broker: SIGTERM (graceful, saves persistence) or SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    @property
    def running(self) -> bool:
        """The process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        """What mosquitto wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Collector:
    """An independent paho subscriber that records everything under a topic filter.

    :param broker: the broker to use.
    :param topic: topic filter to subscribe (QoS 1).
    :param username: credentials, when the broker wants them.
    :param password: password.
    :param tls: certificates for a TLS broker.
    :param persistent: a persistent session (clean_session false) that survives restarts.
    """

    def __init__(
        self,
        broker: Broker,
        topic: str,
        *,
        username: str | None = None,
        password: str | None = None,
        tls: TlsFiles | None = None,
        persistent: bool = False,
        client_id: str | None = None,
    ) -> None:
        import paho.mqtt.client as mqtt

        self.topic = topic
        self.messages: list[tuple[str, bytes, bool]] = []
        self._lock = threading.Lock()
        self.subscribed = threading.Event()
        self.client = mqtt.Client(
            callback_api_version=mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id or f"collector-{os.getpid()}-{id(self)}",
            clean_session=not persistent,
            protocol=mqtt.MQTTv311,
        )
        self.client.reconnect_delay_set(0.05, 0.5)
        if username is not None:
            self.client.username_pw_set(username, password)
        if tls is not None:
            self.client.tls_set(
                ca_certs=str(tls.ca),
                certfile=str(tls.client_cert),
                keyfile=str(tls.client_key),
                cert_reqs=ssl.CERT_REQUIRED,
            )
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.client.connect_async(broker.host, broker.port, keepalive=10)
        self.client.loop_start()
        wait_until(self.subscribed.is_set, 10, "the collector's subscription")

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if not reason.is_failure:
            client.subscribe(self.topic, qos=1)

    def _on_subscribe(self, client: Any, userdata: Any, mid: Any, reasons: Any, props: Any) -> None:
        self.subscribed.set()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._lock:
            self.messages.append((msg.topic, bytes(msg.payload), bool(msg.retain)))

    def payloads(self, topic: str) -> list[bytes]:
        """Payloads received on ``topic``, in arrival order."""
        with self._lock:
            return [p for t, p, _ in self.messages if t == topic]

    def documents(self, topic: str) -> list[dict]:
        """JSON documents received on ``topic``, in arrival order."""
        return [json.loads(p) for p in self.payloads(topic)]

    def close(self) -> None:
        """Disconnect."""
        self.client.disconnect()
        self.client.loop_stop()


def sample_result(i: int, station: str = "line1", **kwargs: Any) -> Any:
    """A plausible decided Result for part ``i`` (defect every 7th part)."""
    from inspector.station.result import Result

    classes = ["ok", "crack", "blowhole"]
    defect = i % 7 == 3
    probs = [0.1, 0.85, 0.05] if defect else [0.9, 0.06, 0.04]
    return Result.decided(
        station=station,
        part_id=kwargs.pop("part_id", f"part-{i:05d}"),
        classes=classes,
        probabilities=probs,
        label="crack" if defect else "ok",
        glimpse_path=[(0.5, 0.5, 0), (0.25, 0.75, 1), (0.3, 0.7, 2)],
        steps=3,
        captured_at=1.7e9 + i,
        decided_at=1.7e9 + i + 0.004,
        latency_ms=4.0,
        model_sha256="ab" * 32,
        profile_name="magnetic-tile",
        profile_sha256="cd" * 32,
        **kwargs,
    )


class TcpProxy:
    """A loopback TCP relay in front of a broker, to cut and blackhole the network.

    ``freeze(up=..., down=...)`` silently drops bytes in one or both directions (as a
    dead link does), ``cut()`` closes every relayed connection, ``thaw()`` relays again.

    :param target_port: the broker's port on 127.0.0.1.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((HOST, 0))
        self._server.listen(16)
        self.host = HOST
        self.port = int(self._server.getsockname()[1])
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self.drop_up = False  # client -> broker
        self.drop_down = False  # broker -> client
        self.dropped = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((HOST, self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._relay, args=(client, upstream, True), daemon=True).start()
            threading.Thread(
                target=self._relay, args=(upstream, client, False), daemon=True
            ).start()

    def _relay(self, src: socket.socket, dst: socket.socket, up: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.drop_up if up else self.drop_down:
                    with self._lock:
                        self.dropped += len(data)
                    continue
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def freeze(self, up: bool = True, down: bool = True) -> None:
        """Drop bytes going up (to the broker) and/or down (to the client)."""
        self.drop_up, self.drop_down = up, down

    def thaw(self) -> None:
        """Relay everything again."""
        self.drop_up = self.drop_down = False

    def cut(self) -> None:
        """Close every relayed connection (both ends see the link die)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        """Stop accepting and cut everything."""
        self._closed = True
        self._server.close()
        self.cut()
