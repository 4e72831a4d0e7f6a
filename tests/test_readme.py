"""The documentation's Python examples run as written, and print what their comments say.

The README's blocks run in order in one namespace; so does each page of the documentation site
(docs/*.md), each page in a fresh namespace of its own: every page imports what it uses, and
the pages that work on the seed's grad-of-grad program (graphs, saved programs, compiled
source) each build it in their first block, so no page relies on another. What each prints is
checked against closed forms and the values the comments show.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"

# For each file with Python blocks, printed text that must appear in its output, in order of
# the page. A page that gains its first Python block needs an entry here.
EXPECTED: dict[str, list[str]] = {
    "README.md": ["[1.261  2.1306 5.8396 3.3868]\n26\n"],
    "operators.md": ["True\nTrue\nTrue\nTrue\n(5,)\nTrue\n1.0\n[-0.347107, 0.277614, 0.03669]\n"
                     "True\nTrue\n"],
    "using.md": [
        "[1.261  2.1306 5.8396 3.3868]",
        "[ 1.5 -2.   0.5] 0.3",                                  # Parameters, by SGD
        "[0.33333333 0.08333333]",                              # cbrt'(x) = x^(-2/3) / 3
        "[ 6.  2. 12.] [3. 2. 3.]\n[1. 4. 3.] [1. 2. 3.]\nv25 = x.at[1].set(v24)\n",  # .at
        "[0.   0.5  0.25 0.  ]\n[ 0.      -0.25    -0.03125  0.     ]",   # safe gradients
    ],
    "derivations.md": [
        "v3 = v2.expand([4])    # d(L0 = v1.sum())/dv1\n",
        "first inf: v8 = v7 / dx, in gradient block dL1 (order 2); it computes "
        "d(v5 = dx.log())/ddx",
        "dL_dW = v8\n------------------\ndW = v8\n",           # pruned, named by alias
        "v3 = v2.expand([2])    # d(L = v1.sum())/dv1 | known: ['L', 'v1']\n"
        "v4 = v3 * x    # d(v1 = v0 * x)/dv0 | known: ['L', 'v0', 'v1']\n",
        "True\nsg.diff: sg.grad (left) against by hand (right)\n"
        "equal: the same expressions of the inputs (by structure)\n",   # sg.diff: outputs match
        *(["equal: SymPy simplifies each output's difference to 0\n"      # a right tanh''
           "NOT equal: at random point 1 of 5: output 0 is -0.7659820127 (a)"]
          if importlib.util.find_spec("sympy") is not None else []),
    ],
    "step-by-step.md": [
        "0 [0.4605 0.4061 0.9422 0.3946]\ninputs: a, b\nv0 = a + b\nv1 = v0 * b\n",
        "v6 = v5 + v4    # accumulation of dL0/db\n",
        "v3 = v2.expand([4])\nv4 = v3 * b\nv5 = v3 * v0\nv6 = v5 + v4\noutputs: v4, v6\n",
        "'L1 = v9.sum()', 'outputs: L1']\n20\n[1.261  2.1306 5.8396 3.3868]\n",
        "v25 = v18 + v14\noutputs: v14, v25\n",
        "[array([6., 6., 6., 6.]), array([14., 14., 14., 14.])]\nTrue\n",  # closed forms
    ],
    "transforms.md": [
        "[ 3. 12.]", str(-np.sin(0.5)), "[[2.71828183 0.         0.        ]",
        "[1.         0.41997434]", str(np.sin(0.5)), "(array([2., 2.]),)",
        "v5 = v4 * v0\nv6 = v5 * 2.0\n", "dv3_dv0 = v6",              # recorded simplified
        "[33. 44.] 11.0",                                       # has_aux, keyword arguments
        "12.0\n(2, 2, 2)\n",
        "[0.         1.38177329]",                              # linearize: sin x + x cos x
        "[3. 3.]\n[2. 2.]\n",                                   # composed transforms
    ],
    "loops.md": ["2.143588810000001 15.589736800000008 2459.688000000001\nx = 1.1000\n",
                 "    body square.reverse:\n", "10000.0 11 [ 1.0e+02  5.0e-03 -2.5e-07  3.8e-11]",
                 "[-0.52490662  0.78735994 -1.1810399   1.77155985]\n" * 2],
    "forward-taylor.md": [
        "[1.         0.41997434]",                              # jvp of tanh: 1 - tanh^2
        "(array([0.91821682, 1.38177329]),)",                   # linear_transpose: sin x + x cos x
        "(array([-3., -3., -3.]),)",                            # A.T @ [1, -1]
        "[ 0.479426  0.877583 -0.479426 -0.877583  0.479426]",
        "1360230.720779263", "3.72248581661372", "-3.365883939231586",
        "[array(10.), array(40.), array(80.), array(0.)]\n"
        "[array(0.), array(0.), array(80.), array(480.)]\n",   # closures: JAX's jet terms
        "[[ 1.05263158 -0.35087719]",                           # 2 inv(m22), by nested jvps
    ],
    "linalg.md": [
        "[[ 3. -1.]\n [-1.  2.]]\n[[ 4. -2.]\n [-2.  1.]]",   # adj(A)^T, also when singular
        "[1. 3.]", "['v0 = eigh(A).eigenvalues', 'v1 = eigh(A).eigenvectors']",
        "[[2. 0.]\n [0. 8.]]",
        "[1. 1. 3.]\n[10. 30. 20.]\n",                          # sort: stable ties
        "[0. 0. 0. 0.]\n[0. 0. 0. 6.]\n[1. 2. 8.] 2.333333333333333\n",
        "[0.1 0.5 0.9]", "[1. 3. 3. 3.] [1. 3. 0. 0.]",
    ],
    "dask.md": [
        "Array (3,)\nTrue\n",                                   # lazy, equal to numpy's replay
    ] if importlib.util.find_spec("dask") is not None else [],
    "numpy.md": [
        "[[-0.125  0.125]\n [-0.75   0.75 ]]",                   # numpy code through sg.grad
        "10.0625\n[0.    0.875 1.5   0.875 0.5  ]\n",
        "[0. 7. 9.]\n", "[16.  0.  0.  0.]",                  # indexing by a recorded integer
    ],
    "custom.md": [
        "[1.]\n",                                               # softplus at 800: no nan
        "[[0.5 0. ]\n [0.  0.5]]",                              # defjvp: clipped Hessian
        "2.0\n-0.0\n",                                         # JAX's defvjp(fwd, bwd)
        "[0.4 3.6]\n[3.]\n",                                    # straight-through round
        "8 (3, 3)",                                             # 8 checkpoint entries
    ],
    "checks.md": [
        "order 2, mode rev",
        "515.05 527.86 515.06",
        "3.286246235640186",
    ],
    "pytrees.md": [
        "[ 0.00080799 -0.63970001] (array(1.),)",
        "3 TreeDef({'W': *, 'b': *, 'scale': (*,)})",
        "[ 6.2 -0.6]\n[ 1.   2.   0.5 -1.   0.1  0.2]\n(6, 6)\n",
    ],
    "vmap.md": [
        "f sees (3,)\n[2.689649 2.284782]\n(2, 2, 3)\nTrue\n",
        "(3, 4) 3.0\n(3, 2)\n",
        "(2, 2, 3) (2, 2)\nTrue\n",                              # vmap of a closure
        "[ 5. 25.]\n[[1. 2.]\n [3. 4.]]\nvmap: .value of v0 needs one example's value",
        "[[ 3. -2.]\n [-2.  1.]]",                              # hessian_batched
    ],
    "training.md": ["accuracy 1.00", "['0.bias', '0.weight', '2.bias', '2.weight']"],
    "programs.md": [
        "25 17\n",
        "v17 = v10 * 2.0\nv24 = v17 * v1\n",                    # the readable program
        "0.24740395925452294\nthis program was recorded where `w = u.sin() if u > 0 else "
        "u.cos()` (at programs.md:",                            # a replay checks its branch
        "was True; at these inputs it is False: record it again, or write the branch with "
        "where()\n",
        "True\n['v8 = v7 / 7', 'v9 = v8.expand([7, 1])']\nTrue\n",  # at another batch size
        "flat = reshape(...) reshapes to the literal shape [96]",
        "True\n",                                               # simplify: the same values
        "v45 = v44 * 6.0\nv46 = v42 * 8.0\nv47 = v46 - v45\nv39 = v47 - 2.0\n",  # expand=True
    ],
    "graphs.md": [
        "20 30\ngradient 2 v12 = v11 * v6\n",
        "['v2', 'v3', 'v5', 'v6', 'v12', 'v14', 'v18', 'v22', 'v25']",
        "16 entries (mul 8, add 6, expand 2); order 0: 1, order 1: 4, order 2: 11; depth 8, "
        "widest level 3; peak live intermediates 192 bytes",
        "JacobianCost(forward=10, reverse=10, markowitz=8, inputs=4, outputs=4, "
        "intermediates=4, edges=10)",
    ],
    "saved-programs.md": [
        'True\n[ 2.692   4.9204 13.6568  8.0724]\n  {"name": "v0", "primitive": "add"',
        "load_program: hostile.json: node 0 (v0): add: unknown attribute 'where' (it takes: "
        "none)\nattribute 'axis': is out of range for 2 dimension(s) (got 2)\n",
        "((3, 1), dtype('float32'))\n((4,), dtype('int64'))\n"
        "shapes (3, 4) and (5, 2) do not multiply\n",
    ],
    "compile.md": [
        "def seed_grad2(a, b):\n    # v3 = [1.0000, 1.0000, 1.0000, 1.0000]",
        "[ 2.692   4.9204 13.6568  8.0724]",
        "-186136829308596.12\n        if not (finite(x0_f)): raise ToNumpyError\n"
        "        v1 = float(np.tanh(x0_f))\n",                    # a program of numbers on floats
        "5.0\nReplayError True\n",                               # a compiled program's guard
    ],
    "sparse.md": ["csr_array (8, 8) 22\n##......\n###.....", "9 9\n#...#\n.#.#.\n..#..",
                  "[0 1 2 0 1 2 0 1] [0 1 0 2 0 1 0 2] [0 1 0 1 0 1 0 1]\n01......\n010.....",
                  "(2000, 2000) 5998 True\n(3, 2000)\n", "True 0.1645\nTrue True\n"],
    "complex.md": [
        "(6-8j)\n(6+8j)\nTrue\n(6+12j)\n",                # the cookbook's values, both conventions
        "dv2 2 dL/dz = dL/dx - i dL/dy (JAX convention) ----",
        "v7 = z.conj()    # d(v0 = z.abs())/dz",
        "True\n(4, 4) True\n",                             # the quantum example
        "[-3.4286  0.4734  0.4734  1.1429 -1.1429 -0.4734 -0.4734  3.4286]",
    ],
    "performance.md": [
        "[0.96402758 0.9993293 ] [0.99998771 0.96402758] 1\n"
        "[0.36787944 0.13533528] 2\n",                          # sg.jit: a guard re-records
        "[1.5 6. ] [ 2. 10. 18.]\n",                              # sg.jit: static_argnames
    ],
}


def python_blocks(path: Path) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order."""
    nav = MKDOCS.read_text().split("\nnav:\n", 1)[1]
    return re.findall(r"^\s*- (?:.*: )?(\S+\.md)\s*$", nav, flags=re.M)


def run_blocks(path: Path) -> str:
    """Run a file's Python blocks in order in one fresh namespace; what they printed."""
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore", RuntimeWarning)
        text = path.read_text()
        for m in re.finditer(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
            block = m.group(1)
            if _missing(block):
                continue
            before = text.count("\n", 0, m.start(1))     # the file's line numbers, as
            exec(compile("\n" * before + block, str(path), "exec"), namespace)  # noqa: S102
            # tracebacks and replay guards name them
    return out.getvalue()


def _missing(block: str) -> bool:
    """A block whose first line is ``# needs: <module>`` runs when that optional module is
    installed (the extras: ``dask``)."""
    first = block.split("\n", 1)[0]
    return first.startswith("# needs: ") and importlib.util.find_spec(first[9:].strip()) is None


def _path(name: str) -> Path:
    return README if name == "README.md" else DOCS / name


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    pages = nav_pages()
    assert pages[0] == "index.md" and len(pages) == len(set(pages))
    assert sorted(pages) == sorted(p.name for p in DOCS.glob("*.md"))


def test_every_file_with_examples_has_its_expected_output():
    with_blocks = {p.name for p in DOCS.glob("*.md") if python_blocks(p)}
    assert python_blocks(README)
    assert with_blocks | {"README.md"} == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_examples_run_in_order_and_print_what_they_say(name):
    printed = run_blocks(_path(name))
    position = 0
    for text in EXPECTED[name]:
        found = printed.find(text, position)
        assert found >= 0, f"{name}: {text!r} not printed (after position {position})"
        position = found + len(text)


def test_readme_keeps_its_two_commands_at_the_top():
    top = README.read_text().split("\n\n", 2)[:2]
    assert top == ["# simplegrad", (
        "```bash\n"
        "pip install . && python -m simplegrad          # install, then print the seed "
        "program's trace\n"
        "pip install '.[test]' && python -m pytest      # install with test extras, run the "
        "tests\n```")]


def test_readme_shows_the_demos_derivation_right_after_its_commands():
    from simplegrad.cli import seed_program
    op, _, _ = seed_program(echo=False)
    text = README.read_text()
    after = text.split("```\n", 1)[1]         # past the block of the two commands
    shown = re.search(r"```text\n(.*?)```", after, flags=re.S)
    assert shown and shown.start() < after.index("## "), "the pruned derivation comes first"
    assert shown[1] == op.format_trace(raw=False) + "\n"
    picture = re.search(r"!\[[^\]]*\]\((docs/[\w.-]+\.svg)\)", after)
    assert picture and picture.start() < after.index("## ") and (ROOT / picture[1]).is_file()


def test_readme_links_every_page_and_its_picture_exists():
    text = README.read_text()
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", text))
    assert linked == {p.name for p in DOCS.glob("*.md")}
    for picture in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (ROOT / picture).is_file(), picture


def test_pages_link_only_to_pages_and_pictures_that_exist():
    """What `mkdocs build --strict` checks, for machines without MkDocs: targets and anchors."""
    def anchors(page: Path) -> set[str]:
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
        return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}

    for page in DOCS.glob("*.md"):
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
        text = re.sub(r"`[^`]*`", "", text)                  # code spans hold no links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if target.startswith(("http://", "https://")):
                continue
            file, _, anchor = target.partition("#")
            path = DOCS / file if file else page
            assert path.is_file(), f"{page.name}: link to {target}"
            if anchor:
                assert anchor in anchors(path), f"{page.name}: no anchor #{anchor} in {file}"


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension makes of a heading."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)

