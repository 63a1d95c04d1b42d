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


# --------------------------------------------------------------------------- layers
#
# Bottom up: core -> scan/profile -> env/rrm -> policy -> train, export, footage
# -> station -> workflows -> commands. An import (top level or inside a function)
# only goes down, or sideways inside one layer where SIDEWAYS allows it.

CORE = 0
LAYERS: dict[str, int] = {
    "inspector.profile": 1,
    "inspector.scan": 1,
    "inspector.env": 2,
    "inspector.teacher": 2,
    "inspector.rrm": 2,
    "inspector.policy": 3,
    "inspector.train": 4,
    "inspector.export": 4,
    "inspector.footage": 4,
    "inspector.station": 5,
    "inspector.workflows": 6,
    "inspector.commands": 7,
    "inspector.cli": 7,
}
#: Which unit of a shared layer may import which: the scan takes its settings from
#: the profile, the env asks the scripted teacher and makes the RRM step record,
#: export traces the trained torch
#: policy; train, footage and policy stand alone.
SIDEWAYS = {
    ("inspector.scan", "inspector.profile"),
    ("inspector.env", "inspector.teacher"),
    ("inspector.env", "inspector.rrm"),
    ("inspector.export", "inspector.train"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str) -> str:
    """The layered unit a module belongs to (a package or a module of LAYERS), or core."""
    for name in sorted(LAYERS, key=len, reverse=True):
        if module == name or module.startswith(name + "."):
            return name
    return "core"


def layer(module: str) -> int:
    return LAYERS.get(unit(module), CORE)


def inspector_imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for every import of inspector code in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = module_name(path).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names if a.name.split(".")[0] == "inspector"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] == "inspector":
                out.append((mod, [a.name for a in node.names]))
    return out


def test_imports_only_go_down_the_layers():
    bad = []
    for f in files("inspector"):
        me = module_name(f)
        for mod, names in inspector_imports(f):
            targets = [mod] if mod != "inspector" else [f"inspector.{n}" for n in names]
            for target in targets:
                a, b = unit(me), unit(target)
                if a == b or layer(target) < layer(me) or (a, b) in SIDEWAYS:
                    continue
                bad.append(f"{me} -> {target}")
    assert bad == []


def test_the_layer_rules_named_in_the_design():
    """The rules spelled out, so a change to LAYERS cannot quietly drop one."""
    assert layer("inspector.station.loop") > layer("inspector.train.hybrid")
    assert layer("inspector.policy.load") < layer("inspector.train.torch_policy")
    assert layer("inspector.footage.store") < layer("inspector.station.loop")
    assert layer("inspector.teacher") <= layer("inspector.env") < layer("inspector.train")
    assert layer("inspector.commands.retrain") > layer("inspector.workflows.retrain")
    for low, high in (
        ("inspector.station", "inspector.train"),
        ("inspector.policy", "inspector.train"),
        ("inspector.policy", "inspector.station"),
        ("inspector.footage", "inspector.train"),
        ("inspector.footage", "inspector.station"),
        ("inspector.env", "inspector.train"),
        ("inspector.workflows", "inspector.commands"),
    ):
        assert (low, high) not in SIDEWAYS


def test_no_module_imports_anothers_private_names():
    """A name starting with ``_`` stays in its module (commands share argparse types
    through the module ``commands._args``, whose names are public)."""
    bad = [
        f"{module_name(f)}: {mod}.{n}"
        for f in files("inspector")
        for mod, names in inspector_imports(f)
        for n in names
        if n.startswith("_") and n != "__version__"
    ]
    assert bad == []


def graph_node(module: str) -> str:
    """A layered package counts as one node; a core module as itself."""
    u = unit(module)
    return module if u == "core" else u


def test_no_import_circles():
    """No circle between packages and core modules (lazy imports included)."""
    graph: dict[str, set[str]] = {}
    for f in files("inspector"):
        me = graph_node(module_name(f))
        for mod, names in inspector_imports(f):
            targets = {mod} | {f"{mod}.{n}" for n in names}
            graph.setdefault(me, set()).update(
                graph_node(t)
                for t in targets
                if (ROOT / (t.replace(".", "/") + ".py")).is_file() and graph_node(t) != me
            )
    seen: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in seen:
                visit(nxt, [*stack, nxt])
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node, [node])
    assert cycles == []
