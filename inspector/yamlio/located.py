"""YAML with locations: every value knows its line and column.

Profiles and configuration files are written by hand, so an error has to say
where it is: ``reward_profiles/x.yaml:12:9: terms[2].reward: ...``. This module
parses YAML with PyYAML's *safe* machinery (no arbitrary tags) into a small
tree of :class:`YNode` objects that carry the 1-based line and column of every
value and every mapping key, and turns every way the text can be broken
(syntax, encoding, duplicate keys, nesting depth, alias bombs, size) into a
:class:`~inspector.errors.ProfileError` (or a subclass chosen by the caller)
with a location.

Why not ``yaml.safe_load``: it forgets locations and silently keeps the last
of two duplicate keys. Why not ``yaml.compose`` alone: its composer recurses
once per nesting level, so deeply nested input raises ``RecursionError``
instead of a clean error; we first walk the (non-recursive) event stream and
reject excessive depth before composing.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from inspector.errors import ProfileError

#: Nesting deeper than this is rejected before composing (profiles need about 5).
MAX_DEPTH = 32
#: Values constructed, aliases expanded; guards against "billion laughs" documents.
MAX_NODES = 20_000
#: Bytes; a reward profile is a page of text.
MAX_BYTES = 1_000_000

_COLLECTION_TAGS = {"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}


@dataclass(eq=False)
class YNode:
    """One YAML value with its location.

    :param kind: ``map``, ``seq`` or ``scalar``.
    :param value: for ``scalar`` the constructed Python value (str, int, float, bool, None,
        date, bytes); for ``seq`` a list of YNode; for ``map`` a dict key -> YNode.
    :param line: 1-based line where the value starts.
    :param column: 1-based column where the value starts.
    :param raw: the scalar's source text (for hints such as "quote it"); "" for collections.
    :param keys: for ``map``: key -> the key's own YNode (to point at an unknown key).
    :param style: the scalar's quoting style (None for plain scalars).
    """

    kind: str
    value: Any
    line: int
    column: int
    raw: str = ""
    keys: dict[Any, YNode] = field(default_factory=dict)
    style: str | None = None

    def to_python(self) -> Any:
        """Plain Python data (dict, list, scalars) without locations."""
        if self.kind == "map":
            return {k: v.to_python() for k, v in self.value.items()}
        if self.kind == "seq":
            return [v.to_python() for v in self.value]
        return self.value


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")
_YAML11_BOOLS = {"yes", "no", "on", "off", "y", "n", "true", "false"}


class Checker:
    """Where errors go: the file name and the error class to raise.

    :param file: the document's name in messages.
    :param error: ProfileError or a subclass (ConfigError).
    """

    def __init__(self, file: str, error: type[ProfileError] = ProfileError) -> None:
        self.file = file
        self.error = error

    def fail(self, node: YNode | None, path: str, message: str) -> ProfileError:
        """An error located at ``node`` (or file-level when None)."""
        return self.error(
            one_line(message),
            file=self.file,
            line=node.line if node is not None else None,
            column=node.column if node is not None else None,
            path=one_line(path) or None,
        )


def one_line(text: str) -> str:
    """Escape line breaks: an error is always one line (the CLI prints exactly one)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def describe(node: YNode) -> str:
    """A short, YAML-flavoured description of a value for 'got ...' messages."""
    if node.kind == "map":
        return "a mapping"
    if node.kind == "seq":
        return "a list"
    v = node.value
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return repr(v if len(v) <= 40 else v[:37] + "...")
    if isinstance(v, (datetime.date, datetime.datetime)):
        return f"a date ({node.raw})"
    if isinstance(v, bytes):
        return "binary data"
    return str(v)


def type_hint(node: YNode, expected: str) -> str:
    """Extra advice for the classic YAML traps."""
    v = node.value
    if node.kind != "scalar":
        return ""
    if isinstance(v, bool) and expected == "a string" and node.raw.lower() in _YAML11_BOOLS:
        return f" (YAML reads {node.raw} as a boolean; quote it: '{node.raw}')"
    plain_bool = node.raw.lower() in ("true", "false")
    if isinstance(v, bool) and expected in ("a number", "an integer") and not plain_bool:
        return f" (YAML reads {node.raw} as a boolean)"
    if isinstance(v, str) and expected in ("a number", "an integer"):
        m = re.fullmatch(r"([-+]?[0-9]+)[eE]([-+]?)([0-9]+)", v.strip())
        if m:
            fixed = f"{m.group(1)}.0e{m.group(2) or '+'}{m.group(3)}"
            return f" (YAML 1.1 reads exponents without a dot as text: write {fixed})"
    return ""


def join_path(path: str, key: str | int) -> str:
    """``terms`` + 2 -> ``terms[2]``; ``scan`` + ``glimpse`` -> ``scan.glimpse``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not _PLAIN_KEY.fullmatch(key):
        # Odd keys (spaces, newlines, unicode) are quoted so the message stays one line.
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if path else key


def _fail(
    error: type[ProfileError], message: str, file: str, mark: Any = None, path: str | None = None
) -> ProfileError:
    line = col = None
    if mark is not None:
        line, col = mark.line + 1, mark.column + 1
    # One line always: PyYAML problems may quote text with line breaks.
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    return error(message, file=file, line=line, column=col, path=path)


def _syntax_error(exc: yaml.YAMLError, file: str, error: type[ProfileError]) -> ProfileError:
    if isinstance(exc, yaml.reader.ReaderError):
        # A bad byte or control character: ReaderError has a character offset, not a mark.
        line = col = None
        text = getattr(exc, "_inspector_text", None)
        if isinstance(text, str) and isinstance(exc.position, int):
            before = text[: exc.position]
            line = before.count("\n") + 1
            col = exc.position - (before.rfind("\n") + 1) + 1
        ch = exc.character
        what = f"#x{ch:04x}" if isinstance(ch, int) else repr(ch)
        return error(f"YAML: unacceptable character {what}", file=file, line=line, column=col)
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "invalid YAML"
        msg = f"YAML syntax error: {problem}"
        if exc.context:
            ctx_line = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
            msg += f" ({exc.context}{ctx_line})"
        return _fail(error, msg, file, mark)
    return _fail(error, f"YAML error: {exc}", file)


def _check_depth(text: str, file: str, error: type[ProfileError], max_depth: int) -> bool:
    """Walk the event stream (no recursion); return False for an empty document."""
    depth = 0
    documents = 0
    saw_node = False
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise _fail(
                    error,
                    "expected one YAML document, found several ('---')",
                    file,
                    event.start_mark,
                )
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            saw_node = True
            depth += 1
            if depth > max_depth:
                raise _fail(
                    error, f"nesting deeper than {max_depth} levels", file, event.start_mark
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            saw_node = True
    return saw_node


class _Builder:
    """Turns a composed PyYAML node graph into YNodes, counting what it builds."""

    def __init__(self, file: str, error: type[ProfileError], max_nodes: int) -> None:
        self.file = file
        self.error = error
        self.max_nodes = max_nodes
        self.count = 0
        self.constructor = SafeConstructor()

    def build(self, node: yaml.Node, depth: int = 0) -> YNode:
        self.count += 1
        if self.count > self.max_nodes:
            raise _fail(
                self.error,
                f"document too large: more than {self.max_nodes} values (aliases expanded)",
                self.file,
                node.start_mark,
            )
        if depth > MAX_DEPTH:  # aliases can nest deeper than the text shows
            raise _fail(
                self.error, f"nesting deeper than {MAX_DEPTH} levels", self.file, node.start_mark
            )
        line, col = node.start_mark.line + 1, node.start_mark.column + 1
        if isinstance(node, yaml.ScalarNode):
            try:
                value = self.constructor.construct_object(node, deep=True)
            except ConstructorError as exc:
                raise _fail(
                    self.error, f"YAML: {exc.problem}", self.file, exc.problem_mark
                ) from None
            except (ValueError, TypeError, OverflowError) as exc:
                # e.g. an impossible timestamp such as 2020-13-45 or bad base64 in !!binary
                raise _fail(
                    self.error, f"YAML: bad value {node.value!r}: {exc}", self.file, node.start_mark
                ) from None
            return YNode("scalar", value, line, col, raw=str(node.value), style=node.style)
        if node.tag not in _COLLECTION_TAGS:
            raise _fail(
                self.error,
                f"YAML: unsupported tag {node.tag!r} (plain mappings and lists only)",
                self.file,
                node.start_mark,
            )
        if isinstance(node, yaml.SequenceNode):
            return YNode("seq", [self.build(v, depth + 1) for v in node.value], line, col)
        return self._mapping(node, line, col, depth)

    def _mapping(self, node: yaml.MappingNode, line: int, col: int, depth: int) -> YNode:
        try:
            # Resolves "<<: *base" merge keys the way yaml.safe_load does.
            self.constructor.flatten_mapping(node)
        except ConstructorError as exc:
            raise _fail(self.error, f"YAML: {exc.problem}", self.file, exc.problem_mark) from None
        values: dict[Any, YNode] = {}
        keys: dict[Any, YNode] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise _fail(
                    self.error, "mapping keys must be plain values", self.file, key_node.start_mark
                )
            key = self.build(key_node, depth + 1)
            try:
                hash(key.value)
            except TypeError:
                raise _fail(
                    self.error, "mapping keys must be plain values", self.file, key_node.start_mark
                ) from None
            if key.value in values:
                first = keys[key.value]
                # flatten_mapping puts merged keys first; an explicit key overrides a merged
                # one (YAML merge semantics), but two explicit keys are a mistake.
                if first.line <= key.line and not _is_merged(first, node):
                    raise _fail(
                        self.error,
                        f"duplicate key {key.raw!r} (first at line {first.line})",
                        self.file,
                        key_node.start_mark,
                    )
            keys[key.value] = key
            values[key.value] = self.build(value_node, depth + 1)
        return YNode("map", values, line, col, keys=keys)


def _is_merged(key: YNode, mapping: yaml.MappingNode) -> bool:
    """Whether ``key`` came in through a ``<<`` merge (it starts outside the mapping's text)."""
    start, end = mapping.start_mark, mapping.end_mark
    pos = (key.line - 1, key.column - 1)
    return not ((start.line, start.column) <= pos <= (end.line, end.column))


def parse_yaml(
    text: str | bytes,
    file: str = "<string>",
    *,
    error: type[ProfileError] = ProfileError,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> YNode | None:
    """Parse one YAML document into a :class:`YNode` tree.

    :param text: the document (bytes are decoded as UTF-8).
    :param file: the name used in messages.
    :param error: the error class to raise (``ProfileError`` or a subclass such as
        ``ConfigError``).
    :param max_depth: maximum nesting of mappings and lists.
    :param max_nodes: maximum number of values after expanding aliases.
    :returns: the root node, or None when the document is empty (only comments/blank).
    :raises ProfileError: (or ``error``) for every problem, with file and, where the text
        has one, line and column.
    """
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise error(f"file too large ({len(text)} bytes; limit {MAX_BYTES})", file=file)
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = text.count(b"\n", 0, exc.start) + 1
            col = exc.start - (text.rfind(b"\n", 0, exc.start) + 1) + 1
            raise error(
                f"not UTF-8 text (byte 0x{text[exc.start]:02x})", file=file, line=line, column=col
            ) from None
    if len(text) > MAX_BYTES:
        raise error(f"file too large ({len(text)} characters; limit {MAX_BYTES})", file=file)
    try:
        if not _check_depth(text, file, error, max_depth):
            return None
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.reader.ReaderError):
            exc._inspector_text = text  # type: ignore[attr-defined]
        raise _syntax_error(exc, file, error) from None
    except RecursionError:  # defensive: _check_depth should have caught it
        raise error(f"nesting deeper than {max_depth} levels", file=file, line=1) from None
    if node is None:
        return None
    return _Builder(file, error, max_nodes).build(node)
