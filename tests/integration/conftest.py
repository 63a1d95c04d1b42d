"""Fixtures of the integration tests: a real mosquitto on a free loopback port, and more.

``mosquitto`` is a factory fixture: ``mosquitto()`` gives an anonymous broker,
``mosquitto(users={"station": "pw"}, acl="...")`` one with a password file and
an ACL, ``mosquitto(tls=make_tls_files(folder))`` a TLS listener that requires a
client certificate, ``persistence=True`` one that keeps sessions across a graceful
restart. Every broker it started is killed at teardown. ``Broker.stop()`` /
``Broker.start()`` restart it on the same port. ``collector(broker, topic)`` is an
independent paho subscriber; ``proxy(port)`` a relay that can cut or blackhole the
link. The helpers live in ``_mqtt_harness.py``.

The broker tests skip (with the install command) when mosquitto is not installed;
``make test`` installs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration._mqtt_harness import (
    Broker,
    Collector,
    TcpProxy,
    mosquitto_binary,
    sample_result,
)


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Factory of started brokers (see :class:`Broker`); all are stopped at teardown."""
    binary = mosquitto_binary()
    if binary is None:
        pytest.skip("mosquitto is not installed: apt-get install mosquitto (make test does)")
    started: list[Broker] = []

    def make(**kwargs: Any) -> Broker:
        b = Broker(binary, tmp_path / f"broker{len(started)}", **kwargs)
        started.append(b)
        return b.start()

    yield make
    for b in started:
        b.stop(kill=True)


@pytest.fixture
def broker(mosquitto: Callable[..., Broker]) -> Broker:
    """An anonymous broker on a free loopback port."""
    return mosquitto()


@pytest.fixture
def collector() -> Iterator[Callable[..., Collector]]:
    """Factory of :class:`Collector` subscribers; all are closed at teardown."""
    made: list[Collector] = []

    def make(broker: Broker, topic: str, **kwargs: Any) -> Collector:
        c = Collector(broker, topic, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def make_result() -> Callable[..., Any]:
    """``make_result(i, station="line1", **kwargs)``: see :func:`sample_result`."""
    return sample_result


@pytest.fixture
def proxy() -> Iterator[Callable[[int], TcpProxy]]:
    """Factory of :class:`TcpProxy` relays; all are closed at teardown."""
    made: list[TcpProxy] = []

    def make(target_port: int) -> TcpProxy:
        p = TcpProxy(target_port)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture(scope="session")
def station_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real exported ``.onnx`` policy (trained 256 steps), built once per session."""
    from tests.integration._station_model import build_station_model

    return build_station_model(tmp_path_factory.getbasetemp() / "station-model")
