"""Configuration dataclasses from YAML, with ``file:line:col: path: message`` errors.

Used by :class:`inspector.train.config.TrainConfig` and the station's
``StationConfig``: each field's type hint says what the YAML may hold, unknown
keys list the allowed ones, and CLI flags override after loading. The YAML is
parsed by the one guarded loader that reward profiles use
(:func:`inspector.yamlio.located.parse_yaml`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from pathlib import Path
from typing import Any, TypeVar

from inspector.camera import coerce
from inspector.errors import ConfigError
from inspector.yamlio.located import MAX_BYTES, YNode, describe, parse_yaml

T = TypeVar("T")


def _from_node(
    cls: type[T], node: YNode, file: str, path: str, error: type, base: T | None = None
) -> T:
    if node.kind != "map":
        raise error(
            f"expected a mapping of settings, got {describe(node)}",
            file=file,
            line=node.line,
            column=node.column,
            path=path or None,
        )
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, vnode in node.value.items():
        key_node = node.keys[key]
        key = str(key)
        shown = key if key.isprintable() else repr(key)  # a path stays one line
        kpath = f"{path}.{shown}" if path else shown
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise error(
                f"unknown key {key!r}{hint}; allowed: {', '.join(fields)}",
                file=file,
                line=key_node.line,
                column=key_node.column,
                path=kpath,
            )
        hint_t = hints[key]
        sub = _dataclass_in(hint_t)
        if sub is not None and vnode.kind == "map":
            kwargs[key] = _from_node(sub, vnode, file, kpath, error)
            continue
        if sub is not None and typing.get_origin(hint_t) is list and vnode.kind == "seq":
            # A list of sections (e.g. opcua.users): each item is loaded like a section.
            kwargs[key] = [
                _from_node(sub, item, file, f"{kpath}[{i}]", error)
                for i, item in enumerate(vnode.value)
            ]
            continue
        value = vnode.to_python()
        if sub is not None and not (value is None and type(None) in typing.get_args(hint_t)):
            # A section must be a mapping (null only where the section is optional).
            raise error(
                f"expected a mapping of settings, got {_kind(value)}",
                file=file,
                line=vnode.line,
                column=vnode.column,
                path=kpath,
            )
        try:
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"expected a finite number, got {value!r}")
            kwargs[key] = coerce(value, hint_t, name="")  # the path names the key
        except ValueError as exc:
            raise error(
                str(exc), file=file, line=vnode.line, column=vnode.column, path=kpath
            ) from None
    try:
        obj = cls(**kwargs) if base is None else dataclasses.replace(base, **kwargs)
    except (TypeError, ValueError) as exc:
        raise error(
            str(exc), file=file, line=node.line, column=node.column, path=path or None
        ) from None
    validate = getattr(obj, "validate", None)
    if validate is not None:
        try:
            validate()
        except ValueError as exc:
            raise error(
                str(exc), file=file, line=node.line, column=node.column, path=path or None
            ) from None
    return obj


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def _dataclass_in(hint: Any) -> type | None:
    if dataclasses.is_dataclass(hint):
        return hint
    for a in typing.get_args(hint):
        if dataclasses.is_dataclass(a):
            return a
    return None


def load_dataclass(
    cls: type[T], path: str | Path, error: type = ConfigError, base: T | None = None
) -> T:
    """Load ``cls`` from the YAML file ``path``: the file's keys over ``base`` (an
    instance; None: the class defaults), the whole validated as one.

    :raises ConfigError: missing file, YAML syntax error, unknown key, bad value.
    """
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise error(f"config file not found: {p}") from None
    except OSError as exc:
        raise error(f"cannot read config file {p}: {exc}") from None
    return load_dataclass_text(cls, data, str(p), error, base)


def load_dataclass_text(
    cls: type[T],
    text: str | bytes,
    file: str = "<string>",
    error: type = ConfigError,
    base: T | None = None,
) -> T:
    """Load ``cls`` from YAML text (see :func:`load_dataclass`).

    The text goes through :func:`inspector.yamlio.located.parse_yaml`, the same guarded
    parser as reward profiles: size, nesting depth, alias expansion, duplicate keys and
    unsupported tags are refused with a located error.
    """
    node = parse_yaml(text, file, error=error)
    if node is None:
        return cls() if base is None else base
    return _from_node(cls, node, file, "", error, base)


def field_docs(cls: type) -> dict[str, str]:
    """The ``:param name: text`` docs of a dataclass, for ``--help`` and the README."""
    out: dict[str, str] = {}
    doc = cls.__doc__ or ""
    cur = None
    for raw in doc.splitlines():
        line = raw.strip()
        if line.startswith(":param "):
            name, _, text = line[len(":param ") :].partition(":")
            cur = name.strip()
            out[cur] = text.strip()
        elif cur and line and not line.startswith(":"):
            out[cur] += " " + line
        else:
            cur = None
    return out
