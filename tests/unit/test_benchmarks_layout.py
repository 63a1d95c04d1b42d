"""benchmarks/ keeps its house rules, and the harness does what the studies rely on.

Rules (DESIGN.md, issue #28): modules under 500 lines; no ``sys.path`` edits; public
names only from inspector, plugins and camera_drivers; a speed script imports only the
harness, a study only the harness, ``studies/shared.py`` and its own package (no script
imports another); every saved result carries its configuration; the report names no
machine path.
"""

from __future__ import annotations

import ast
import json
import re
from importlib.util import find_spec
from pathlib import Path

import pytest

from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
SOURCES = sorted(p for p in BENCH.rglob("*.py") if "results" not in p.parts)


def imported(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) for every absolute import in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
    return out


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_modules_are_small_and_never_edit_sys_path():
    assert [rel(p) for p in SOURCES if len(p.read_text().splitlines()) > 500] == []
    assert [rel(p) for p in SOURCES if "sys.path" in p.read_text()] == []


def test_only_public_names_from_the_product():
    bad = []
    for path in SOURCES:
        for module, names in imported(path):
            if module.split(".")[0] not in {"inspector", "plugins", "camera_drivers"}:
                continue
            private = [p for p in module.split(".") if p.startswith("_")]
            private += [n for n in names if n.startswith("_")]
            if private:
                bad.append(f"{rel(path)}: {module} {private}")
    assert bad == []


def allowed(path: Path, module: str) -> bool:
    """Whether a benchmarks module may import ``module`` (a ``benchmarks.*`` name)."""
    if module in ("benchmarks", "benchmarks.harness"):
        return True
    parts = path.relative_to(BENCH).parts
    if parts[0] == "studies" and len(parts) > 2:  # a study package
        own = f"benchmarks.studies.{parts[1]}"
        return module == "benchmarks.studies.shared" or module.split(".")[:3] == own.split(".")
    return False


def is_module(name: str) -> bool:
    """Whether ``name`` is an importable module (not a name inside one)."""
    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:  # its parent is a module, not a package
        return False


def test_no_script_imports_another():
    bad = []
    for path in SOURCES:
        for module, names in imported(path):
            if module.split(".")[0] != "benchmarks":
                continue
            # ``from benchmarks.studies import x`` names the module x.
            targets = [f"{module}.{n}" for n in names if is_module(f"{module}.{n}")] or [module]
            bad += [f"{rel(path)}: {t}" for t in targets if not allowed(path, t)]
    assert bad == []


def test_every_imported_benchmarks_module_exists():
    missing = [
        f"{rel(path)}: {module}"
        for path in SOURCES
        for module, _ in imported(path)
        if module.split(".")[0] == "benchmarks" and find_spec(module) is None
    ]
    assert missing == []


def test_every_saved_result_carries_its_configuration():
    files = sorted(p for p in (BENCH / "results").rglob("*.json"))
    assert files
    seen: dict[tuple[Path, str], Path] = {}
    for path in files:
        block = json.loads(path.read_text()).get("benchmark")
        assert block and block["study"] and isinstance(block["config"], dict), rel(path)
        assert block["schema"] == harness.SCHEMA, rel(path)
        key = (path.parent, json.dumps(block["config"], sort_keys=True))
        assert key not in seen, f"{rel(path)} and {rel(seen[key])} carry one configuration"
        seen[key] = path


def test_the_report_names_no_machine_path():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    assert re.findall(r"(?:/work/|/tmp/|/home/|/root/|[A-Z]:\\)\S*", text) == []
    commands = re.findall(r"^Command: `python -m (benchmarks\.[\w.]+)", text, re.M)
    assert commands and all(find_spec(c) is not None for c in commands)


def test_results_are_found_by_their_configuration(tmp_path):
    cfg = {"mode": "quick", "seed": 1, "weights": (0.5, 0.5)}
    harness.save_result(tmp_path / "any_name.json", "s", cfg, {"figure": 2.0})
    harness.save_result(tmp_path / "other.json", "s", {**cfg, "seed": 2}, {"figure": 3.0})
    harness.save_result(tmp_path / "t.json", "t", cfg, {"figure": 4.0})
    found = harness.find_result(tmp_path, "s", **cfg)
    assert found is not None and found.data["figure"] == 2.0
    assert found.config["weights"] == [0.5, 0.5]  # as JSON reads it back
    assert [s.data["figure"] for s in harness.load_results(tmp_path, "s", mode="quick")] == [
        2.0,
        3.0,
    ]
    assert harness.find_result(tmp_path, "s", mode="quick") is None  # exact configs only
    assert harness.read_result(tmp_path / "t.json").config == found.config


def test_a_report_only_section_keeps_its_measured_line(tmp_path):
    doc = tmp_path / "b.md"
    harness.write_section("x", "X", "one\n", command="python -m a", doc=doc)
    first = harness.measured_line("x", doc)
    assert first and first.startswith("Measured: ")
    doc.write_text(doc.read_text().replace(first, "Measured: then on that machine"))
    harness.write_section("y", "Y", "two\n", command="python -m b", doc=doc)
    harness.write_section("x", "X", "three\n", command="python -m c", doc=doc, keep_measured=True)
    text = doc.read_text()
    assert "Measured: then on that machine\n\nthree" in text and "two" in text
    assert "one" not in text and text.count("<!-- begin:x -->") == 1


@pytest.mark.parametrize("text", ["-1", "x"])
def test_non_negative_int_refuses(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        harness.non_negative_int(text)


def test_the_retrain_section_regenerates_from_its_saved_figures(tmp_path):
    from benchmarks.studies.retrain import cli

    doc = tmp_path / "b.md"
    assert cli.main(["--quick", "--report-only", "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert "Command: `python -m benchmarks.studies.retrain --quick`" in text
    assert "| retrained, ok vs defect | 0.685 | 0.833 | 0.410 | 0.040 |" in text
    assert cli.main(["--report-only", "--doc", str(doc)]) == 2  # no full run saved


def test_the_grid_pitches_are_the_synthetic_drivers():
    from benchmarks.studies.learning_efficiency.tasks import GRID_PITCHES
    from camera_drivers.synthetic import _PITCHES

    assert GRID_PITCHES == tuple(sorted(set(_PITCHES)))
