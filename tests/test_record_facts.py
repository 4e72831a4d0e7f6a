"""Every fact of a primitive is on its record: no module outside ``simplegrad/primitives/``
names a primitive, by identity or by name, to special-case it.

The checker reads each module with ``ast`` (so formatting cannot hide a case) and reports:

- an identity test against a primitive record: ``prim is MUL``, ``x.prim is not RESHAPE``
  (a name bound to a registered ``Primitive`` in ``simplegrad.primitives``);
- a comparison of a name with a primitive's name: ``prim.name == "mul"``,
  ``node.prim.name in ("div", "mul")``, ``getattr(p, "name") != "sum"``, also through a local
  (``name = node.prim.name; if name == "expand"``) or a module-level collection of names
  (``COUNTED = ("mean", "std")``; ``prim.name in COUNTED``), or a parameter some call of this
  module passes a name (``linear_in(v.prim.name, ...)``);
- a table keyed by primitive names, read with a name: ``FORMS[prim.name]``,
  ``FORMS.get(node.prim.name)``;
- a registry lookup by a literal: ``REGISTRY["mul"]``, ``REGISTRY.get("sum")``.

``ALLOWED`` names the few places outside ``primitives/`` that may, each with its reason.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterable

import numpy as np
import pytest

import simplegrad
from simplegrad.primitives import REGISTRY, Primitive

PACKAGE = pathlib.Path(simplegrad.__file__).parent

# (module path relative to simplegrad/, the text of the flagged line, stripped) -> reason
ALLOWED: dict[tuple[str, str], str] = {}


def primitive_names() -> set[str]:
    """The names module-level code in ``simplegrad.primitives`` binds to registered records."""
    import importlib
    import pkgutil

    import simplegrad.primitives as prims
    records = {id(p) for p in REGISTRY.values()}
    names = set()
    for info in pkgutil.walk_packages(prims.__path__, prims.__name__ + "."):
        module = importlib.import_module(info.name)
        for k, v in vars(module).items():
            if isinstance(v, Primitive) and id(v) in records:
                names.add(k)
    return names


def _strings(node: ast.AST) -> set[str] | None:
    """The strings of a literal string, or of a tuple/list/set/frozenset/dict literal of them
    (the dict's keys); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("frozenset", "set", "tuple") and len(node.args) == 1:
        return _strings(node.args[0])
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_strings(e) for e in node.elts]
        if items and all(i is not None for i in items):
            return set().union(*items)
    if isinstance(node, ast.Dict) and node.keys:       # its keys; ``**{...}`` spliced in
        keys = [_strings(v if k is None else k) for k, v in zip(node.keys, node.values)]
        if all(k is not None for k in keys):
            return set().union(*keys)
    if isinstance(node, (ast.DictComp, ast.SetComp, ast.ListComp, ast.GeneratorExp)):
        return _strings(node.generators[0].iter)     # {name: ... for name in ("add", ...)}
    return None


def _is_name_of(node: ast.AST, tainted: set[str]) -> bool:
    """Whether ``node`` reads a name: ``<x>.name``, ``getattr(<x>, "name")`` or a local that
    was assigned one."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "getattr" and len(node.args) >= 2 and \
            isinstance(node.args[1], ast.Constant) and node.args[1].value == "name":
        return True
    return isinstance(node, ast.Name) and node.id in tainted


def _record_ref(node: ast.AST, records: set[str]) -> bool:
    """Whether ``node`` names a primitive record: ``MUL``, ``shape.RESHAPE``."""
    if isinstance(node, ast.Name):
        return node.id in records
    return isinstance(node, ast.Attribute) and node.attr in records


def _registry_literal(node: ast.AST) -> bool:
    """``REGISTRY["mul"]`` or ``REGISTRY.get("mul")``."""
    if isinstance(node, ast.Subscript):
        base, key = node.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "get" and node.args:
        base, key = node.func.value, node.args[0]
    else:
        return False
    named = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
    return named == "REGISTRY" and isinstance(key, ast.Constant) and isinstance(key.value, str)


def _table_read(node: ast.AST, tables: set[str], tainted: set[str]) -> bool:
    """``TABLE[prim.name]`` or ``TABLE.get(prim.name)`` for a module-level table by name."""
    if isinstance(node, ast.Subscript):
        base, key = node.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "get" and node.args:
        base, key = node.func.value, node.args[0]
    else:
        return False
    return isinstance(base, ast.Name) and base.id in tables and _is_name_of(key, tainted)


def violations(source: str, records: set[str], prim_names: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each place in ``source`` that special-cases a primitive by identity
    or by name."""
    tree = ast.parse(source)
    lines = source.splitlines()
    # collections of primitive names (COUNTED = ("mean", "std"), a dict keyed by them)
    tables: set[str] = set()
    for stmt in ast.walk(tree):
        targets, value = [], None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        found = _strings(value) if value is not None else None
        if found and found & prim_names:
            tables.update(t.id for t in targets if isinstance(t, ast.Name))
    out: list[tuple[int, str]] = []

    def scan(scope: Iterable[ast.AST]) -> None:
        nodes = [n for s in scope for n in ast.walk(s)]
        # locals holding a name: assigned one, or a parameter of a function of this module
        # that some call passes one (``linear_in(v.prim.name, ...)``)
        tainted = {t.id for n in nodes if isinstance(n, ast.Assign) and
                   _is_name_of(n.value, set()) for t in n.targets if isinstance(t, ast.Name)}
        defs = {n.name: n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for n in nodes:
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in defs:
                params = [a.arg for a in defs[n.func.id].args.posonlyargs +
                          defs[n.func.id].args.args]
                tainted.update(p for p, a in zip(params, n.args) if _is_name_of(a, set()))
        for n in nodes:
            if isinstance(n, ast.Compare):
                sides = [n.left, *n.comparators]
                for op, a, b in zip(n.ops, sides, sides[1:]):
                    if isinstance(op, (ast.Is, ast.IsNot)) and (
                            _record_ref(a, records) or _record_ref(b, records) or
                            _registry_literal(a) or _registry_literal(b)):
                        out.append((n.lineno, "identity test against a primitive record"))
                    if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                        for x, y in ((a, b), (b, a)):
                            if not _is_name_of(x, tainted):
                                continue
                            names = _strings(y)
                            if names and names & prim_names or \
                                    isinstance(y, ast.Name) and y.id in tables:
                                out.append((n.lineno, "comparison with a primitive's name"))
            elif _registry_literal(n):
                out.append((n.lineno, "registry lookup by a literal name"))
            elif _table_read(n, tables, tainted):
                out.append((n.lineno, "table keyed by primitive names"))

    scan([tree])
    return sorted({(line, f"{what}: {lines[line - 1].strip()}") for line, what in out})


def check_package(root: pathlib.Path, records: set[str], prim_names: set[str]
                  ) -> list[tuple[str, int, str]]:
    """Every violation in the modules under ``root`` outside ``primitives/``, less ALLOWED."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("primitives/"):
            continue
        source = path.read_text()
        lines = source.splitlines()
        for line, what in violations(source, records, prim_names):
            if (rel, lines[line - 1].strip()) not in ALLOWED:
                found.append((rel, line, what))
    return found


RECORDS = primitive_names()
PRIM_NAMES = set(REGISTRY)


def test_no_module_outside_primitives_special_cases_a_primitive():
    found = check_package(PACKAGE, RECORDS, PRIM_NAMES)
    assert not found, "special-cased outside primitives/ (put the fact on the record):\n" + \
        "\n".join(f"  simplegrad/{rel}:{line}: {what}" for rel, line, what in found)


def test_no_module_inside_primitives_chooses_a_form_by_a_primitives_name():
    """Inside ``primitives/`` a family's rules may name its own records (``x + -y``), but no
    module picks another primitive's form by its name (``prim.name == "matmul"``): that
    form goes on the record (``LoopForms`` for compiled loops)."""
    found = []
    for path in sorted((PACKAGE / "primitives").rglob("*.py")):
        for line, what in violations(path.read_text(), RECORDS, PRIM_NAMES):
            if what.startswith(("comparison with a primitive's name", "table keyed")):
                found.append(f"  {path.relative_to(PACKAGE)}:{line}: {what}")
    assert not found, "a primitive's form chosen by its name:\n" + "\n".join(found)


def test_loop_forms_are_on_their_records():
    from simplegrad.primitives.loops import kernel_form, step_form
    forms = {name: p.loop_forms for name, p in REGISTRY.items() if p.loop_forms is not None}
    assert {"reshape", "expand", "matmul"} <= set(forms)

    class Node:
        def __init__(self, prim, shape, inputs=(), attrs=None):
            self.prim, self.shape, self.dtype = prim, shape, np.dtype(np.float64)
            self.inputs, self.attrs = inputs, attrs
    a, x = Node(None, (3, 3)), Node(None, (3,))
    matvec = Node(REGISTRY["matmul"], (3,), (a, x))
    assert kernel_form(matvec, [(3, 3), (3,)]) == ("matvec", 0, 1, True)
    assert kernel_form(Node(REGISTRY["reshape"], (9,)), [(3, 3)]) == ("alias",)
    assert kernel_form(Node(REGISTRY["expand"], (2, 3)), [(3,)]) == ("copy",)
    fn, args, arg = step_form(matvec, ["A", "x"], ["fixed", "new"], [(3, 3), (3,)])
    m = np.arange(9.0).reshape(3, 3)
    assert args == ["A"] and arg == "x" and np.array_equal(fn(m)(np.ones(3)), m @ np.ones(3))


def test_allow_list_is_short_and_each_entry_still_applies():
    assert len(ALLOWED) <= 5
    for (rel, text), reason in ALLOWED.items():
        assert reason.strip() and "\n" not in reason
        source = (PACKAGE / rel).read_text()
        assert any(text == line.strip() for _, line in
                   [(ln, source.splitlines()[ln - 1]) for ln, _ in
                    violations(source, RECORDS, PRIM_NAMES)]), f"stale allow-list entry {rel}"


def test_the_records_are_found():
    """The reflection sees the records the engine used to name (an empty set would pass
    every module)."""
    assert {"MUL", "MATMUL", "RESHAPE", "EXPAND", "ADD"} <= RECORDS
    assert {"mul", "matmul", "reshape", "sum", "mean"} <= PRIM_NAMES


PLANTED = '''
import numpy as np
from simplegrad.primitives import REGISTRY
from simplegrad.primitives.elementwise import MUL
from simplegrad.primitives import shape

COUNTED = ("mean", "variance", "std")
FORMS = {"exp": "exp({0})", "tanh": "tanh({0})"}
_SUM = REGISTRY[                                             # BAD: across lines
    "sum"]


def f(prim, node, x):
    if (prim                                                 # BAD: identity, across lines
            is MUL):
        return 1
    if node.prim is not shape.RESHAPE:                       # BAD: through a module
        pass
    if prim.name == "matmul":                                # BAD
        pass
    if "div" != node.prim.name:                              # BAD: reversed
        pass
    if node.prim.name in ("div", "mul"):                     # BAD: a tuple of names
        pass
    if getattr(prim, "name") in {"add"}:                     # BAD: getattr
        pass
    name = node.prim.name
    if name == "expand":                                     # BAD: through a local
        pass
    if node.prim.name not in COUNTED:                        # BAD: a module-level tuple
        pass
    form = FORMS[prim.name]                                  # BAD: a table by name
    other = FORMS.get(node.prim.name)                        # BAD
    s = REGISTRY.get("sum")                                  # BAD
    return form, other, s


LINEAR = {**{n: 1 for n in ("add", "sub")}, "where": 2}


def linear_in(name, n):
    if name == "pad":                                        # BAD: a parameter given a name
        return None
    return LINEAR.get(name)                                  # BAD: a table by comprehension


def g(prim):
    return linear_in(prim.name, 2)


def fine(prim, node, x, spec):
    if prim.linear is not None and prim.commutative:         # facts on the record
        pass
    if REGISTRY.get(prim.name) is prim:                      # "registered?", no name named
        pass
    if x.dtype.name in ("float64", "int32"):                 # not primitive names
        pass
    if spec.name == "x":
        pass
    return prim is None
'''


def test_checker_catches_planted_violations(tmp_path):
    module = tmp_path / "planted.py"
    module.write_text(PLANTED)
    found = violations(module.read_text(), RECORDS, PRIM_NAMES)
    marked = [k + 1 for k, line in enumerate(PLANTED.splitlines()) if "# BAD" in line]
    assert len(marked) == 14
    assert [line for line, _ in found] == marked, found
    kinds = {what.split(":")[0] for _, what in found}
    assert kinds == {"identity test against a primitive record",
                     "comparison with a primitive's name", "registry lookup by a literal name",
                     "table keyed by primitive names"}


def test_checker_runs_over_a_package_tree(tmp_path):
    """check_package skips primitives/ and reports the others' violations with their path."""
    (tmp_path / "primitives").mkdir()
    (tmp_path / "primitives" / "rules.py").write_text("def f(p, MUL):\n    return p is MUL\n")
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "special.py").write_text(
        "def f(p):\n    return p.name == 'mul'\n")
    found = check_package(tmp_path, RECORDS, PRIM_NAMES)
    assert [(rel, line) for rel, line, _ in found] == [("engine/special.py", 2)]


# ---------------------------------------------------------------- the facts hold


def _samples(rng):
    x = rng.normal(size=(3, 4))
    x.flat[:4] = [0.0, -0.0, np.inf, np.nan]
    return x


@pytest.mark.parametrize("prim", [p for p in REGISTRY.values() if p.unit is not None],
                         ids=lambda p: p.name)
def test_unit_leaves_the_other_operand(prim, rng):
    """x f unit (and unit f x where kept) is x, bit for bit where the record says exact
    (-0.0 and nan included), as a value otherwise."""
    x = _samples(rng)
    for i in prim.unit.kept:
        args = [x, float(prim.unit.value)] if i == 0 else [float(prim.unit.value), x]
        with np.errstate(all="ignore"):
            out = prim.forward(*args)
        if prim.unit.exact:
            assert out.tobytes() == x.tobytes(), prim.name
        else:
            np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("prim", [p for p in REGISTRY.values() if p.commutative],
                         ids=lambda p: p.name)
def test_commutative_records_commute(prim, rng):
    x, y = _samples(rng), rng.normal(size=(4,))
    if not prim.differentiable:
        x, y = x > 0, y > 0
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(prim.forward(x, y), prim.forward(y, x))


def test_associative_records_fold_numbers():
    """(x f c1) f c2 == x f associative(c1, c2) for the numbers the simplifier folds."""
    x = np.array([0.3, -1.7, 4.0])
    for prim in (p for p in REGISTRY.values() if p.associative is not None):
        for c1, c2 in ((2.0, 0.5), (3, 4), (-1.5, 2)):
            np.testing.assert_allclose(prim.forward(prim.forward(x, c1), c2),
                                       prim.forward(x, prim.associative(c1, c2)), rtol=1e-15)
