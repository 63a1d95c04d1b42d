"""The station's OPC UA server (asyncua, in a thread of its own).

The information model follows the concepts of OPC 40100 (Machine Vision): one object
per station under ``Objects`` with its state, the handshake variables a PLC writes and
reads, the result being shown, counters, and two methods for PLCs that call methods
rather than write variables::

    Objects/InspectionStation            (namespace urn:inspector:station:<station id>)
      State              String    ready | busy | stopped
      TriggerEnable      Boolean   read  the station takes a trigger now
      Trigger            Boolean   write true to trigger; the station resets it on taking it
      TriggerPartId      String    write (optional) the part id, before Trigger
      TriggerCorrelationId String  write (optional) an id the result echoes
      Busy               Boolean   read  a part is being inspected
      ResultValid        Boolean   read  a result is shown and not yet acknowledged
      ResultAck          Boolean   write true once the shown result is read; reset on taking it
      Result/            Sequence (UInt64), ResultId, PartId, CorrelationId, Verdict
                         (ok | defect | failed), ClassName, Confidence, Timestamp,
                         ModelSha256, ProfileSha256, Glimpses, Error, ModelVersion,
                         ModelChannel (registry models; "" for a model file)
      Counters/          Triggers, TriggersRefused, ResultsAcknowledged, ResultsPending,
                         BufferSize, BufferFull, LastRefusal
      Methods            TriggerPart(PartId, CorrelationId) -> (Accepted, Reason)
                         AcknowledgeResult(Sequence) -> Accepted

Only the four PLC variables are writable. asyncua is imported inside :meth:`start`; the
package is the optional extra ``inspector[opcua]``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inspector.errors import MissingDependencyError, StationError
from inspector.station.opcua.handshake import Handshake

log = logging.getLogger(__name__)

#: (browse name, OPC UA type name, initial value) of the variables under ``Result``.
RESULT_VARIABLES = (
    ("Sequence", "UInt64", 0),
    ("ResultId", "String", ""),
    ("PartId", "String", ""),
    ("CorrelationId", "String", ""),
    ("Verdict", "String", ""),
    ("ClassName", "String", ""),
    ("Confidence", "Double", 0.0),
    ("Timestamp", "DateTime", None),
    ("ModelSha256", "String", ""),
    ("ProfileSha256", "String", ""),
    ("Glimpses", "UInt32", 0),
    ("Error", "String", ""),
    ("ModelVersion", "String", ""),
    ("ModelChannel", "String", ""),
)
COUNTER_VARIABLES = (
    ("Triggers", "UInt64", 0),
    ("TriggersRefused", "UInt64", 0),
    ("ResultsAcknowledged", "UInt64", 0),
    ("ResultsPending", "UInt32", 0),
    ("BufferSize", "UInt32", 0),
    ("BufferFull", "Boolean", False),
    ("LastRefusal", "String", ""),
)
#: Variables the PLC writes; everything else is read-only.
PLC_WRITES = ("Trigger", "TriggerPartId", "TriggerCorrelationId", "ResultAck")


def import_asyncua() -> Any:
    try:
        import asyncua
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            "the OPC UA server needs asyncua: pip install 'inspector[opcua]'"
        ) from exc
    return asyncua


class UserPasswords:
    """asyncua user manager: only the configured users, each with its password.

    :param users: user name -> password.
    :param on_refused: called with the user name of a refused login (for the log/metric).
    """

    def __init__(self, users: dict[str, str], on_refused: Callable[[str], None]) -> None:
        self.users = dict(users)
        self.on_refused = on_refused

    def get_user(self, iserver: Any, username: Any = None, password: Any = None,
                 certificate: Any = None) -> Any:  # fmt: skip
        import hmac

        from asyncua.crypto.permission_rules import User, UserRole

        expected = self.users.get(str(username)) if username is not None else None
        given = password if isinstance(password, str) else ""
        if expected is not None and hmac.compare_digest(expected.encode(), given.encode()):
            return User(role=UserRole.User, name=str(username))
        self.on_refused(str(username) if username else "(anonymous)")
        return None


class OpcuaServer:
    """Serve one station's :class:`Handshake` over OPC UA.

    :param handshake: the station's handshake (its ``on_change`` is set to this server's).
    :param endpoint: ``opc.tcp://HOST:PORT/path``.
    :param station_id: names the namespace.
    :param users: user name -> password; none: anonymous (loopback only, checked by the
        station config).
    :param certificate: server certificate (DER or PEM) for Basic256Sha256 Sign&Encrypt.
    :param private_key: its private key (PEM).
    :param secure_only: offer only Basic256Sha256 Sign&Encrypt (no unencrypted endpoint).
    """

    def __init__(
        self,
        handshake: Handshake,
        *,
        endpoint: str,
        station_id: str,
        users: dict[str, str] | None = None,
        certificate: str | Path | None = None,
        private_key: str | Path | None = None,
        secure_only: bool = False,
    ) -> None:
        self.handshake = handshake
        self.endpoint = endpoint
        self.station_id = station_id
        self.users = dict(users or {})
        self.certificate = certificate
        self.private_key = private_key
        self.secure_only = secure_only
        self.refused_logins = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._changed: asyncio.Event | None = None
        self._stop_event: asyncio.Event | None = None
        self._nodes: dict[str, Any] = {}
        self._server: Any = None
        handshake.on_change = self.notify

    # -- life cycle --------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> None:
        """Start serving; returns once the endpoint accepts connections.

        :raises StationError: the server could not start (port taken, bad certificate ...).
        """
        import_asyncua()
        self._thread = threading.Thread(target=self._run, name="opcua-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise StationError(f"OPC UA server at {self.endpoint} did not start in {timeout} s")
        if self._error is not None:
            raise StationError(f"OPC UA server at {self.endpoint}: {self._error}") from self._error

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported to start(); logged when it happens later
            if not self._ready.is_set():
                self._error = exc
                self._ready.set()
            else:
                log.error("OPC UA server stopped: %s", exc)
        finally:
            loop.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if self._stop_event is not None:
            loop.call_soon_threadsafe(self._stop_event.set)
        thread.join(timeout)
        self._thread = None

    def notify(self) -> None:
        """Something the PLC sees changed (any thread): re-publish the variables."""
        loop, ev = self._loop, self._changed
        if loop is not None and ev is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(ev.set)
            except RuntimeError:  # the loop closed between the check and the call
                pass

    # -- the address space -------------------------------------------------------------
    async def _serve(self) -> None:
        asyncua = import_asyncua()
        ua = asyncua.ua
        server = await self._make_server(asyncua)
        self._server = server
        await server.init()
        server.set_endpoint(self.endpoint)
        server.set_server_name(f"inspector station {self.station_id}")
        await server.set_application_uri(f"urn:inspector:station:{self.station_id}")
        await self._secure(server, ua)
        ns = await server.register_namespace(f"urn:inspector:station:{self.station_id}")
        await self._build(server, ns, ua)
        from asyncua.common.callback import CallbackType

        server.subscribe_server_callback(CallbackType.PostWrite, self._on_write)
        self._changed = asyncio.Event()
        self._stop_event = asyncio.Event()
        async with server:
            await self._publish()
            self._ready.set()
            log.info("OPC UA server at %s", self.endpoint)
            while not self._stop_event.is_set():
                try:
                    await asyncio.wait_for(self._changed.wait(), timeout=0.5)
                except asyncio.TimeoutError:
                    continue
                self._changed.clear()
                await self._publish()

    async def _make_server(self, asyncua: Any) -> Any:
        if not self.users:
            return asyncua.Server()

        def refused(name: str) -> None:
            self.refused_logins += 1
            log.error("OPC UA login refused for user %r (wrong user name or password)", name)

        return asyncua.Server(user_manager=UserPasswords(self.users, refused))

    async def _secure(self, server: Any, ua: Any) -> None:
        policies = []
        if self.certificate and self.private_key:
            await server.load_certificate(str(self.certificate))
            await server.load_private_key(str(self.private_key))
            policies.append(ua.SecurityPolicyType.Basic256Sha256_SignAndEncrypt)
        if not self.secure_only:
            policies.append(ua.SecurityPolicyType.NoSecurity)
        server.set_security_policy(policies)
        # Anonymous access is off as soon as one user is configured.
        tokens = [ua.UserNameIdentityToken] if self.users else [ua.AnonymousIdentityToken]
        server.set_identity_tokens(tokens)

    async def _build(self, server: Any, ns: int, ua: Any) -> None:
        station = await server.nodes.objects.add_object(ns, "InspectionStation")
        n = self._nodes
        n["State"] = await station.add_variable(ns, "State", "stopped")
        for name, value in (("TriggerEnable", False), ("Busy", False), ("ResultValid", False)):
            n[name] = await station.add_variable(ns, name, value)
        for name in ("Trigger", "ResultAck"):
            n[name] = await station.add_variable(ns, name, False)
        for name in ("TriggerPartId", "TriggerCorrelationId"):
            n[name] = await station.add_variable(ns, name, "")
        for name in PLC_WRITES:
            await n[name].set_writable(True)
        for folder, spec in (("Result", RESULT_VARIABLES), ("Counters", COUNTER_VARIABLES)):
            obj = await station.add_object(ns, folder)
            for name, vtype, value in spec:
                variant = getattr(ua.VariantType, vtype)
                if value is None:
                    value = datetime.fromtimestamp(0, tz=timezone.utc)
                n[name] = await obj.add_variable(ns, name, ua.Variant(value, variant))
        n["_types"] = {name: vtype for name, vtype, _ in RESULT_VARIABLES + COUNTER_VARIABLES}
        await station.add_method(
            ns, "TriggerPart", self._method_trigger,
            [ua.VariantType.String, ua.VariantType.String],
            [ua.VariantType.Boolean, ua.VariantType.String],
        )  # fmt: skip
        await station.add_method(
            ns, "AcknowledgeResult", self._method_ack,
            [ua.VariantType.UInt64], [ua.VariantType.Boolean],
        )  # fmt: skip
        self._ua = ua

    async def _write(self, name: str, value: Any, vtype: str | None = None) -> None:
        ua = self._ua
        node = self._nodes[name]
        if vtype is None:
            vtype = self._nodes["_types"].get(name)
        variant = ua.Variant(value, getattr(ua.VariantType, vtype)) if vtype else ua.Variant(value)
        await self._server.write_attribute_value(node.nodeid, ua.DataValue(variant))

    async def _publish(self) -> None:
        """Write the handshake's state: the result's fields before ResultValid."""
        snap = self.handshake.snapshot()
        head = snap["result"]
        if head is not None:
            fields = {
                "Sequence": head.seq, "ResultId": head.result_id, "PartId": head.part_id,
                "CorrelationId": head.correlation_id, "Verdict": head.verdict,
                "ClassName": head.label, "Confidence": head.confidence,
                "Timestamp": datetime.fromtimestamp(head.decided_at, tz=timezone.utc),
                "ModelSha256": head.model_sha256, "ProfileSha256": head.profile_sha256,
                "Glimpses": head.glimpses, "Error": head.error,
                "ModelVersion": head.model_version, "ModelChannel": head.model_channel,
            }  # fmt: skip
            for name, value in fields.items():
                await self._write(name, value)
        counters = {
            "Triggers": snap["triggers"], "TriggersRefused": snap["refused"],
            "ResultsAcknowledged": snap["acknowledged"], "ResultsPending": snap["pending"],
            "BufferSize": self.handshake.pending.capacity, "BufferFull": snap["buffer_full"],
            "LastRefusal": snap["last_refusal"],
        }  # fmt: skip
        for name, value in counters.items():
            await self._write(name, value)
        await self._write("ResultValid", snap["result_valid"], "Boolean")
        await self._write("Busy", snap["busy"], "Boolean")
        await self._write("State", snap["state"], "String")
        await self._write("TriggerEnable", snap["trigger_enable"], "Boolean")

    # -- what the PLC does -------------------------------------------------------------
    async def _on_write(self, event: Any, _dispatcher: Any) -> None:
        """PostWrite: a client wrote variables; act on Trigger and ResultAck."""
        try:
            written = {w.NodeId for w in event.request_params.NodesToWrite}
            by_id = {self._nodes[k].nodeid: k for k in PLC_WRITES}
            names = {by_id[i] for i in written if i in by_id}
            if "Trigger" in names and await self._read_bool("Trigger"):
                part = await self._nodes["TriggerPartId"].read_value()
                corr = await self._nodes["TriggerCorrelationId"].read_value()
                why = self.handshake.request(_text(part), _text(corr))
                if why:
                    log.warning("PLC trigger refused: %s", why)
                await self._write("Trigger", False, "Boolean")
            if "ResultAck" in names and await self._read_bool("ResultAck"):
                self.handshake.ack(None)
                await self._publish()  # the next result before ResultAck drops
                await self._write("ResultAck", False, "Boolean")
            else:
                await self._publish()
        except Exception:  # a client's write never takes the server down
            log.exception("OPC UA write handling failed")

    async def _read_bool(self, name: str) -> bool:
        return bool(await self._nodes[name].read_value())

    async def _method_trigger(self, _parent: Any, part_id: Any, correlation_id: Any) -> list:
        ua = self._ua
        why = self.handshake.request(_text(part_id), _text(correlation_id))
        await self._publish()
        return [ua.Variant(not why, ua.VariantType.Boolean), ua.Variant(why, ua.VariantType.String)]

    async def _method_ack(self, _parent: Any, seq: Any) -> list:
        ua = self._ua
        value = getattr(seq, "Value", seq)
        done = self.handshake.ack(int(value))
        await self._publish()
        return [ua.Variant(done, ua.VariantType.Boolean)]


def _text(value: Any) -> str | None:
    value = getattr(value, "Value", value)
    return value if isinstance(value, str) and value else None
