"""What every benchmark shares: arguments, CPU pinning, paths, saved results, the report.

* Arguments: :func:`parser` (description from the module docstring, ``--quick``, the
  report options ``--no-write`` / ``--doc``), :func:`non_negative_int`.
* CPU: :func:`one_core` pins the process to one CPU and every library to one thread;
  :func:`torch_threads` sets torch's thread counts; :func:`load_average`.
* Paths: :data:`ROOT`, :data:`RESULTS` (saved results, in git), :data:`RUNS` (models,
  ignored), :data:`DOC`, :func:`magnetic_tile_root` (the real footage).
* Results: every saved result is a JSON object that carries the configuration that
  produced it under ``"benchmark"`` (:func:`save_result`); studies find their results
  by that configuration (:func:`load_results`, :func:`find_result`), never by parsing
  file names (file names only keep the folders readable).
* Report: each benchmark owns the block between ``<!-- begin:NAME -->`` and
  ``<!-- end:NAME -->`` of docs/benchmarks.md (:func:`write_section`, :func:`table`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = ROOT / "runs"
#: Version of the ``"benchmark"`` block of a saved result.
SCHEMA = 1
HEADER = (
    "# Benchmarks\n\n"
    "Every figure below was measured by the script and command named in its section, "
    "on the machine named there; ratios are against a baseline measured in the same run.\n"
    "\n"
    "The studies (`benchmarks.studies.*`) save their results under benchmarks/results/, each "
    "file carrying the configuration that produced it; their sections regenerate from "
    "those files with the section's command plus `--report-only` (nothing is trained, "
    "and the section keeps its Measured line).\n"
)


# -- arguments ------------------------------------------------------------------------
def parser(doc: str | None, quick: str | None = None, full_doc: bool = False):
    """An argument parser with the options every benchmark has.

    :param doc: the script's module docstring: its first paragraph is the description
        (all of it with ``full_doc``).
    :param quick: help of ``--quick`` (None: no such option).
    :returns: an :class:`argparse.ArgumentParser` with ``--quick`` (if asked),
        ``--no-write`` and ``--doc``.
    """
    text = doc or ""
    kw: dict[str, Any] = {"prog": prog} if (prog := command_name()) else {}
    if full_doc:
        ap = argparse.ArgumentParser(
            description=text, formatter_class=argparse.RawTextHelpFormatter, **kw
        )
    else:
        ap = argparse.ArgumentParser(description=text.split("\n\n")[0], **kw)
    if quick is not None:
        ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    ap.add_argument(
        "--doc", type=Path, default=DOC, help="the report to write (default docs/benchmarks.md)"
    )
    return ap


def command_name() -> str | None:
    """``python -m benchmarks....`` for the module this process runs (None when it runs
    none, as under pytest)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", "") or ""
    if not name.startswith("benchmarks."):
        return None
    return "python -m " + name.removesuffix(".__main__")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


# -- CPU ------------------------------------------------------------------------------
def one_core() -> str:
    """Pin this process to one CPU and every library to one thread; say what was done."""
    import cv2

    cv2.setNumThreads(1)
    notes = ["cv2.setNumThreads(1)"]
    try:
        import torch

        torch.set_num_threads(1)
        notes.append("torch.set_num_threads(1)")
    except ImportError:
        pass
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        notes.append(f"pinned to CPU {cpu}")
    return ", ".join(notes)


def torch_threads(threads: int, interop: int | None = None) -> int:
    """Set torch's intra-op threads (and inter-op ones when given); return the count set."""
    import torch

    torch.set_num_threads(threads)
    if interop is not None:
        torch.set_num_interop_threads(interop)
    return threads


def load_average() -> float:
    """The 1-minute load average (nan where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


# -- paths ----------------------------------------------------------------------------
def magnetic_tile_root() -> Path | None:
    """The magnetic-tile data set folder (holding ``splits.csv``), or None when absent.

    ``INSPECTOR_DATA`` may point at the data set itself or at a folder that holds
    ``magnetic-tile``; else ``../shared/datasets/magnetic-tile`` beside the repository.
    """
    candidates = []
    env = os.environ.get("INSPECTOR_DATA")
    if env:
        candidates += [Path(env), Path(env) / "magnetic-tile"]
    candidates.append(ROOT.parent / "shared" / "datasets" / "magnetic-tile")
    for c in candidates:
        if (c / "splits.csv").is_file():
            return c
    return None


# -- results --------------------------------------------------------------------------
@dataclass(frozen=True)
class Saved:
    """One saved result.

    :param path: its file.
    :param config: the configuration that produced it (``"benchmark"."config"``).
    :param data: the whole JSON object (the result's figures at its top level).
    """

    path: Path
    config: dict[str, Any]
    data: dict[str, Any]

    def matches(self, **want: Any) -> bool:
        """Whether every ``key=value`` given equals the configuration's."""
        return all(self.config.get(k, _MISSING) == _plain(v) for k, v in want.items())


_MISSING = object()


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def with_config(study: str, config: Mapping[str, Any], result: Mapping[str, Any]) -> dict:
    """``result`` with its configuration attached under ``"benchmark"``."""
    block = {"study": study, "schema": SCHEMA, "config": _plain(dict(config))}
    return {"benchmark": block, **{k: v for k, v in result.items() if k != "benchmark"}}


def save_result(
    path: Path, study: str, config: Mapping[str, Any], result: Mapping[str, Any]
) -> dict:
    """Write ``result`` with its configuration to ``path`` (atomically); return what was
    written.

    :param study: the study's name (``quality_magnetic_tile`` ...).
    :param config: what produced the result: every setting a reader selects it by.
    """
    data = with_config(study, config, result)
    write_json(path, data)
    return data


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` (atomically: the product's one write)."""
    from inspector.files import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=1))


def read_result(path: Path) -> Saved:
    """One saved result; a file without a ``"benchmark"`` block has an empty config."""
    data = json.loads(Path(path).read_text())
    block = data.get("benchmark") or {}
    return Saved(Path(path), dict(block.get("config") or {}), data)


def load_results(folder: Path, study: str | None = None, **want: Any) -> list[Saved]:
    """Every result saved directly in ``folder`` (file-name order) whose configuration
    has every ``key=value`` of ``want``; with ``study``, only that study's."""
    out = []
    for path in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        saved = read_result(path)
        block = saved.data.get("benchmark") or {}
        if study is not None and block.get("study") != study:
            continue
        if saved.matches(**want):
            out.append(saved)
    return out


def find_result(folder: Path, study: str, **want: Any) -> Saved | None:
    """The saved result in ``folder`` whose configuration is exactly ``want``, or None."""
    want_plain = _plain(want)
    for saved in load_results(folder, study):
        if saved.config == want_plain:
            return saved
    return None


# -- report ---------------------------------------------------------------------------
def machine() -> str:
    """A short description of the machine the figures come from."""
    cpus = os.cpu_count()
    return f"{platform.machine()}, {cpus} CPUs, Python {platform.python_version()}"


def section_pattern(name: str) -> re.Pattern[str]:
    """The block of section ``name`` in the report."""
    return re.compile(
        rf"<!-- begin:{re.escape(name)} -->.*?<!-- end:{re.escape(name)} -->\n?", re.S
    )


def measured_line(name: str, doc: Path = DOC) -> str | None:
    """The ``Measured: ...`` line of section ``name`` as it stands in ``doc``, or None."""
    if not doc.is_file():
        return None
    m = section_pattern(name).search(doc.read_text())
    found = re.search(r"^Measured: .*$", m.group(0), re.M) if m else None
    return found.group(0) if found else None


def write_section(
    name: str,
    title: str,
    body: str,
    command: str | None = None,
    doc: Path = DOC,
    keep_measured: bool = False,
) -> Path:
    """Replace (or append) the section ``name`` of the report.

    :param name: section key, e.g. ``camera``.
    :param title: the section heading.
    :param body: markdown: the tables and notes.
    :param command: the command that reproduces the figures (default: this process's argv).
    :param doc: the report file (default docs/benchmarks.md).
    :param keep_measured: keep the section's ``Measured:`` line (a report regenerated
        from saved results: the figures were measured then, not now).
    """
    command = command or "python " + " ".join(sys.argv)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    measured = f"Measured: {stamp} on {machine()}"
    if keep_measured:
        measured = measured_line(name, doc) or measured
    block = (
        f"<!-- begin:{name} -->\n## {title}\n\n"
        f"Command: `{command}`  \n{measured}\n\n{body.rstrip()}\n"
        f"<!-- end:{name} -->\n"
    )
    doc.parent.mkdir(parents=True, exist_ok=True)
    text = doc.read_text() if doc.exists() else HEADER
    pattern = section_pattern(name)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = text.rstrip() + "\n\n" + block
    from inspector.files import write_atomic

    write_atomic(doc, text)
    return doc


def report_recorded(
    folder: Path,
    study: str,
    title: str,
    report: Callable[[list[dict]], str],
    args: argparse.Namespace,
) -> int:
    """The ``record``/``report`` verbs' common end, for a study that records finished runs:
    rewrite its section from every result of ``study`` saved in ``folder``.

    :param report: the section's markdown from the saved results' data.
    :param args: the parsed command line (``verb``, ``no_write``, ``doc``).
    :returns: the exit status (2 when nothing is recorded).
    """
    results = [s.data for s in load_results(folder, study)]
    if not results:
        print("no recorded runs", file=sys.stderr)
        return 2
    body = report(results)
    print(body)
    if not args.no_write:
        write_section(
            study,
            title,
            body,
            command=f"python -m benchmarks.studies.{study} report",
            doc=args.doc,
            keep_measured=args.verb == "report",
        )
    return 0


def table(header: list[str], rows: list[list[object]]) -> str:
    """A markdown table."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"
