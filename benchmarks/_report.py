"""Write one benchmark's section of docs/benchmarks.md, leaving the others alone.

Each script owns the block between ``<!-- begin:NAME -->`` and ``<!-- end:NAME -->``.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = (
    "# Benchmarks\n\n"
    "Every figure below was measured by the script and command named in its section, "
    "on the machine named there; ratios are against a baseline measured in the same run.\n"
)


def machine() -> str:
    """A short description of the machine the figures come from."""
    cpus = os.cpu_count()
    return f"{platform.machine()}, {cpus} CPUs, Python {platform.python_version()}"


def write_section(name: str, title: str, body: str, command: str | None = None) -> Path:
    """Replace (or append) the section ``name`` of docs/benchmarks.md.

    :param name: section key, e.g. ``camera``.
    :param title: the section heading.
    :param body: markdown: the tables and notes.
    :param command: the command that reproduced the figures (default: this process's argv).
    """
    command = command or "python " + " ".join(sys.argv)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    block = (
        f"<!-- begin:{name} -->\n## {title}\n\n"
        f"Command: `{command}`  \nMeasured: {stamp} on {machine()}\n\n{body.rstrip()}\n"
        f"<!-- end:{name} -->\n"
    )
    DOC.parent.mkdir(parents=True, exist_ok=True)
    text = DOC.read_text() if DOC.exists() else HEADER
    pattern = re.compile(
        rf"<!-- begin:{re.escape(name)} -->.*?<!-- end:{re.escape(name)} -->\n?", re.S
    )
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = text.rstrip() + "\n\n" + block
    tmp = DOC.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(DOC)
    return DOC


def table(header: list[str], rows: list[list[object]]) -> str:
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"
