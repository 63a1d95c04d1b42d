"""``opcua:`` in a station config: the OPC UA server and its PLC handshake."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlparse

from inspector.station.netaddr import is_loopback


@dataclass
class OpcuaUser:
    """One user a PLC or client logs in as.

    :param name: the user name.
    :param password_env: the environment variable that holds the password (preferred:
        keeps the secret out of the YAML).
    :param password: the password itself.
    """

    name: str = ""
    password_env: str | None = None
    password: str | None = None

    def secret(self) -> str:
        """The password. :raises ValueError: none configured, or the variable is unset."""
        if self.password_env:
            value = os.environ.get(self.password_env)
            if not value:
                raise ValueError(
                    f"opcua.users[{self.name}]: environment variable {self.password_env} is not set"
                )
            return value
        if not self.password:
            raise ValueError(f"opcua.users[{self.name}]: give password_env (or password)")
        return self.password


@dataclass
class OpcuaSection:
    """The station's OPC UA server (needs ``pip install 'inspector[opcua]'``).

    :param enabled: serve the station over OPC UA (results are also shown to the PLC and
        must be acknowledged; see docs/opcua.md).
    :param endpoint: ``opc.tcp://HOST:PORT/PATH``; a host other than loopback needs users.
    :param buffer: results shown to the PLC and not yet acknowledged, at most; when full
        the station stops taking parts (TriggerEnable false) until the PLC acknowledges.
    :param users: user names and passwords; once one is given anonymous access is off.
    :param certificate: the server's certificate (DER or PEM) for Basic256Sha256
        Sign&Encrypt.
    :param private_key: its private key (PEM).
    :param secure_only: offer only the encrypted endpoint (needs certificate and key).
    """

    enabled: bool = False
    endpoint: str = "opc.tcp://127.0.0.1:4840/inspector"
    buffer: int = 8
    users: list[OpcuaUser] = field(default_factory=list)
    certificate: str | None = None
    private_key: str | None = None
    secure_only: bool = False

    def validate(self) -> None:
        """:raises ValueError: a bad endpoint, buffer, user list or certificate pair."""
        if not self.enabled:
            return
        url = urlparse(self.endpoint)
        if url.scheme != "opc.tcp" or not url.hostname or not url.port:
            raise ValueError(
                f"opcua.endpoint must look like opc.tcp://127.0.0.1:4840/inspector, "
                f"got {self.endpoint!r}"
            )
        if not 1 <= int(self.buffer) <= 1000:
            raise ValueError(f"opcua.buffer must be 1..1000, got {self.buffer}")
        names = [u.name for u in self.users]
        if any(not n for n in names) or len(set(names)) != len(names):
            raise ValueError("opcua.users: every user needs a distinct, non-empty name")
        for user in self.users:
            user.secret()
        if bool(self.certificate) != bool(self.private_key):
            raise ValueError("opcua: certificate and private_key go together")
        if self.secure_only and not self.certificate:
            raise ValueError("opcua.secure_only needs certificate and private_key")
        if not is_loopback(url.hostname) and not self.users:
            raise ValueError(
                f"opcua.endpoint {url.hostname} is reachable from other machines: configure "
                "opcua.users (and preferably certificate/private_key), or serve on 127.0.0.1"
            )

    def passwords(self) -> dict[str, str]:
        """User name -> password (after :meth:`validate`)."""
        return {u.name: u.secret() for u in self.users}
