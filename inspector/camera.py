"""Camera drivers: the base class, parameter handling, and ``open_camera``.

A driver is a :class:`CameraDriver` subclass registered by a plugin through
``register_camera_drivers``. Its ``__init__`` keyword arguments are its
parameters; ``open_camera`` checks the names, converts ``--param KEY=VALUE``
strings with the type hints, and turns bad values into a :class:`CameraError`.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspector.errors import CameraError, InspectorError, PluginError
from inspector.frames import Frame

log = logging.getLogger(__name__)


@dataclass
class CameraStats:
    """Counters every driver keeps; ``camera probe`` and the station show them."""

    frames_read: int = 0
    frames_skipped: int = 0
    reconnects: int = 0
    skipped: list[str] = field(default_factory=list)

    def skip(self, what: str, why: str) -> None:
        """Count a skipped frame and log a warning naming it."""
        self.frames_skipped += 1
        if len(self.skipped) < 1000:
            self.skipped.append(f"{what}: {why}")
        log.warning("skipped %s: %s", what, why)


class CameraDriver:
    """Base class of camera drivers. Subclasses implement :meth:`frames`.

    Iterating a driver yields :class:`Frame` objects until the source ends (a
    looping or live source never ends). Drivers count what they read and skip in
    :attr:`stats`.
    """

    #: Whether frames carry :class:`inspector.frames.Truth` (training needs it).
    has_truth: bool = False

    def __init__(self) -> None:
        self.stats = CameraStats()

    def frames(self) -> Iterator[Frame]:
        """Yield frames; implemented by each driver."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[Frame]:
        return self.frames()

    def close(self) -> None:
        """Release the device or files (idempotent)."""

    def __enter__(self) -> CameraDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        """One line for start-up banners."""
        return type(self).__name__


def parse_params(items: list[str] | None) -> dict[str, str]:
    """Turn ``["a=1", "b=x"]`` (from ``--param``) into a dict.

    :raises InspectorError: an item has no ``=``.
    """
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InspectorError(f"--param expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce(value: Any, hint: Any, *, name: str = "value") -> Any:
    """Convert a ``--param`` string to the parameter's annotated type.

    Supports int, float, bool, str, Path, ``X | None``, tuples/lists of those
    (comma-separated) and ``dict[str, float]`` (``a:0.5,b:0.5``). Non-string values
    are returned unchanged when they already fit. Messages start with ``name: ``
    unless ``name`` is empty (a located error that already names the key).

    :raises ValueError: the value does not convert; the message says what was expected.
    """
    pre = f"{name}: " if name else ""  # name="": the caller's location names the key
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        non_none = [a for a in args if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in {"none", "null", ""}):
            if type(None) in args:
                return None
        errors = []
        for a in non_none:
            try:
                return coerce(value, a, name=name)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors) or f"{pre}cannot convert {value!r}")
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        s = str(value).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise ValueError(f"{pre}expected true/false, got {value!r}")
    if hint in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"{pre}expected {hint.__name__}, got {value!r}")
        try:
            v = hint(value) if not isinstance(value, str) else hint(value.strip())
        except (TypeError, ValueError):
            raise ValueError(f"{pre}expected {hint.__name__}, got {value!r}") from None
        if hint is int and isinstance(value, float) and value != int(value):
            raise ValueError(f"{pre}expected an integer, got {value!r}")
        return v
    if hint in (str, Path):
        # A list or mapping where one value is expected is a mistake, never its repr.
        if isinstance(value, (list, tuple, dict, set)):
            kind = "a mapping" if isinstance(value, dict) else "a list"
            raise ValueError(f"{pre}expected one value, got {kind}: {str(value)[:60]}")
        return str(value) if hint is str else Path(str(value))
    if origin in (tuple, list):
        items = value.split(",") if isinstance(value, str) else list(value)
        elem = args[0] if args else str
        conv = [coerce(i.strip() if isinstance(i, str) else i, elem, name=name) for i in items]
        return tuple(conv) if origin is tuple else conv
    if origin is dict:
        kt, vt = args if args else (str, str)
        if isinstance(value, Mapping):
            return {coerce(k, kt, name=name): coerce(v, vt, name=name) for k, v in value.items()}
        out = {}
        for part in str(value).split(","):
            k, sep, v = part.partition(":")
            if not sep:
                raise ValueError(f"{pre}expected key:value[,key:value...], got {value!r}")
            out[coerce(k.strip(), kt, name=name)] = coerce(v.strip(), vt, name=name)
        return out
    return value


def driver_params(factory: Any) -> dict[str, inspect.Parameter]:
    """The keyword parameters a driver factory accepts (its documented parameters)."""
    sig = inspect.signature(factory)
    return {
        n: p
        for n, p in sig.parameters.items()
        if n != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


def open_camera(name: str, params: Mapping[str, Any] | None = None, plugins: Any = None) -> Any:
    """Open the camera driver ``name`` with ``params``.

    :param name: a registered driver name (``synthetic``, ``folder``, ``video``, ``opencv``, ...).
    :param params: parameters; strings are converted with the driver's type hints.
    :param plugins: a :class:`inspector.plugins.Plugins`; the process-wide one by default.
    :raises CameraError: unknown driver, unknown or bad parameter, or the driver failed to open.
    """
    from inspector.plugins import get_plugins

    plugins = plugins or get_plugins()
    try:
        factory = plugins.camera_drivers.get(name)
    except PluginError as exc:
        raise CameraError(str(exc)) from None
    accepted = driver_params(factory)
    hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    kwargs: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key not in accepted:
            import difflib

            close = difflib.get_close_matches(key, list(accepted), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CameraError(
                f"camera driver {name!r} has no parameter {key!r}{hint}; "
                f"expected one of: {', '.join(accepted) or 'none'}"
            )
        try:
            kwargs[key] = coerce(value, hints.get(key, Any), name=key)
        except ValueError as exc:
            raise CameraError(f"camera driver {name!r}: {exc}") from None
    missing = [
        n for n, p in accepted.items() if p.default is inspect.Parameter.empty and n not in kwargs
    ]
    if missing:
        raise CameraError(
            f"camera driver {name!r} needs parameter(s): {', '.join(missing)} "
            f"(pass --param {missing[0]}=...)"
        )
    try:
        return factory(**kwargs)
    except InspectorError:
        raise
    except (OSError, ValueError) as exc:
        raise CameraError(f"camera driver {name!r}: {exc}") from exc
