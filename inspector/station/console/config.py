"""``console:`` in a station YAML: the operator console's address, access and memory."""

from __future__ import annotations

import os
from dataclasses import dataclass

from inspector.errors import ConfigError
from inspector.station.netaddr import is_loopback as is_loopback  # part of this API

#: Environment variable read for the token when ``token_env`` is not set.
DEFAULT_TOKEN_ENV = "INSPECTOR_CONSOLE_TOKEN"


@dataclass
class ConsoleSection:
    """The operator console: a live web page of the station (see docs/console.md).

    :param enabled: serve the console.
    :param host: address it listens on. Loopback (the default) needs no token; any other
        address requires ``token`` or ``token_env``.
    :param port: TCP port (0: a free one, printed at start).
    :param token: the shared secret operators sign in with (prefer ``token_env``).
    :param token_env: the environment variable that holds the token (default
        ``INSPECTOR_CONSOLE_TOKEN`` when it is set).
    :param store: the footage store that operator feedback goes into (created); none:
        the page shows parts but takes no feedback.
    :param parts: recent parts the console keeps with their frames (memory: one frame each).
    :param review: parts the review queue keeps at most.
    :param low_confidence: a part whose confidence is below this joins the review queue.
    :param outbox_alarm: alarm when the outbox holds this fraction of its limit.
    """

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8090
    token: str | None = None
    token_env: str | None = None
    store: str | None = None
    parts: int = 60
    review: int = 40
    low_confidence: float = 0.6
    outbox_alarm: float = 0.8

    def validate(self) -> None:
        """:raises ValueError: a bad port, size or fraction, or an open address without a token."""
        if not 0 <= self.port < 65536:
            raise ValueError(f"console.port must be a TCP port or 0, got {self.port}")
        if self.parts < 1 or self.review < 0:
            raise ValueError("console.parts must be >= 1 and console.review >= 0")
        for name in ("low_confidence", "outbox_alarm"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"console.{name} must be 0..1, got {v}")
        if self.enabled and not is_loopback(self.host) and not (self.token or self.token_env):
            raise ValueError(
                f"console.host {self.host} is not a loopback address: set console.token_env "
                "(or console.token) so that operators must sign in"
            )

    def resolve_token(self) -> str | None:
        """The token operators must give, or None when none is configured.

        :raises ConfigError: ``token_env`` names a variable that is not set, or the token is
            too short, or an open address has no token.
        """
        token = self.token
        if self.token_env:
            token = os.environ.get(self.token_env)
            if not token:
                raise ConfigError(
                    f"console.token_env: environment variable {self.token_env} is not set"
                )
        elif token is None:
            token = os.environ.get(DEFAULT_TOKEN_ENV) or None
        if token is not None and len(token) < 8:
            raise ConfigError("console token: use at least 8 characters")
        if token is None and not is_loopback(self.host):
            raise ConfigError(f"console.host {self.host}: a token is required off loopback")
        return token
