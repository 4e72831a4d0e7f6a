"""The README's Python examples run as written, and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re
import warnings
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(_blocks()) >= 8


def test_readme_examples_run_in_order():
    namespace: dict = {}
    out = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(out):
        warnings.simplefilter("ignore", RuntimeWarning)
        for block in _blocks():
            exec(compile(block, str(README), "exec"), namespace)  # noqa: S102
    printed = out.getvalue()
    # a few printed results, checked against their closed forms
    assert "[ 3. 12.]" in printed
    assert str(-np.sin(0.5)) in printed
    assert "515.05 527.86 515.06" in printed
    assert "[0.   0.5  0.25 0.  ]" in printed
    assert "dv3_dv0 = v10" in printed
    assert "8 (3, 3)" in printed
    assert "[0.33333333 0.08333333]" in printed
    assert "order 2, mode rev" in printed
    assert "[[ 1.05263158 -0.35087719]" in printed       # 2 inv(m22), by nested jvps
    assert "[1. 3.]" in printed and "['v0 = eigh(A).eigenvalues', 'v1 = eigh(A).eigenvectors']" \
        in printed                                          # eigh: values and trace
    assert "[[-0.125  0.125]\n [-0.75   0.75 ]]" in printed   # numpy code through sg.grad
    assert "[ 0.00080799 -0.63970001] (array(1.),)" in printed       # pytrees
    assert "3 TreeDef({'W': *, 'b': *, 'scale': (*,)})" in printed
    assert "f sees (3,)\n[2.689649 2.284782]\n(2, 2, 3)\nTrue\n" in printed     # vmap
    assert "[[ 3. -2.]\n [-2.  1.]]" in printed                       # hessian_batched
    assert "(2, 2, 3) (2, 2)\nTrue\n" in printed                     # vmap of a closure
    assert printed.count("accuracy 1.00") == 2                        # nn and optim, both habits
    assert "v17 = v10 * 2.0\nv24 = v17 * v1\n" in printed      # sg.simplify's output
    assert "-0.479425538604203" in printed                    # a replay keeps its branch
    # programs out: graph, stats, Jacobian accumulation counts, saved, compiled
    assert "20 30\ngradient 2 v12 = v11 * v6\n" in printed
    assert "['v2', 'v3', 'v5', 'v6', 'v12', 'v14', 'v18', 'v22', 'v25']" in printed
    assert ("16 entries (mul 8, add 6, expand 2); order 0: 1, order 1: 4, order 2: 11; depth 8, "
            "widest level 3; peak live intermediates 192 bytes") in printed
    assert ("JacobianCost(forward=10, reverse=10, markowitz=8, inputs=4, outputs=4, "
            "intermediates=4, edges=10)") in printed
    assert 'True\n[ 2.692   4.9204 13.6568  8.0724]\n  {"name": "v0", "primitive": "add"' in printed
    assert "def seed_grad2(a, b):\n    # v3 = [1.0000, 1.0000, 1.0000, 1.0000]" in printed
    assert "1360230.720779263" in printed                     # Taylor mode, order 12
