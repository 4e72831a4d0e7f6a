"""The package's layers: imports point down, no cycles, a short top level.

Every import of a simplegrad module by another is read from the source (module level and
inside functions alike; only ``if TYPE_CHECKING:`` blocks are exempt) and placed on the layers
of DESIGN.md "Layout". An import that points up fails unless it is one of the named one-line
facades below, made inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "simplegrad"

# lowest first; a module may import its own layer and the layers below it
LAYERS = {
    "errors": 0, "pytree": 0,
    "primitives": 1,
    "engine": 2,
    "program": 3,
    "transforms": 4,
    "checks": 5, "estimators": 5, "optim": 5, "nn": 5, "distributed": 5,
    "cli": 6, "expression": 6,
    "__init__": 7, "__main__": 7,
}

# the one-line conveniences that reach up, each made inside a method: (importer, imported)
FACADES = {
    ("simplegrad.engine.ops", "simplegrad.program.core"): "op.program(inputs, outputs)",
    ("simplegrad.engine.ops", "simplegrad.program.graph"): "op.to_networkx(outputs)",
}

TOP_LEVEL = {"__init__", "__main__", "errors", "pytree", "checks", "estimators", "optim", "cli",
             "expression", "distributed"}
# modules are drawn by concept; past this many lines a module is worth a second look (a note,
# never a failure)
NOTE_LINES = 700


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    exempt: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            exempt.update(id(n) for n in ast.walk(node))
    return exempt


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(imported module or module.name, made at module level) for each simplegrad import."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    exempt = _type_checking_nodes(tree)
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "simplegrad":
                target = node.module
            else:
                continue
            found += [(f"{target}.{a.name}", id(node) in top) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names
                      if a.name.split(".")[0] == "simplegrad"]
    return found


def _graph() -> dict[str, dict[str, bool]]:
    """importer -> {imported module: made at module level (any of its imports)}."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    edges: dict[str, dict[str, bool]] = {}
    for name, path in paths.items():
        out = edges.setdefault(name, {})
        for target, at_top in _imports(path):
            while target not in paths:      # a name imported from a module: the module
                target = target.rpartition(".")[0]
            if target != name:
                out[target] = out.get(target, False) or at_top
    return edges


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


GRAPH = _graph()


def test_every_module_is_on_a_layer():
    unplaced = sorted(m for m in GRAPH if m.split(".")[1:2] and m.split(".")[1] not in LAYERS)
    assert not unplaced, f"modules on no layer (add them to LAYERS): {unplaced}"


def test_imports_point_down():
    upward = []
    for importer, targets in GRAPH.items():
        for target, at_top in targets.items():
            if _layer(target) <= _layer(importer):
                continue
            if (importer, target) in FACADES and not at_top:
                continue
            where = "at module level" if at_top else "inside a function"
            upward.append(f"{importer} imports {target} ({where})")
    assert not upward, "imports pointing up a layer:\n" + "\n".join(sorted(upward))


def test_facades_are_few_and_used():
    assert len(FACADES) <= 8
    for importer, target in FACADES:
        assert target in GRAPH.get(importer, {}), f"unused facade {importer} -> {target}"


def test_no_import_cycles():
    g = nx.DiGraph((a, b) for a, targets in GRAPH.items() for b in targets)
    cycles = [" -> ".join(c + c[:1]) for c in nx.simple_cycles(g)]
    assert not cycles, "import cycles (lazy imports count):\n" + "\n".join(sorted(cycles))


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_say_what_they_hold(path):
    """No line budget: a module holds one concept, whatever its length, and its docstring names
    it. A long one is noted (printed with ``-s``), never failed."""
    text = path.read_text()
    assert ast.get_docstring(ast.parse(text)), f"{path.name} has no docstring naming its concept"
    lines = len(text.splitlines())
    if lines > NOTE_LINES:
        print(f"note: {path.relative_to(PACKAGE)} has {lines} lines (over {NOTE_LINES})")


def test_top_level_is_the_package_face():
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert modules == TOP_LEVEL, f"top-level modules: {sorted(modules ^ TOP_LEVEL)}"
    assert folders == {"primitives", "engine", "program", "transforms", "nn"}


def test_the_checker_sees_upward_and_lazy_imports(tmp_path):
    """The parser counts imports inside functions and skips only TYPE_CHECKING blocks."""
    global PACKAGE
    pkg = tmp_path / "simplegrad"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "engine" / "__init__.py").write_text("")
    (pkg / "engine" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..transforms import t\n"
        "def f():\n    from ..program.core import Program\n    return Program\n")
    saved, PACKAGE = PACKAGE, pkg
    try:
        found = _imports(pkg / "engine" / "a.py")
    finally:
        PACKAGE = saved
    assert found == [("simplegrad.program.core.Program", False)]
