"""The documentation's generated lists match the code: the primitive table (docs/using.md) and
the numpy functions (docs/numpy.md).

Both are read from the code at test time (``sg.REGISTRY``, ``numpy_api.covered()``), so a
primitive added without its line in the table, or a listed name that is neither a registered
primitive nor an Ops method of a family, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import simplegrad as sg
from simplegrad.primitives import PrimitiveMethods, numpy_api

DOCS = Path(__file__).resolve().parents[1] / "docs"
PRIMITIVES_PAGE = DOCS / "using.md"
NUMPY_PAGE = DOCS / "numpy.md"


def primitive_table() -> dict[str, set[str]]:
    """family -> primitive names: backticked identifiers outside parentheses, second column."""
    text = PRIMITIVES_PAGE.read_text().split("\n## Primitives\n", 1)[1]
    block = re.search(r"(?:^\|.*\n)+", text, flags=re.M)       # the first table after it
    rows = re.findall(r"^\| ([^|]+) \| (.+) \|$", block.group(0) if block else "", flags=re.M)
    table = {}
    for family, cell in rows:
        if family.strip() in ("family", "---"):
            continue
        previous = None
        while previous != cell:                    # drop remarks, innermost first
            previous, cell = cell, re.sub(r"\([^()]*\)", "", cell)
        words = " ".join(re.findall(r"`([^`]+)`", cell)).split()
        table[family.strip()] = {w for w in words if re.fullmatch(r"[a-z_][a-z0-9_]*", w)}
    return table


def test_primitive_table_lists_exactly_the_registry():
    table = primitive_table()
    assert table, "the primitive table of docs/using.md was not found"
    listed = set().union(*table.values())
    missing = sorted(set(sg.REGISTRY) - listed)
    # a row may also name the methods a family records with its primitives (``op.dot``)
    methods = {n for n in dir(PrimitiveMethods) if not n.startswith("_")}
    extra = sorted(listed - set(sg.REGISTRY) - methods)
    assert not missing, f"registered but not in docs/using.md's primitive table: {missing}"
    assert not extra, f"in docs/using.md's primitive table but neither registered nor an Ops " \
                      f"method: {extra}"


def test_primitive_table_names_each_primitive_once():
    table = primitive_table()
    names = [n for family in table.values() for n in family]
    assert len(table) >= 5 and len(names) == len(set(names))


def test_docs_list_exactly_the_numpy_functions_that_record():
    listed = re.search(r"<!-- numpy functions: generated -->\n(.*?)\n<!-- end -->",
                       NUMPY_PAGE.read_text(), flags=re.S)
    assert listed, "docs/numpy.md lost the markers of its generated list of numpy functions"
    names = re.findall(r"`([\w.]+)`", listed.group(1))
    assert names == numpy_api.covered(), (
        "docs/numpy.md's list of numpy functions that record is out of date: regenerate it with "
        "python -c \"import simplegrad.primitives.numpy_api as m; print(m.readme_list())\"")
