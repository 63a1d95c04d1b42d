"""``StationConfig``: what ``inspector run --config STATION.yaml`` reads.

Every field's type hint says what the YAML may hold; :func:`load_station_config`
loads it with :func:`inspector.yamlio.dataclass_load.load_dataclass`, so a bad value is reported
as ``station.yaml:12:9: mqtt.port: expected int, got 'high'`` and an unknown key
lists the allowed ones. Command-line flags override after loading
(:func:`apply_overrides`). Relative paths are relative to the working directory.
``stations/example.yaml`` shows every key with a comment.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.errors import ConfigError, ModelError, StationError
from inspector.station.console.config import ConsoleSection
from inspector.station.mqtt import MqttConfig, MqttSettings
from inspector.station.netaddr import is_loopback
from inspector.station.opcua.settings import OpcuaSection
from inspector.station.rollout import is_ref, parse_ref
from inspector.station.shadow import ShadowSection

#: Trigger modes: every frame is a part, a message on ``<prefix>/trigger`` asks for one,
#: or a PLC triggers over OPC UA (docs/opcua.md).
TRIGGER_MODES = ("free-run", "mqtt", "opcua")
#: Backends ``model.backend`` may name (``auto``: from the file's suffix).
BACKENDS = ("auto", "onnxruntime", "onnxruntime-cpu", "tensorrt")
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


#: The longest station id (it names topics, the client id and every result).
MAX_STATION_ID = 128


def _bad_station_id(sid: str) -> bool:
    # Spaces, control characters (a newline would forge log lines and topic levels),
    # MQTT wildcards and separators are refused.
    return (
        not sid
        or len(sid) > MAX_STATION_ID
        or any(c in sid for c in "+#/")
        or any(c.isspace() or not c.isprintable() for c in sid)
    )


@dataclass
class CameraSection:
    """The camera.

    :param driver: a registered camera driver name (``synthetic``, ``folder``, ``video``,
        ``opencv``, or a plugin's).
    :param params: the driver's parameters (``inspector camera list`` shows them); values
        are converted with the driver's type hints, like ``--param KEY=VALUE``.
    :param timeout_s: a frame that takes longer than this is a camera timeout: the part
        gets an error result and the station keeps waiting.
    :param reopen_on_end: reopen the camera when its source ends (a live camera that gave
        up); when false the station stops cleanly at the end of a finite source.
    :param reopen_delay_s: wait between attempts to reopen a failed camera.
    """

    driver: str = "synthetic"
    params: dict[str, Any] | None = None
    timeout_s: float = 5.0
    reopen_on_end: bool = False
    reopen_delay_s: float = 1.0

    def validate(self) -> None:
        """:raises ValueError: an empty driver name or a non-positive timeout."""
        if not self.driver:
            raise ValueError("camera.driver: a driver name is required")
        if self.params is None:
            self.params = {}
        if not isinstance(self.params, dict):
            raise ValueError("camera.params: expected a mapping of driver parameters")
        if self.timeout_s <= 0:
            raise ValueError(f"camera.timeout_s must be > 0, got {self.timeout_s}")
        if self.reopen_delay_s < 0:
            raise ValueError(f"camera.reopen_delay_s must be >= 0, got {self.reopen_delay_s}")


@dataclass
class ModelSection:
    """The exported policy.

    :param path: the ``.onnx`` (ONNX Runtime) or ``.engine``/``.plan`` (TensorRT) file, or
        ``registry:LINE@stable|canary|shadow|v0003``: a registry version, followed part by
        part (docs/station.md, "Models from the registry"). ``.zip`` runs are refused.
    :param backend: ``auto`` (from the file), ``onnxruntime`` (TensorRT/CUDA execution
        providers when present, else CPU), ``onnxruntime-cpu`` or ``tensorrt``.
    :param threads: intra-op threads of ONNX Runtime (0: its default).
    :param registry: the registry folder ``registry:`` paths name (read only).
    :param stop_on_defect: end a part's search as soon as the verdict at the model's
        operating point is a defect, whatever the move head says (fewer glimpses on
        defective parts; :func:`inspector.policy.agent.run_episode`).
    """

    path: str = ""
    backend: str = "auto"
    threads: int = 1
    registry: str = "registry"
    stop_on_defect: bool = False

    def validate(self) -> None:
        """:raises ValueError: no path, an unknown backend, or one that does not fit the file."""
        if not self.path:
            raise ValueError("model.path: the exported model file is required")
        if self.backend not in BACKENDS:
            raise ValueError(
                f"model.backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}"
            )
        if self.threads < 0:
            raise ValueError(f"model.threads must be >= 0, got {self.threads}")
        if is_ref(self.path):
            parse_ref(self.path)  # ValueError: one line naming the accepted forms
            if self.backend == "tensorrt":
                raise ValueError(
                    f"model.backend tensorrt cannot run {self.path}: registry versions are "
                    "ONNX files (backend auto, onnxruntime or onnxruntime-cpu)"
                )
            if not self.registry:
                raise ValueError(f"model.registry: the registry folder {self.path} names")
            return  # the registry folder may be mounted later: the station checks it
        suffix = Path(self.path).suffix.lower()
        if self.backend == "tensorrt" and suffix not in (".engine", ".plan"):
            raise ValueError(
                f"model.backend tensorrt needs a .engine or .plan file, got {self.path}"
            )
        if self.backend.startswith("onnxruntime") and suffix in (".engine", ".plan"):
            raise ValueError(f"model.backend {self.backend} needs a .onnx file, got {self.path}")


@dataclass
class TriggerSection:
    """When a part is inspected.

    :param mode: ``free-run`` (every camera frame is a part), ``mqtt`` (inspect the next
        camera frame when a message arrives on ``<prefix>/trigger``; the result echoes its
        ``part_id`` and ``correlation_id``) or ``opcua`` (a PLC triggers through the OPC UA
        handshake; needs ``opcua.enabled``).
    """

    mode: str = "free-run"

    def validate(self) -> None:
        """:raises ValueError: an unknown mode."""
        if self.mode not in TRIGGER_MODES:
            raise ValueError(
                f"trigger.mode must be one of {', '.join(TRIGGER_MODES)}, got {self.mode!r}"
            )


@dataclass(frozen=True)
class MqttSection(MqttSettings):
    """The broker (see docs/mqtt.md for topics and payloads): the :class:`MqttSettings`
    fields, and whether to publish at all.

    :param enabled: publish results; false (or ``--no-mqtt``) keeps them in the outbox.
    """

    enabled: bool = True

    def validate(self) -> None:
        """:raises ValueError: what :meth:`MqttConfig.check` finds (files, ports, protocol)."""
        if not self.enabled:
            return
        try:
            self.to_mqtt("station").check()
        except StationError as exc:
            raise ValueError(str(exc)) from None

    def to_mqtt(self, station: str, triggers: bool = False) -> MqttConfig:
        """The :class:`MqttConfig` for ``station``.

        :param station: the station id.
        :param triggers: subscribe to ``<prefix>/trigger``.
        """
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(MqttSettings)}
        shared.update(
            keepalive=int(self.keepalive),
            protocol=str(self.protocol),
            window=int(self.window),
            reconnect_min_delay=float(self.reconnect_min_delay),
            reconnect_max_delay=float(self.reconnect_max_delay),
            max_payload=int(self.max_payload),
            tcp_nodelay=bool(self.tcp_nodelay),
        )
        return MqttConfig(station=station, triggers=triggers, **shared)


@dataclass
class OutboxSection:
    """The durable outbox (SQLite, WAL): results wait here for their PUBACK.

    :param path: the SQLite file (one station process per file).
    :param limit: unacknowledged results at which the station stops taking parts
        (loudly: status ``outbox_full``, log, metric) rather than drop any.
    :param synchronous: ``FULL`` (survives power loss) or ``NORMAL`` (process death only).
    :param flush_timeout_s: at shutdown, wait this long for the broker to take what is left
        (the rest stays in the outbox for the next start).
    :param commit_timeout_s: commits may fail (disk full, I/O error) this long before the
        station stops and exits non-zero, naming every result it could not keep; no part
        is taken while they fail.
    """

    path: str = "var/outbox.sqlite"
    limit: int = 50_000
    synchronous: str = "FULL"
    flush_timeout_s: float = 10.0
    commit_timeout_s: float = 30.0

    def validate(self) -> None:
        """:raises ValueError: an empty path, a limit below 1, a bad synchronous mode."""
        if not self.path:
            raise ValueError("outbox.path is required")
        if self.limit < 1:
            raise ValueError(f"outbox.limit must be at least 1, got {self.limit}")
        if str(self.synchronous).upper() not in ("FULL", "NORMAL"):
            raise ValueError(f"outbox.synchronous must be FULL or NORMAL, got {self.synchronous!r}")
        if self.flush_timeout_s < 0:
            raise ValueError(f"outbox.flush_timeout_s must be >= 0, got {self.flush_timeout_s}")
        if not self.commit_timeout_s >= 0:
            raise ValueError(f"outbox.commit_timeout_s must be >= 0, got {self.commit_timeout_s}")


@dataclass
class KeepSection:
    """Which frames the footage store keeps (every defect verdict is always kept).

    :param low_confidence_below: keep every part whose confidence is below this (0..1).
    :param ok_one_in: keep one ok part in this many (1: all, 0: none).
    :param errors: keep the frames of parts that got an error result.
    """

    low_confidence_below: float = 0.6
    ok_one_in: int = 10
    errors: bool = True

    def validate(self) -> None:
        """:raises ValueError: a threshold outside 0..1 or a negative sampling rate."""
        if not 0.0 <= self.low_confidence_below <= 1.0:
            raise ValueError(
                f"footage.keep.low_confidence_below must be 0..1, got {self.low_confidence_below}"
            )
        if self.ok_one_in < 0:
            raise ValueError(f"footage.keep.ok_one_in must be >= 0, got {self.ok_one_in}")


@dataclass
class FootageSection:
    """The footage store: frames worth retraining on, with their Result JSON.

    :param path: the station's footage folder; none turns recording off.
    :param keep: what to keep (see ``KeepSection``).
    :param max_size_mb: size limit; over it the oldest ok frames go first.
    :param queue_frames: frames waiting for the background writer before the station
        waits for the disk (frames are never dropped; a SIGKILL loses at most these).
    """

    path: str | None = None
    keep: KeepSection = field(default_factory=KeepSection)
    max_size_mb: float = 2048.0
    queue_frames: int = 32

    def validate(self) -> None:
        """:raises ValueError: a non-positive size limit or queue."""
        if self.max_size_mb <= 0:
            raise ValueError(f"footage.max_size_mb must be > 0, got {self.max_size_mb}")
        if self.queue_frames < 1:
            raise ValueError(f"footage.queue_frames must be >= 1, got {self.queue_frames}")


@dataclass
class StationConfig:
    """One inspection station.

    :param station_id: the station's id: names its topics, client id and results
        (no ``+``, ``#`` or ``/``).
    :param camera: the camera driver and its parameters.
    :param model: the exported policy and its backend.
    :param profile: the reward profile the model was trained with (optional): its classes,
        step budget and scan settings must match the model's metadata.
    :param trigger: ``free-run`` or ``mqtt`` triggers.
    :param mqtt: the broker; ``enabled: false`` keeps results in the outbox only.
    :param outbox: the durable outbox.
    :param results_jsonl: also append every result as one JSON line to this file (none: off).
    :param footage: the footage store.
    :param metrics_port: Prometheus endpoint port (0: off).
    :param metrics_host: address the Prometheus endpoint listens on; loopback only (the
        endpoint has no credentials: scrape it through an authenticating proxy or a
        sidecar on the same host).
    :param log_level: ``DEBUG``, ``INFO``, ``WARNING`` or ``ERROR`` (``--log-level`` wins).
    :param status_interval: seconds between status lines (stderr) and status messages.
    :param console: the operator console (a live web page; off by default).
    :param opcua: the OPC UA server and its PLC handshake (docs/opcua.md).
    :param shadow: a candidate model judging the same frames beside the live one (its
        verdicts go into the results' ``shadow`` field and footage, never acted on).
    """

    station_id: str = ""
    camera: CameraSection = field(default_factory=CameraSection)
    model: ModelSection = field(default_factory=ModelSection)
    profile: str | None = None
    trigger: TriggerSection = field(default_factory=TriggerSection)
    mqtt: MqttSection = field(default_factory=MqttSection)
    outbox: OutboxSection = field(default_factory=OutboxSection)
    results_jsonl: str | None = None
    footage: FootageSection = field(default_factory=FootageSection)
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    log_level: str = "INFO"
    status_interval: float = 10.0
    console: ConsoleSection = field(default_factory=ConsoleSection)
    opcua: OpcuaSection = field(default_factory=OpcuaSection)
    shadow: ShadowSection = field(default_factory=ShadowSection)

    def validate(self) -> None:
        """Checks across sections.

        :raises ValueError: the first problem found.
        """
        if _bad_station_id(self.station_id):
            raise ValueError(
                f"station_id {self.station_id[:80]!r}: a non-empty id of at most "
                f"{MAX_STATION_ID} printable characters without spaces, + # or / is required"
            )
        if self.trigger.mode == "mqtt" and not self.mqtt.enabled:
            raise ValueError("trigger.mode mqtt needs mqtt.enabled (triggers arrive over MQTT)")
        if self.trigger.mode == "opcua" and not self.opcua.enabled:
            raise ValueError("trigger.mode opcua needs opcua.enabled (a PLC triggers over OPC UA)")
        if not 0 <= self.metrics_port < 65536:
            raise ValueError(f"metrics_port must be 0 (off) or a TCP port, got {self.metrics_port}")
        if self.metrics_port and not is_loopback(self.metrics_host):
            raise ValueError(
                f"metrics_host {self.metrics_host!r} is not a loopback address: the metrics "
                "endpoint has no credentials, so it listens on this machine only (scrape it "
                "through an authenticating proxy or a sidecar)"
            )
        if str(self.log_level).upper() not in _LOG_LEVELS:
            raise ValueError(
                f"log_level must be one of {', '.join(_LOG_LEVELS)}, got {self.log_level!r}"
            )
        if self.status_interval <= 0:
            raise ValueError(f"status_interval must be > 0, got {self.status_interval}")

    def check(self) -> StationConfig:
        """Validate every section (for configs built in code or changed by flags).

        :raises ConfigError: one line naming the setting.
        """
        sections = (self.camera, self.model, self.trigger, self.mqtt, self.outbox,
                    self.footage.keep, self.footage, self.console, self.opcua, self.shadow,
                    self)  # fmt: skip
        for s in sections:
            try:
                s.validate()
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        return self

    def mqtt_config(self) -> MqttConfig:
        """The broker settings as :class:`MqttConfig` (triggers on in ``mqtt`` mode)."""
        return self.mqtt.to_mqtt(self.station_id, triggers=self.trigger.mode == "mqtt")


def load_station_config(path: str | Path) -> StationConfig:
    """Load and validate a station YAML.

    :raises ConfigError: ``file:line:col: path: message``.
    """
    from inspector.yamlio.dataclass_load import load_dataclass

    return load_dataclass(StationConfig, path, error=ConfigError)


def apply_overrides(
    cfg: StationConfig,
    *,
    camera: str | None = None,
    params: dict[str, str] | None = None,
    model: str | None = None,
    mqtt_host: str | None = None,
    mqtt_port: int | None = None,
    station_id: str | None = None,
    footage: str | None = None,
    no_mqtt: bool = False,
) -> StationConfig:
    """A copy of ``cfg`` with the operator's command-line flags applied, validated.

    :param camera: another driver; its parameters then start empty (the configured ones
        belong to the configured driver).
    :param params: ``--param`` values merged over the camera's parameters.
    :param model: another model file.
    :param mqtt_host: broker host.
    :param mqtt_port: broker port.
    :param station_id: station id (also renames the default topics and client id).
    :param footage: footage folder (turns recording on).
    :param no_mqtt: do not publish; results stay in the outbox.
    :raises ConfigError: the result does not validate.
    """
    cam = dataclasses.replace(cfg.camera, params=dict(cfg.camera.params or {}))
    if camera is not None and camera != cam.driver:
        cam = dataclasses.replace(cam, driver=camera, params={})
    if params:
        cam.params = {**(cam.params or {}), **params}
    mod = cfg.model if model is None else dataclasses.replace(cfg.model, path=model)
    mq = cfg.mqtt
    if mqtt_host is not None:
        mq = dataclasses.replace(mq, host=mqtt_host)
    if mqtt_port is not None:
        mq = dataclasses.replace(mq, port=int(mqtt_port))
    if no_mqtt:
        mq = dataclasses.replace(mq, enabled=False)
    foot = cfg.footage if footage is None else dataclasses.replace(cfg.footage, path=footage)
    out = dataclasses.replace(
        cfg,
        camera=cam,
        model=mod,
        mqtt=mq,
        footage=foot,
        station_id=cfg.station_id if station_id is None else station_id,
    )
    return out.check()


# -- what the config names: the model and its profile --------------------------------------
def load_station_policy(section: ModelSection) -> Any:
    """Load the policy named by ``model`` (``.zip`` and pickles refused: export first).

    :raises ModelError: missing file, wrong kind, or a backend that does not fit.
    """
    from inspector.policy.load import load_policy

    path = Path(section.path)
    if section.backend.startswith("onnxruntime") and path.suffix.lower() == ".onnx":
        if not path.is_file():
            raise ModelError(f"model not found: {path}")
        from inspector.policy.onnx_backend import OrtPolicy

        cpu = ["CPUExecutionProvider"] if section.backend == "onnxruntime-cpu" else None
        return OrtPolicy(path, providers=cpu, threads=section.threads)
    return load_policy(path, threads=section.threads)


def check_profile(policy: Any, profile_path: str | None) -> tuple[Any, list[str]]:
    """Load the station's profile and check it against the model's metadata.

    :returns: (the profile or None, warnings).
    :raises ModelError: classes, step budget or scan settings disagree.
    """
    if not profile_path:
        return None, []
    import dataclasses

    from inspector.profile import load_profile
    from inspector.scan import action_names

    prof = load_profile(profile_path, warn=False)
    meta = policy.meta
    where = f"model {getattr(policy, 'path', '')} and profile {profile_path}"
    if tuple(prof.classes) != tuple(meta.classes):
        raise ModelError(
            f"{where} disagree: the model's classes are {', '.join(meta.classes)}, the "
            f"profile's {', '.join(prof.classes)}; use the profile the model was trained with"
        )
    if meta.step_budget and meta.step_budget != prof.step_budget:
        raise ModelError(
            f"{where} disagree: step budget {meta.step_budget} in the model, "
            f"{prof.step_budget} in the profile"
        )
    scan = dataclasses.asdict(prof.scan)
    theirs = action_names(prof.scan)
    if tuple(meta.actions) != theirs:
        raise ModelError(
            f"{where} disagree on the action table: the model's has {len(meta.actions)} "
            f"actions ({meta.scan.get('actions', 'moves')}), the profile's {len(theirs)} "
            f"(scan.actions {prof.scan.actions}); use the profile the model was trained with"
        )
    diff = [k for k, v in meta.scan.items() if k in scan and scan[k] != v]
    if diff:
        raise ModelError(
            f"{where} disagree on scan settings: "
            + ", ".join(f"{k} {meta.scan[k]} vs {scan[k]}" for k in diff)
        )
    warnings = []
    if meta.profile_sha256 and prof.sha256 and meta.profile_sha256 != prof.sha256:
        warnings.append(
            f"profile {profile_path} is not byte-identical to the one the model was trained "
            f"with ({meta.profile_name} {meta.profile_sha256[:12]}); classes and budget agree"
        )
    return prof, warnings
