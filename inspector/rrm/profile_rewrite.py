"""Rewrite a profile's reward values in its own text, keeping comments and layout.

``profile fit`` writes a new version of a hand-written profile. Dumping the parsed
document again would lose the engineer's comments, key order and flow style, so the
new values are written over the old numbers where they stand (the located YAML tree
knows the line and column of every scalar) and the ``provenance`` block is replaced
at the end of the file. The result is loaded again before it is returned, so a
rewrite can never produce a profile that does not load.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import yaml

from inspector.errors import ProfileError
from inspector.yamlio.located import YNode, parse_yaml


def format_number(v: float) -> str:
    """A float as YAML reads it back as a float (``1e-05`` alone would be a string)."""
    if v == 0.0:
        return "0.0"
    text = repr(float(v))
    if "e" in text or "E" in text:
        digits = max(1, -math.floor(math.log10(abs(v))) + 6)
        text = f"{v:.{digits}f}".rstrip("0")
    if "." not in text:
        text += ".0"
    if text.endswith("."):
        text += "0"
    return text


def rewrite_values(
    text: str,
    file: str,
    values: Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
    plugins: Any = None,
) -> str:
    """The profile ``text`` with new term values and a new ``provenance`` block.

    :param text: the profile's YAML text.
    :param file: its name, for messages.
    :param values: term -> new value (a number, or class -> number for the classes the
        profile lists for that term); terms not named keep their value.
    :param provenance: the new ``provenance`` mapping (replaces any old one); None keeps
        the text's.
    :param plugins: see :func:`inspector.profile.load_profile` (for the final check).
    :raises ProfileError: the text is not a profile, or a value cannot be written in place.
    """
    from inspector.profile import load_profile_text

    if text.startswith("\ufeff"):
        text = text[1:]
    root = parse_yaml(text, file)
    if root is None or root.kind != "map" or "terms" not in root.value:
        raise ProfileError("not a reward profile (no terms)", file=file)
    lines = text.split("\n")
    edits: list[tuple[int, int, str, str]] = []  # line, column, old text, new text
    for entry in root.value["terms"].value:
        name = entry.value["term"].value
        if name not in values:
            continue
        node, new = entry.value["reward"], values[name]
        if node.kind == "map":
            if not isinstance(new, Mapping) or set(new) != set(node.value):
                raise ProfileError(
                    f"term {name!r}: new values must name the same classes", file=file
                )
            for cls, sub in node.value.items():
                edits.append(_edit(sub, float(new[cls]), lines, file))
        else:
            if isinstance(new, Mapping):
                raise ProfileError(f"term {name!r}: expected one number", file=file)
            edits.append(_edit(node, float(new), lines, file))
    # Right to left within a line, so earlier columns stay valid.
    for line, col, old, new_text in sorted(edits, key=lambda e: (e[0], -e[1])):
        s = lines[line - 1]
        lines[line - 1] = s[: col - 1] + new_text + s[col - 1 + len(old) :]
    if provenance is not None:
        lines = _drop_block(lines, root, "provenance")
        while lines and not lines[-1].strip():
            lines.pop()
        block = yaml.safe_dump(
            {"provenance": dict(provenance)}, sort_keys=False, default_flow_style=False, width=100
        )
        lines += ["", "# Written by `inspector profile fit`; see docs/preferences.md."]
        lines += block.rstrip("\n").split("\n") + [""]
    out = "\n".join(lines)
    load_profile_text(out, file, plugins=plugins, warn=False)  # never write a broken profile
    return out


def _edit(node: YNode, value: float, lines: list[str], file: str) -> tuple[int, int, str, str]:
    if node.kind != "scalar" or node.style is not None:
        raise ProfileError(
            "cannot rewrite a quoted or nested value in place",
            file=file,
            line=node.line,
            column=node.column,
        )
    old = node.raw
    here = lines[node.line - 1][node.column - 1 : node.column - 1 + len(old)]
    if not old or here != old:
        raise ProfileError(
            "cannot rewrite this value in place (it spans lines?)",
            file=file,
            line=node.line,
            column=node.column,
        )
    return node.line, node.column, old, format_number(value)


def _drop_block(lines: list[str], root: YNode, key: str) -> list[str]:
    """``lines`` without the top-level ``key`` and its value (and the comment before it)."""
    if key not in root.keys:
        return lines
    start = root.keys[key].line  # 1-based
    later = [n.line for k, n in root.keys.items() if n.line > start]
    end = min(later) if later else len(lines) + 1  # first line kept (1-based)
    # Comment lines at column 1 just above the next key belong to it.
    while end - 1 > start and lines[end - 2].startswith("#"):
        end -= 1
    # The comment line this module writes above the block goes with it.
    if start >= 2 and lines[start - 2].startswith("# Written by `inspector profile fit`"):
        start -= 1
    return lines[: start - 1] + lines[end - 1 :]
