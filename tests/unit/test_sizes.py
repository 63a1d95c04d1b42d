"""Small files and short functions (DESIGN.md): no module in inspector/ over 500 lines,
no function over 80.

The few that are still larger are listed below with their size today: they may
shrink (then lower or drop the entry), never grow, and nothing new joins them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_MODULE = 500
MAX_FUNCTION = 80

#: Modules still over MAX_MODULE lines: path -> lines today.
MODULES_OVER: dict[str, int] = {}
#: Functions still over MAX_FUNCTION lines: "path:qualified name" -> lines today.
FUNCTIONS_OVER: dict[str, int] = {}


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")


def sizes() -> tuple[dict[str, int], dict[str, int]]:
    modules, functions = {}, {}
    for f in sorted((ROOT / "inspector").rglob("*.py")):
        rel = str(f.relative_to(ROOT))
        text = f.read_text()
        modules[rel] = len(text.splitlines())
        for name, n in _functions(ast.parse(text)):
            functions[f"{rel}:{name}"] = n
    return modules, functions


def test_no_module_over_500_lines():
    modules, _ = sizes()
    over = {m: n for m, n in modules.items() if n > MAX_MODULE}
    grew = {m: n for m, n in over.items() if n > MODULES_OVER.get(m, MAX_MODULE)}
    assert grew == {}, "split these modules (or keep them at their listed size)"


def test_no_function_over_80_lines():
    _, functions = sizes()
    over = {f: n for f, n in functions.items() if n > MAX_FUNCTION}
    grew = {f: n for f, n in over.items() if n > FUNCTIONS_OVER.get(f, MAX_FUNCTION)}
    assert grew == {}, "name the parts of these functions (or keep them at their listed size)"


def test_the_lists_name_only_what_is_still_over():
    """A split module or function leaves the list, so the list cannot hide new growth."""
    modules, functions = sizes()
    assert {m for m in MODULES_OVER if modules.get(m, 0) <= MAX_MODULE} == set()
    assert {f for f in FUNCTIONS_OVER if functions.get(f, 0) <= MAX_FUNCTION} == set()
