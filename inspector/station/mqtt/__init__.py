"""MQTT reporting: results from the outbox to the broker, status, and part triggers.

The package: :mod:`.settings` (broker settings), :mod:`.trigger` (part triggers),
:mod:`.delivery` (the outbox window: publish, PUBACK, dead letters, the pump) and
:mod:`.publisher` (the MQTT client, its callbacks, status, what the station calls).

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

from inspector.station.mqtt.delivery import ACK_BATCH, ACK_DELAY_S
from inspector.station.mqtt.publisher import STATUS_SCHEMA, LinkStatus, Publisher
from inspector.station.mqtt.settings import MqttConfig, MqttSettings, TlsConfig
from inspector.station.mqtt.trigger import MAX_TRIGGER_BYTES, MAX_TRIGGER_ID, Trigger, parse_trigger

__all__ = [
    "ACK_BATCH",
    "ACK_DELAY_S",
    "MAX_TRIGGER_BYTES",
    "MAX_TRIGGER_ID",
    "STATUS_SCHEMA",
    "LinkStatus",
    "MqttConfig",
    "MqttSettings",
    "Publisher",
    "TlsConfig",
    "Trigger",
    "parse_trigger",
]
