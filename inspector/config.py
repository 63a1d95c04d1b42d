"""Configuration dataclasses from YAML, with ``file:line:col: path: message`` errors.

Used by :class:`inspector.train.config.TrainConfig` and the station's
``StationConfig``: each field's type hint says what the YAML may hold, unknown
keys list the allowed ones, and CLI flags override after loading.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from inspector.camera import coerce
from inspector.errors import ConfigError

T = TypeVar("T")


def _mark(node: yaml.Node | None) -> tuple[int | None, int | None]:
    if node is None:
        return None, None
    return node.start_mark.line + 1, node.start_mark.column + 1


def _from_node(cls: type[T], node: yaml.Node, file: str, path: str, error: type) -> T:
    if not isinstance(node, yaml.MappingNode):
        line, col = _mark(node)
        raise error(
            f"expected a mapping of settings, got {node.tag.rsplit(':', 1)[-1]}",
            file=file,
            line=line,
            column=col,
            path=path or None,
        )
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    loader = yaml.SafeLoader("")
    for knode, vnode in node.value:
        key = str(knode.value)
        shown = key if key.isprintable() else repr(key)  # a path stays one line
        kpath = f"{path}.{shown}" if path else shown
        line, col = _mark(knode)
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise error(
                f"unknown key {key!r}{hint}; allowed: {', '.join(fields)}",
                file=file,
                line=line,
                column=col,
                path=kpath,
            )
        hint_t = hints[key]
        sub = _dataclass_in(hint_t)
        vline, vcol = _mark(vnode)
        if sub is not None and isinstance(vnode, yaml.MappingNode):
            kwargs[key] = _from_node(sub, vnode, file, kpath, error)
            continue
        value = loader.construct_object(vnode, deep=True)
        if sub is not None and not (value is None and type(None) in typing.get_args(hint_t)):
            # A section must be a mapping (null only where the section is optional).
            raise error(
                f"{key}: expected a mapping of settings, got {_kind(value)}",
                file=file,
                line=vline,
                column=vcol,
                path=kpath,
            )
        try:
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{key}: expected a finite number, got {value!r}")
            kwargs[key] = coerce(value, hint_t, name=key)
        except ValueError as exc:
            raise error(str(exc), file=file, line=vline, column=vcol, path=kpath) from None
    try:
        obj = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        line, col = _mark(node)
        raise error(str(exc), file=file, line=line, column=col, path=path or None) from None
    validate = getattr(obj, "validate", None)
    if validate is not None:
        try:
            validate()
        except ValueError as exc:
            line, col = _mark(node)
            raise error(str(exc), file=file, line=line, column=col, path=path or None) from None
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


def load_dataclass(cls: type[T], path: str | Path, error: type = ConfigError) -> T:
    """Load ``cls`` from the YAML file ``path``.

    :raises ConfigError: missing file, YAML syntax error, unknown key, bad value.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"config file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read config file {p}: {exc}") from None
    return load_dataclass_text(cls, text, str(p), error)


def load_dataclass_text(
    cls: type[T], text: str, file: str = "<string>", error: type = ConfigError
) -> T:
    """Load ``cls`` from YAML text (see :func:`load_dataclass`).

    The text first passes the reward profiles' guarded parser (size, nesting depth,
    alias expansion, duplicate keys, safe tags): a hostile file is one located error.
    """
    from inspector.yamlloc import parse_yaml

    parse_yaml(text, file, error=error)  # raises for what yaml.compose would let through
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise error(
            f"YAML syntax error: {exc.problem or exc}", file=file, line=line, column=col
        ) from None
    except yaml.YAMLError as exc:
        raise error(f"YAML error: {exc}", file=file) from None
    if node is None:
        return cls()
    return _from_node(cls, node, file, "", error)


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
