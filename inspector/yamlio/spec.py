"""Typed specs that check located YAML and write JSON Schema from one description.

A profile format is described once, as a tree of specs (:class:`Number`,
:class:`String`, :class:`Record`, ...). The same tree

* checks a :class:`~inspector.yamlio.located.YNode` tree, raising a ProfileError
  that carries the value's file, line, column and path
  (``terms[2].reward: expected a number, got 'high'``), and
* writes the JSON Schema (draft 2020-12) that editors use,

so the validator and the schema cannot drift apart for anything the spec
expresses. Rules a schema cannot state (a per-class key must be one of the
profile's classes) are checked by the caller.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inspector.errors import ProfileError
from inspector.yamlio.located import Checker, YNode, describe, join_path, type_hint


class Spec:
    """Base of all specs.

    :param doc: the description written into the schema.
    """

    #: How the expected value reads in messages.
    what: str = "a value"
    doc: str = ""

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        """Validate ``node`` and return its plain Python value."""
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of this spec."""
        raise NotImplementedError

    def _type_error(self, node: YNode, path: str, ck: Checker) -> ProfileError:
        return ck.fail(
            node, path, f"expected {self.what}, got {describe(node)}{type_hint(node, self.what)}"
        )

    def _with_doc(self, s: dict[str, Any]) -> dict[str, Any]:
        if self.doc:
            s["description"] = self.doc
        return s


@dataclass(frozen=True)
class Number(Spec):
    """A finite number in [lo, hi] (``lo`` exclusive when ``lo_exclusive``).

    Integral floats such as ``12.0`` pass as integers, as in JSON Schema.
    """

    lo: float = -1e6
    hi: float = 1e6
    integer: bool = False
    lo_exclusive: bool = False
    doc: str = ""

    @property
    def what(self) -> str:  # type: ignore[override]
        return "an integer" if self.integer else "a number"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        v = node.value
        if node.kind != "scalar" or isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self._type_error(node, path, ck)
        raw = _short(node.raw)
        if isinstance(v, float) and not math.isfinite(v):
            raise ck.fail(node, path, f"expected a finite number, got {raw}")
        if self.integer and isinstance(v, float) and not v.is_integer():
            raise ck.fail(node, path, f"expected an integer, got {raw}")
        # Compare before converting: a huge YAML int does not fit in a float.
        low_ok = v > self.lo if self.lo_exclusive else v >= self.lo
        if not low_ok or v > self.hi:
            lo = _fmt(self.lo, self.integer)
            hi = _fmt(self.hi, self.integer)
            rng = f"in ({lo}, {hi}]" if self.lo_exclusive else f"between {lo} and {hi}"
            raise ck.fail(node, path, f"must be {rng}, got {raw}")
        return int(v) if self.integer else float(v)

    def schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        lo = int(self.lo) if self.integer else self.lo
        hi = int(self.hi) if self.integer else self.hi
        if self.lo_exclusive:
            s["exclusiveMinimum"] = lo
        else:
            s["minimum"] = lo
        s["maximum"] = hi
        return self._with_doc(s)


def _short(raw: str, limit: int = 40) -> str:
    return raw if len(raw) <= limit else raw[: limit - 3] + "..."


def _fmt(x: float, integer: bool) -> str:
    if integer or float(x).is_integer():
        return str(int(x))
    return repr(float(x))


@dataclass(frozen=True)
class String(Spec):
    """A string, optionally from ``enum`` or matching ``pattern`` (whole string)."""

    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    min_len: int = 1
    max_len: int = 200
    reserved: tuple[str, ...] = ()
    doc: str = ""
    what: str = "a string"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        v = node.value
        if node.kind != "scalar" or not isinstance(v, str):
            raise self._type_error(node, path, ck)
        if self.enum is not None and v not in self.enum:
            close = difflib.get_close_matches(v, self.enum, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ck.fail(
                node, path, f"unknown value {describe(node)}{hint}; allowed: {', '.join(self.enum)}"
            )
        if len(v) < self.min_len:
            raise ck.fail(node, path, "must not be empty")
        if len(v) > self.max_len:
            raise ck.fail(node, path, f"longer than {self.max_len} characters")
        if self.pattern is not None and not re.fullmatch(self.pattern, v):
            raise ck.fail(node, path, f"{describe(node)} does not match {self.pattern}")
        if v in self.reserved:
            raise ck.fail(node, path, f"{describe(node)} is reserved")
        return v

    def schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "string"}
        if self.enum is not None:
            s["enum"] = list(self.enum)
        else:
            s["minLength"] = self.min_len
            s["maxLength"] = self.max_len
            if self.pattern is not None:
                s["pattern"] = f"^{self.pattern}$"
        if self.reserved:
            s["not"] = {"enum": list(self.reserved)}
        return self._with_doc(s)


@dataclass(frozen=True)
class Boolean(Spec):
    """true or false."""

    doc: str = ""
    what: str = "true or false"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        if node.kind != "scalar" or not isinstance(node.value, bool):
            raise self._type_error(node, path, ck)
        return node.value

    def schema(self) -> dict[str, Any]:
        return self._with_doc({"type": "boolean"})


@dataclass(frozen=True)
class Nullable(Spec):
    """``inner`` or null."""

    inner: Spec = field(default_factory=Spec)
    doc: str = ""

    @property
    def what(self) -> str:  # type: ignore[override]
        return f"{self.inner.what} or null"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        if node.kind == "scalar" and node.value is None:
            return None
        if node.kind != self._inner_kind() and self._inner_kind() != "any":
            raise self._type_error(node, path, ck)
        return self.inner.check(node, path, ck)

    def _inner_kind(self) -> str:
        if isinstance(self.inner, (Record, MapOf)):
            return "map"
        if isinstance(self.inner, ListOf):
            return "seq"
        if isinstance(self.inner, (Number, String, Boolean)):
            return "scalar"
        return "any"

    def schema(self) -> dict[str, Any]:
        return self._with_doc({"anyOf": [self.inner.schema(), {"type": "null"}]})


@dataclass(frozen=True)
class ListOf(Spec):
    """A list of ``item`` with a length range; ``unique`` rejects repeated scalars."""

    item: Spec = field(default_factory=Spec)
    min_items: int = 0
    max_items: int = 1000
    unique: bool = False
    doc: str = ""
    what: str = "a list"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        if node.kind != "seq":
            raise self._type_error(node, path, ck)
        items: list[YNode] = node.value
        if len(items) < self.min_items:
            raise ck.fail(node, path, f"needs at least {self.min_items} item(s), got {len(items)}")
        if len(items) > self.max_items:
            raise ck.fail(node, path, f"at most {self.max_items} items, got {len(items)}")
        out = []
        seen: dict[Any, int] = {}
        for i, child in enumerate(items):
            v = self.item.check(child, join_path(path, i), ck)
            if self.unique:
                if v in seen:
                    raise ck.fail(
                        child,
                        join_path(path, i),
                        f"duplicate {describe(child)} (also {join_path(path, seen[v])})",
                    )
                seen[v] = i
            out.append(v)
        return out

    def schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "array", "items": self.item.schema()}
        if self.min_items:
            s["minItems"] = self.min_items
        s["maxItems"] = self.max_items
        if self.unique:
            s["uniqueItems"] = True
        return self._with_doc(s)


@dataclass(frozen=True)
class MapOf(Spec):
    """A mapping with free string keys (matching ``key``) and ``value`` values."""

    key: String = field(default_factory=String)
    value: Spec = field(default_factory=Spec)
    max_items: int = 100
    doc: str = ""
    what: str = "a mapping"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        if node.kind != "map":
            raise self._type_error(node, path, ck)
        if len(node.value) > self.max_items:
            raise ck.fail(node, path, f"at most {self.max_items} entries, got {len(node.value)}")
        out = {}
        for k, child in node.value.items():
            key_node = node.keys[k]
            sub = join_path(path, k if isinstance(k, str) else str(k))
            self.key.check(key_node, sub, ck)
            out[k] = self.value.check(child, sub, ck)
        return out

    def schema(self) -> dict[str, Any]:
        s: dict[str, Any] = {
            "type": "object",
            "propertyNames": self.key.schema(),
            "additionalProperties": self.value.schema(),
            "maxProperties": self.max_items,
        }
        return self._with_doc(s)


@dataclass(frozen=True)
class Either(Spec):
    """One of several specs, chosen by the node's kind (scalar, list or mapping)."""

    options: tuple[Spec, ...] = ()
    doc: str = ""

    @property
    def what(self) -> str:  # type: ignore[override]
        return " or ".join(o.what for o in self.options)

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        for o in self.options:
            if Nullable(o)._inner_kind() == node.kind:
                return o.check(node, path, ck)
        raise self._type_error(node, path, ck)

    def schema(self) -> dict[str, Any]:
        return self._with_doc({"anyOf": [o.schema() for o in self.options]})


@dataclass(frozen=True)
class Key:
    """One key of a :class:`Record`.

    :param spec: the value's spec.
    :param required: the key must be present.
    :param doc: the key's description (written into the schema).
    """

    spec: Spec
    required: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Record(Spec):
    """A mapping with a fixed set of keys; unknown keys list the allowed ones.

    :param keys: key name -> :class:`Key`.
    """

    keys: Mapping[str, Key] = field(default_factory=dict)
    doc: str = ""
    what: str = "a mapping"
    #: How an unknown key is called in messages ("unknown key", "unknown parameter").
    unknown: str = "unknown key"

    def check(self, node: YNode, path: str, ck: Checker) -> dict[str, Any]:
        if node.kind != "map":
            raise self._type_error(node, path, ck)
        self.check_keys(node, path, ck, self.keys, self.unknown)
        out: dict[str, Any] = {}
        for k, child in node.value.items():
            out[k] = self.keys[k].spec.check(child, join_path(path, k), ck)
        return out

    @staticmethod
    def check_keys(
        node: YNode,
        path: str,
        ck: Checker,
        allowed: Mapping[str, Key],
        unknown: str = "unknown key",
    ) -> None:
        """Unknown keys first (a typo explains a 'missing' key), then missing ones."""
        for k in node.value:
            if k not in allowed:
                key_node = node.keys[k]
                close = difflib.get_close_matches(str(k), list(allowed), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                names = ", ".join(allowed) or "none"
                raise ck.fail(
                    key_node,
                    join_path(path, str(k)),
                    f"{unknown} {describe(key_node)}{hint}; allowed: {names}",
                )
        for k, key in allowed.items():
            if key.required and k not in node.value:
                raise ck.fail(node, path, f"missing required key {k!r}")

    def schema(self) -> dict[str, Any]:
        props = {}
        for k, key in self.keys.items():
            s = key.spec.schema()
            if key.doc:
                s = {**s, "description": key.doc}
            props[k] = s
        s: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "additionalProperties": False,
        }
        req = [k for k, key in self.keys.items() if key.required]
        if req:
            s["required"] = req
        return self._with_doc(s)


@dataclass(frozen=True)
class Anything(Spec):
    """Any value (for parameters without a usable type hint)."""

    doc: str = ""
    what: str = "a value"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        return node.to_python()

    def schema(self) -> dict[str, Any]:
        return self._with_doc({})


@dataclass(frozen=True)
class Null(Spec):
    """Only null (the "off" value of a tag such as ``shaping.potential``)."""

    doc: str = ""
    what: str = "null"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        if node.kind != "scalar" or node.value is not None:
            raise self._type_error(node, path, ck)
        return None

    def schema(self) -> dict[str, Any]:
        return self._with_doc({"type": "null"})


@dataclass(frozen=True)
class Tagged(Spec):
    """A mapping whose ``tag`` key picks the :class:`Record` that checks the rest.

    Used for ``terms[i]`` (tag ``term``: each term has its own parameters) and for
    ``rrm.redistribution`` (tag ``method``: each method its own settings). The schema is
    an ``if``/``then`` per variant, so editors complete the right keys.

    :param tag: the key that selects the variant.
    :param variants: tag value -> Record (which should list ``tag`` itself).
    :param noun: how the tag's values are called in messages ("term", "method").
    :param null_variant: the Record used when the tag is null (None: null is an error).
    :param explain_unknown: optional callable value -> extra text for an unknown tag value
        (e.g. "is a term but not a potential").
    """

    tag: str = "type"
    variants: Mapping[str, Record] = field(default_factory=dict)
    noun: str = "value"
    null_variant: Record | None = None
    explain_unknown: Any = None
    doc: str = ""
    what: str = "a mapping"

    def check(self, node: YNode, path: str, ck: Checker) -> Any:
        if node.kind != "map":
            raise self._type_error(node, path, ck)
        if self.tag not in node.value:
            Record.check_keys(node, path, ck, self._all_keys())
            raise ck.fail(node, path, f"missing required key {self.tag!r}")
        tag_node = node.value[self.tag]
        tag_path = join_path(path, self.tag)
        if tag_node.kind == "scalar" and tag_node.value is None and self.null_variant is not None:
            return self.null_variant.check(node, path, ck)
        if tag_node.kind != "scalar" or not isinstance(tag_node.value, str):
            raise ck.fail(
                tag_node, tag_path, f"expected {self.noun} name, got {describe(tag_node)}"
            )
        name = tag_node.value
        if name not in self.variants:
            names = sorted(self.variants)
            extra = self.explain_unknown(name) if self.explain_unknown else None
            if extra:
                raise ck.fail(tag_node, tag_path, f"{extra}; known: {', '.join(names)}")
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ck.fail(
                tag_node,
                tag_path,
                f"unknown {self.noun} {name!r}{hint}; known: {', '.join(names) or 'none'}",
            )
        return self.variants[name].check(node, path, ck)

    def _all_keys(self) -> dict[str, Key]:
        keys: dict[str, Key] = {}
        for v in [*self.variants.values(), *([self.null_variant] if self.null_variant else [])]:
            keys.update(v.keys)
        return keys

    def schema(self) -> dict[str, Any]:
        tag_values: list[Any] = sorted(self.variants)
        if self.null_variant is not None:
            tag_values.append(None)
        s: dict[str, Any] = {
            "type": "object",
            "required": [self.tag],
            "properties": {self.tag: {"enum": tag_values}},
        }
        branches = []
        for name in sorted(self.variants):
            branches.append(
                {
                    "if": {"properties": {self.tag: {"const": name}}, "required": [self.tag]},
                    "then": self.variants[name].schema(),
                }
            )
        if self.null_variant is not None:
            branches.append(
                {
                    "if": {"properties": {self.tag: {"type": "null"}}, "required": [self.tag]},
                    "then": self.null_variant.schema(),
                }
            )
        if branches:
            s["allOf"] = branches
        return self._with_doc(s)
