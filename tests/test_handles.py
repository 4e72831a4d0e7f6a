"""Entries are plain records and Variables are handles (issue 27): an Ops and its Variables are
freed by reference counting alone, with the cycle collector off, as soon as the user drops them,
in every habit; an entry keeps only the values its rules read.

Each habit below runs 20 times with the collector paused; after each run the weak references to
the Ops it recorded on (and to an intermediate array no rule reads) must be dead.
"""

from __future__ import annotations

import ast
import gc
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from test_training_memory import collector_paused

import simplegrad as sg

X = np.random.default_rng(0).standard_normal((6, 6))
ENGINE = Path(sg.__file__).parent / "engine"


def _seen(refs: list) -> Callable:
    """A function noting weak references to the Ops it records on and to its first
    intermediate value (``x @ x``, which no rule of tanh or matmul reads)."""
    def f(x):
        y = x @ x
        refs.append(weakref.ref(y.rec))
        refs.append(weakref.ref(y.raw))
        return (y.tanh() ** 2).sum()
    return f


def fresh_ops(refs: list) -> None:
    op = sg.Ops()
    x = op.var(X)
    L = _seen(refs)(x)
    g = op.grad(L, x)
    op.grad((g * g).sum(), x)


def with_block(refs: list) -> None:
    with sg.Ops() as op:
        x = op.var(X)
        op.grad(_seen(refs)(x), x, create_graph=False)


def held_and_released(refs: list, op: sg.Ops = sg.Ops()) -> None:     # noqa: B008 (held)
    x = op.var(X)
    op.grad(_seen(refs)(x), x)
    op.release()
    refs.pop(0)         # (the held Ops lives on by design: only its arrays must go)


def functional_grad(refs: list) -> None:
    sg.grad(_seen(refs))(X)


def functional_hessian(refs: list) -> None:
    sg.hessian(_seen(refs))(X[:2, :2])


def vmap_of_grad(refs: list) -> None:
    sg.vmap(sg.grad(lambda v: _seen(refs)(v.reshape((2, 2)))))(X[:3, :4])


def jitted(refs: list, jf: list = []) -> None:   # noqa: B006 (one sg.jit across the runs)
    if not jf:
        jf.append(sg.jit(lambda x: sg.grad(_seen(jf[1]))(x)))
        jf.append(None)
    jf[1] = refs
    n = 2 + len(jf)
    jf.append(0)
    jf[0](np.ones((n, n)))      # a new shape each run: recorded again, and each recording freed


def fresh_jit(refs: list) -> None:
    sg.jit(sg.grad(_seen(refs)))(X)


def parameter_backward(refs: list, p: sg.Parameter = sg.Parameter(X)) -> None:  # noqa: B008
    p.grad = None
    _seen(refs)(p).backward()


def reads_its_own_variable(refs: list) -> None:
    op = sg.Ops()
    x = op.var(3.0)
    refs.append(weakref.ref(op))
    g = op.grad(x * x, x)       # d(x*x)/dx: a gradient computed from x itself
    assert g.value == 6.0 and x.grad is g


def failing_fresh_ops(refs: list) -> None:
    op = sg.Ops()
    refs.append(weakref.ref(op))
    with pytest.raises(sg.ShapeError):
        op.var(X) + op.var(np.ones(4))


def failing_grad(refs: list) -> None:
    def f(x):
        refs.append(weakref.ref(x.rec))
        return (x + np.ones(4)).sum()
    with pytest.raises(sg.ShapeError):
        sg.grad(f)(X)


HABITS = [fresh_ops, with_block, held_and_released, functional_grad, functional_hessian,
          vmap_of_grad, jitted, fresh_jit, parameter_backward, reads_its_own_variable,
          failing_fresh_ops, failing_grad]


@pytest.mark.parametrize("habit", HABITS, ids=lambda h: h.__name__)
def test_every_habit_is_freed_by_reference_counting(habit: Callable) -> None:
    with collector_paused():
        gc.collect()
        for _ in range(20):
            refs: list = []
            habit(refs)
            assert refs, "the habit saw no Ops"
            alive = [r for r in refs if r() is not None]
            assert not alive, f"{habit.__name__}: still alive after the call: {alive}"


def test_an_entry_keeps_only_what_its_rules_read() -> None:
    op = sg.Ops()
    x = op.var(X)
    z = x @ x
    h = z.tanh()
    assert z.node.raw is None           # matmul saves its inputs, tanh its output: not z
    assert h.node.raw is h.raw and x.node.raw is x.raw
    gone = weakref.ref(z.raw)
    del z
    assert gone() is None               # freed with its Variable, while the tape lives
    (g,) = op.grad(h.sum(), [x])        # and the gradient needs none of it
    G = 1 - np.tanh(X @ X) ** 2         # dL/dz; z = x x: dL/dx = G x^T + x^T G
    np.testing.assert_allclose(g.value, G @ X.T + X.T @ G, rtol=1e-12)


def test_a_freed_value_is_replayed_never_wrong() -> None:
    op = sg.Ops()
    x = op.var(X)
    z = x @ x
    h = (z * 2.0).exp()
    del z
    entry = h.node.in0.in0              # z's entry: mul reads it, so it keeps it...
    assert entry.raw is not None
    freed = h.node.in0                  # ...but z * 2.0's value no rule reads
    assert freed.raw is None
    np.testing.assert_array_equal(freed.value, (X @ X) * 2.0)   # replayed when asked
    assert "<freed>" not in op._repr_html_()


def test_the_engine_has_no_face_finaliser_or_weak_entries() -> None:
    for path in sorted(ENGINE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                assert node.name != "__del__", f"{path.name}: __del__"
            if isinstance(node, ast.ClassDef):
                assert not node.keywords, f"{path.name}: class {node.name} has a metaclass"
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("finalize", "orphan", "face", "forget_trace"), \
                    f"{path.name}: {node.attr}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "ref" and len(node.args) > 1:
                raise AssertionError(f"{path.name}: a weak reference with a callback")
