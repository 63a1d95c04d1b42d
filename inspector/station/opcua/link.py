"""What the station loop holds: the OPC UA server and its handshake, as one object."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from inspector.station.opcua.handshake import Handshake, PendingResults, PlcResult
from inspector.station.opcua.settings import OpcuaSection

log = logging.getLogger(__name__)


class OpcuaLink:
    """The station's side of OPC UA.

    :param section: the validated ``opcua:`` settings.
    :param station_id: the station's id (names the namespace).
    :param outbox_path: the outbox's SQLite file; unacknowledged PLC results live there.
    """

    def __init__(self, section: OpcuaSection, station_id: str, outbox_path: str | Path) -> None:
        from inspector.station.opcua.server import OpcuaServer, import_asyncua

        import_asyncua()  # a missing extra says what to install before anything opens

        self.section = section
        self._said_full = False
        self.pending = PendingResults(outbox_path, section.buffer)
        self.handshake = Handshake(self.pending)
        self.server = OpcuaServer(
            self.handshake, endpoint=section.endpoint, station_id=station_id,
            users=section.passwords(), certificate=section.certificate,
            private_key=section.private_key, secure_only=section.secure_only,
        )  # fmt: skip

    @classmethod
    def from_config(cls, config: Any) -> OpcuaLink:
        """The link a validated ``StationConfig`` asks for (its ``opcua`` and outbox)."""
        return cls(config.opcua, config.station_id, config.outbox.path)

    def start(self) -> None:
        """Serve; the PLC may trigger from now on. :raises StationError: cannot serve."""
        self.server.start()
        self.handshake.set_running(True)
        restored = len(self.pending)
        if restored:
            log.warning("OPC UA: %d result(s) not yet acknowledged by the PLC shown again",
                        restored)  # fmt: skip

    def check_room(self, say: Callable[[str], None]) -> bool:
        """False while the PLC's result buffer is full; ``say`` when that changes."""
        full = self.handshake.full
        if full != self._said_full:
            self._said_full = full
            say("PLC BUFFER FULL: not taking parts until the PLC acknowledges results"
                if full else "PLC acknowledged: taking parts")  # fmt: skip
        return not full

    def next_trigger(self, timeout: float) -> Any:
        """The next PLC trigger as the station's ``Trigger``, or None after ``timeout``."""
        from inspector.station.mqtt import Trigger

        t = self.handshake.next_trigger(timeout)
        if t is None:
            return None
        return Trigger(part_id=t.part_id, correlation_id=t.correlation_id,
                       received_at=t.received_at)  # fmt: skip

    def wake(self) -> None:
        """Make a :meth:`next_trigger` waiting now return None (the station is stopping)."""
        self.handshake.wake()

    def deliver(self, result: Mapping[str, Any]) -> PlcResult:
        """Show a committed result to the PLC. :raises StationError: not committed."""
        return self.handshake.deliver(result)

    def show(self, result: Mapping[str, Any], metrics: Any = None) -> bool:
        """:meth:`deliver`, logging and counting (``metrics.error("opcua")``) a failure.

        :returns: False when the result could not be shown (the station must stop).
        """
        try:
            self.deliver(result)
        except Exception as exc:
            if metrics is not None:
                metrics.error("opcua")
            log.error("result %s not shown to the PLC: %s; stopping", result.get("id"), exc)
            return False
        return True

    def close(self) -> None:
        """Refuse triggers, stop serving, close the buffer (idempotent)."""
        self.handshake.set_running(False)
        self.server.stop()
        self.pending.close()
