"""DESIGN.md's dependency rules, checked on the source with ast."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"tensorrt", "onnxruntime", "paho", "pycuda", "cuda"}


def imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at_top_level) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top))
    return out


def files(pkg: str) -> list[Path]:
    return sorted((ROOT / pkg).rglob("*.py"))


def test_inspector_never_imports_plugins_drivers_or_deploy():
    bad = [
        (str(f.relative_to(ROOT)), m)
        for f in files("inspector")
        for m, _ in imports(f)
        if m.split(".")[0] in {"plugins", "camera_drivers", "deploy"}
    ]
    assert bad == []


def test_plugins_and_drivers_import_only_inspector_not_each_other():
    bad = []
    for pkg, other in (("plugins", "camera_drivers"), ("camera_drivers", "plugins")):
        for f in files(pkg):
            for m, _ in imports(f):
                if m.split(".")[0] in {other, "deploy"}:
                    bad.append((str(f.relative_to(ROOT)), m))
    assert bad == []


def test_heavy_optional_libraries_are_imported_lazily():
    bad = [
        (str(f.relative_to(ROOT)), m)
        for pkg in ("inspector", "plugins", "camera_drivers")
        for f in files(pkg)
        for m, top in imports(f)
        if top and m.split(".")[0] in HEAVY
    ]
    assert bad == []


def test_no_assert_on_user_input_in_library_code():
    bad = []
    for pkg in ("inspector", "plugins", "camera_drivers"):
        for f in files(pkg):
            tree = ast.parse(f.read_text())
            bad += [
                f"{f.relative_to(ROOT)}:{n.lineno}"
                for n in ast.walk(tree)
                if isinstance(n, ast.Assert)
            ]
    assert bad == []


def test_yaml_is_only_safe_loaded():
    bad = []
    for pkg in ("inspector", "plugins", "camera_drivers", "benchmarks"):
        for f in files(pkg):
            text = f.read_text()
            for needle in ("yaml.load(", "yaml.unsafe_load", "yaml.Loader", "FullLoader"):
                if needle in text:
                    bad.append(f"{f.relative_to(ROOT)}: {needle}")
    assert bad == []
