"""The core engine's contract: leaves, constants, dtypes, op.grad, backward, the tape, names.

Oracles: gradients derived by hand for small polynomials (compared at rtol 1e-12, or
exactly where the arithmetic is exact), numpy's own indexing semantics (``np.add.at``
on zeros is the adjoint of ``x[index]``), and closed-form products for the long chain.
"""

from __future__ import annotations

import gc
import inspect
import operator
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import simplegrad as sg

RTOL = 1e-12


def next_number(op: sg.Ops) -> int:
    """The v-number the next unnamed leaf takes (creating that probe leaf consumes it)."""
    name = op.var(0.0).name
    assert name.startswith("v"), name
    return int(name[1:])


def written(arr: np.ndarray) -> None:
    """Try to write into an array, as a user holding ``.value`` might."""
    arr[...] = 0


# ---------------------------------------------------------------- leaves


@pytest.mark.parametrize("value, dtype", [
    ([1, 2, 3], np.float64),
    (np.arange(3), np.float64),
    (np.arange(3, dtype=np.uint8), np.float64),
    (np.array([True, False]), np.float64),
    (True, np.float64),
    (3, np.float64),
    (2.5, np.float64),
    (np.ones(2, np.float16), np.float16),
    (np.ones(2, np.float32), np.float32),
    (np.float32(1.5), np.float32),
    (np.ones(2), np.float64),
], ids=["int-list", "int64-array", "uint8-array", "bool-array", "bool", "int", "float",
        "float16", "float32", "float32-scalar", "float64"])
def test_var_dtype(value: Any, dtype: type) -> None:
    """Leaves are float numpy arrays: float16/32 kept, everything else float64."""
    op = sg.Ops()
    for x in (op.var(value), op.named_var(value, "x"), op.var(value, name="y")):
        assert type(x.value) is np.ndarray
        assert x.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(x.value, np.asarray(value, dtype=dtype))


@pytest.mark.parametrize("value", [
    np.array([1, None], dtype=object), "abc", ["a", "b"],
], ids=["object", "str", "str-list"])
def test_var_refuses_non_numeric_dtypes(value: Any) -> None:
    """object and string data raise sg.DTypeError (a TypeError)."""
    op = sg.Ops()
    with pytest.raises(sg.DTypeError):
        op.var(value)
    with pytest.raises(TypeError):
        op.named_var(value, "x")
    assert next_number(op) == 0     # nothing was numbered


@pytest.mark.parametrize("value", [np.ones(2, np.complex64), np.ones(2, complex), 1j],
                         ids=["complex64", "complex128", "python-complex"])
def test_var_keeps_complex_dtypes(value: Any) -> None:
    """complex64 and complex128 leaves keep their dtype (docs/complex.md)."""
    x = sg.Ops().var(value)
    assert x.dtype == np.asarray(value).dtype
    np.testing.assert_array_equal(x.value, value)


def test_leaf_is_a_copy() -> None:
    """Mutating the caller's array after making a leaf changes neither value nor gradient."""
    data = np.array([1.0, 2.0, 3.0])
    op = sg.Ops()
    x = op.var(data)
    L = (x * x).sum()
    data[:] = 100.0
    np.testing.assert_array_equal(x.value, [1.0, 2.0, 3.0])
    assert L.value == 14.0
    np.testing.assert_array_equal(op.grad(L, x).value, [2.0, 4.0, 6.0])
    assert data.flags.writeable     # the caller's array is left alone


def _values_to_write(op: sg.Ops) -> dict[str, sg.Variable]:
    x = op.var([1.0, 2.0, 3.0])
    y = x * 2.0
    s = y.sum()
    out = {"leaf": x, "named-leaf": op.named_var([1.0, 2.0], "n"), "0d-leaf": op.var(2.0),
           "op-output": y, "0d-output": s, "reshape-view": y.reshape(3, 1),
           "slice-view": y[1:], "transpose-view": y.reshape(3, 1).T,
           "grad": op.grad(s, x), "grad-no-graph": op.grad(s, x, create_graph=False)}
    with op.no_grad():
        out["no-grad-output"] = x * 3.0
    return out


@pytest.mark.parametrize("kind", ["leaf", "named-leaf", "0d-leaf", "op-output", "0d-output",
                                  "reshape-view", "slice-view", "transpose-view", "grad",
                                  "grad-no-graph", "no-grad-output"])
def test_value_is_read_only(kind: str) -> None:
    """Writing into ``.value`` raises ValueError and leaves the value as it was."""
    v = _values_to_write(sg.Ops())[kind]
    before = v.value.copy()
    with pytest.raises(ValueError):
        written(v.value)
    np.testing.assert_array_equal(v.value, before)


def test_named_var_takes_no_number() -> None:
    """A named leaf prints its name and consumes no v-number."""
    op = sg.Ops()
    a = op.named_var([1.0], "a")
    x = op.var([2.0])
    assert (a.name, x.name) == ("a", "v0")
    with pytest.raises(sg.ArgumentError):
        op.named_var([1.0], None)


# ---------------------------------------------------------------- constants


def test_constants_print_readably() -> None:
    """Python numbers and small arrays print as values; larger arrays by dtype and shape."""
    op = sg.Ops()
    v = op.var([1.0, 2.0])
    for _ in range(4):
        v = v + 1
    v5 = v * 2.0
    v6 = 3 - v5
    v7 = v6 / np.float64(4)
    v8 = v7 + np.array([0.5, 1.5])
    v9 = op.mul(v8, np.ones((20, 1)))
    lines = op.format_trace().splitlines()
    assert lines[-5:] == [
        "v5 = v4 * 2.0",
        "v6 = 3 - v5",
        "v7 = v6 / 4.0",
        "v8 = v7 + [0.5000, 1.5000]",
        "v9 = v8 * <float64 20x1>",
    ]
    assert v9.shape == (20, 2)


def test_constants_are_copied() -> None:
    """A numpy constant is copied when recorded: mutating it later changes nothing."""
    c = np.array([2.0, 3.0])
    op = sg.Ops()
    x = op.var([1.0, 1.0])
    y = x * c
    c[:] = -1.0
    L = y.sum()
    np.testing.assert_array_equal(y.value, [2.0, 3.0])
    np.testing.assert_array_equal(op.grad(L, x).value, [2.0, 3.0])
    assert "v1 = v0 * [2.0000, 3.0000]" in op.format_trace()


def test_constants_get_no_gradient() -> None:
    """Only Variables get cotangents: the grad block of sum(x * c) is expand then one mul."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    L = (x * np.array([3.0, 4.0])).sum()
    g = op.grad(L, x)
    np.testing.assert_array_equal(g.value, [3.0, 4.0])
    block = op.format_trace().split("dv2 --------------\n")[1].splitlines()
    # v3 is the seed (not printed)
    assert block == ["v4 = v3.expand([2])", "v5 = v4 * [3.0000, 4.0000]",
                     "dv2_dv2 = v3", "dv2_dv1 = v4", "dv2_dv0 = v5", "-" * 18]


BINARY: dict[str, Callable] = {"add": operator.add, "sub": operator.sub,
                               "mul": operator.mul, "div": operator.truediv,
                               "pow": operator.pow}
CONSTANTS: dict[str, Any] = {
    "float": 2.0, "int": 2, "np-float64": np.float64(2.0), "0d-float64-array": np.array(2.0),
    "float64-array": np.full(3, 2.0), "int-array": np.array([1, 2, 3]),
    "bool-array": np.array([True, False, True]),
}


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("const", list(CONSTANTS))
@pytest.mark.parametrize("fn", list(BINARY))
def test_float32_stays_float32(fn: str, const: str, side: str) -> None:
    """float32 with Python numbers or float64 constants stays float32, gradients of 2 orders too."""
    op = sg.Ops()
    x = op.var(np.array([0.5, 1.0, 1.5], np.float32))
    c = CONSTANTS[const]
    if fn in ("div", "pow") and const == "bool-array":
        c = c + 1       # x / False and 0 ** x have no finite gradient; True + 1 is 2
    y = BINARY[fn](x, c) if side == "right" else BINARY[fn](c, x)
    assert isinstance(y, sg.Variable)
    assert y.dtype == np.float32
    g = op.grad(y.sum(), x)
    assert (g.dtype, g.shape) == (np.float32, (3,))
    h = op.grad(g.sum(), x)
    assert (h.dtype, h.shape) == (np.float32, (3,))


@pytest.mark.parametrize("create_graph", [True, False], ids=["graph", "no-graph"])
def test_mixed_dtype_gradients(create_graph: bool) -> None:
    """Each gradient has its own variable's dtype and shape, with mixed dtypes and broadcasting."""
    op = sg.Ops()
    h = op.var(np.full((3, 1), 0.5, np.float16))
    f = op.var(np.full((1, 4), 2.0, np.float32))
    d = op.var(np.arange(4.0))
    L = (h * f * d * np.float64(2.0) + 1.0).sum()
    assert L.dtype == np.float64
    grads = op.grad(L, [h, f, d], create_graph=create_graph)
    assert [(g.dtype, g.shape) for g in grads] == [
        (np.float16, (3, 1)), (np.float32, (1, 4)), (np.float64, (4,))]
    # by hand: dL/dh_i = sum_j 2 f_j d_j, dL/df_j = sum_i 2 h_i d_j, dL/dd_j = sum_i 2 h_i f_j
    np.testing.assert_allclose(grads[0].value, np.full((3, 1), 24.0))
    np.testing.assert_allclose(grads[1].value, [[0.0, 3.0, 6.0, 9.0]])
    np.testing.assert_allclose(grads[2].value, np.full(4, 6.0))
    L.backward()
    assert [(v.grad.dtype, v.grad.shape) for v in (h, f, d)] == [
        (np.float16, (3, 1)), (np.float32, (1, 4)), (np.float64, (4,))]


# ---------------------------------------------------------------- op.grad


def test_grad_returns_in_order_and_replaces_grad() -> None:
    """op.grad returns the gradients in wrt's order and replaces each ``.grad``."""
    op = sg.Ops()
    a = op.var([1.0, -2.0])
    b = op.var([3.0, 0.5])
    L = (a * a * b).sum()
    gb, ga = op.grad(L, [b, a])
    assert a.grad is ga and b.grad is gb
    np.testing.assert_array_equal(ga.value, 2 * a.value * b.value)
    np.testing.assert_array_equal(gb.value, a.value ** 2)
    ga2 = op.grad(L, a)                 # a single Variable in, a single Variable out
    assert isinstance(ga2, sg.Variable) and a.grad is ga2 and ga2 is not ga
    np.testing.assert_array_equal(ga2.value, ga.value)
    M = (a * 5.0).sum()
    op.grad(M, [a, b])                  # replaced, not accumulated
    np.testing.assert_array_equal(a.grad.value, [5.0, 5.0])
    np.testing.assert_array_equal(b.grad.value, [0.0, 0.0])


@pytest.mark.parametrize("create_graph", [True, False], ids=["graph", "no-graph"])
def test_grad_of_unrelated_variable_is_zeros(create_graph: bool) -> None:
    """A variable L does not depend on gets zeros of its own shape and dtype."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    w = op.var(np.ones((2, 3), np.float32))
    L = (x * x).sum()
    gx, gw = op.grad(L, [x, w], create_graph=create_graph)
    assert (gw.shape, gw.dtype) == ((2, 3), np.float32)
    np.testing.assert_array_equal(gw.value, np.zeros((2, 3)))
    np.testing.assert_array_equal(gx.value, [2.0, 4.0])


def test_nonscalar_L_needs_seed() -> None:
    """Non-scalar L without seed raises ShapeError suggesting .sum() or seed=."""
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0])
    y = x * x
    with pytest.raises(sg.ShapeError) as info:
        op.grad(y, x)
    assert ".sum()" in str(info.value) and "seed=" in str(info.value)
    assert "(3,)" in str(info.value) and y.name in str(info.value)
    with pytest.raises(sg.ShapeError, match=r"\.sum\(\)"):
        y.backward()


@pytest.mark.parametrize("seed_kind", ["array", "list", "variable"])
def test_seed_weights_the_gradient(seed_kind: str) -> None:
    """With seed s, op.grad gives the vector-Jacobian product s^T J (here 2 x s)."""
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0])
    y = x * x
    s = [0.5, -1.0, 2.0]
    seed = {"array": np.array(s), "list": s, "variable": op.var(s)}[seed_kind]
    np.testing.assert_array_equal(op.grad(y, x, seed=seed).value, 2 * x.value * s)
    with pytest.raises(sg.ShapeError, match=r"\(2,\)"):
        op.grad(y, x, seed=np.ones(2))


def test_create_graph_false_same_values_records_nothing() -> None:
    """create_graph=False gives the recorded gradients' values and records and numbers nothing."""
    op = sg.Ops()
    a = op.var([0.3, -1.2, 2.0])
    b = op.var([1.5, 0.5, -0.7])
    L = ((a * b).tanh() * a + b.exp() / a).sum()
    traced = op.format_trace()
    n, k = len(op.tape), next_number(op)
    quick = op.grad(L, [a, b], create_graph=False)
    assert len(op.tape) == n and next_number(op) == k + 1
    assert op.format_trace() == traced + f"\nv{k} = 0.0000\nv{k + 1} = 0.0000"
    full = op.grad(L, [a, b])
    for q, f in zip(quick, full):
        np.testing.assert_allclose(q.value, f.value, rtol=RTOL)
        assert not q.requires_grad
    assert a.grad is full[0]


# ---------------------------------------------------------------- backward, no_grad, detach


def test_backward_accumulates_into_leaves() -> None:
    """L.backward() adds into .grad of leaves that require grad; twice gives double."""
    op = sg.Ops()
    a = op.var([1.0, 2.0])
    b = op.var([3.0, 4.0], requires_grad=False)
    y = a * b
    L = (y * a).sum()           # dL/da = 2ab
    L.backward()
    np.testing.assert_array_equal(a.grad.value, [6.0, 16.0])
    L.backward()
    np.testing.assert_array_equal(a.grad.value, [12.0, 32.0])
    assert b.grad is None and y.grad is None and L.grad is None
    M = (a * 10.0).sum()
    M.backward()                # a different L accumulates into the same .grad
    np.testing.assert_array_equal(a.grad.value, [22.0, 42.0])


def test_backward_create_graph_records_the_sum() -> None:
    """With create_graph=True the accumulated .grad is a recorded Variable one can differentiate."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    L = (x * x * x).sum()           # dL/dx = 3x^2
    L.backward(create_graph=True)
    L.backward(create_graph=True)   # 6x^2, recorded
    assert x.grad.prim is not None
    np.testing.assert_array_equal(op.grad(x.grad.sum(), x).value, 12 * x.value)


def test_no_grad_records_nothing() -> None:
    """Inside op.no_grad() primitives give values only: no entry, no number, no gradient."""
    op = sg.Ops(echo=True)
    x = op.var([1.0, 2.0])
    L = (x * x).sum()
    n, k = len(op.tape), next_number(op)
    with op.no_grad():
        y = (x * 3.0).exp()
        g = op.grad(L, x)       # values only, as with create_graph=False
    assert len(op.tape) == n and next_number(op) == k + 1
    np.testing.assert_allclose(y.value, np.exp([3.0, 6.0]), rtol=RTOL)
    np.testing.assert_array_equal(g.value, [2.0, 4.0])
    assert not y.requires_grad and y.prim is None
    with pytest.raises(RuntimeError), op.no_grad():
        raise RuntimeError("recording must resume after an exception")
    z = (x * y).sum()       # y enters as a constant-like input: no gradient through it
    assert len(op.tape) == n + 2
    np.testing.assert_allclose(op.grad(z, x).value, y.value, rtol=RTOL)


def test_detach_stops_gradients() -> None:
    """x.detach() has x's value, and no gradient flows through it."""
    op = sg.Ops()
    x = op.var([1.0, -2.0, 0.5])
    d = x.detach()
    np.testing.assert_array_equal(d.value, x.value)
    assert not d.requires_grad
    L = (d * x).sum()                       # d/dx with d held constant: d
    np.testing.assert_array_equal(op.grad(L, x).value, x.value)
    M = (x.detach() * x.detach()).sum()
    np.testing.assert_array_equal(op.grad(M, x).value, np.zeros(3))
    M.backward()
    assert x.grad.value.tolist() == [0.0, 0.0, 0.0]


# ---------------------------------------------------------------- tape, names, operators


def test_tape_is_sized_and_holds_the_results() -> None:
    """op.tape has one entry per recorded result, oldest first; leaves are not entries."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = x * 2.0
    z = op.sum(y, name="z")
    assert len(op.tape) == 2
    assert op.tape[0] is y.node and op.tape[-1] is z.node and list(op.tape) == [y.node, z.node]
    assert (z.prim.name, z.inputs, z.attrs) == ("sum", (y.node,), {"axis": None, "keepdims": False})
    assert x.prim is None and x.is_leaf


@pytest.mark.parametrize("prim", sorted(sg.REGISTRY))
def test_every_primitive_takes_name(prim: str) -> None:
    """Each registered primitive is an Ops method with an optional name= parameter."""
    param = inspect.signature(getattr(sg.Ops, prim)).parameters.get("name")
    assert param is not None and param.default is None


def test_name_is_used() -> None:
    """name= names the result in the trace and takes no v-number."""
    op = sg.Ops()
    x = op.var(np.ones((2, 3)))
    results = [op.add(x, x, name="s"), op.sum(x, axis=0, name="t"),
               op.reshape(x, (3, 2), name="r"), op.getitem(x, 1, name="g"),
               op.matmul(x, np.ones(3), name="m"), op.concatenate([x, x], name="c"),
               op.tanh(x, name="th")]
    assert [r.name for r in results] == ["s", "t", "r", "g", "m", "c", "th"]
    assert next_number(op) == 1


COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@pytest.mark.parametrize("other_kind", ["variable", "number", "numpy-right", "numpy-left"])
@pytest.mark.parametrize("cmp", list(COMPARISONS))
def test_comparisons_record_bool_entries(cmp: str, other_kind: str) -> None:
    """Comparing Variables records a bool entry with no gradient, equal to numpy's answer."""
    op = sg.Ops()
    xv, ov = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
    x = op.var(xv)
    fn = COMPARISONS[cmp]
    if other_kind == "variable":
        got = fn(x, op.var(ov))
    elif other_kind == "number":
        got = fn(x, 2.0)
    elif other_kind == "numpy-right":
        got = fn(x, ov)
    else:
        got = fn(ov, x)
    expected = fn(ov, xv) if other_kind == "numpy-left" else fn(xv, ov)
    assert isinstance(got, sg.Variable) and got.dtype == bool and not got.requires_grad
    assert got.prim is not None and op.tape[-1] is got.node
    assert f" {cmp} " in op.format_trace().splitlines()[-1]
    np.testing.assert_array_equal(got.value, expected)


def test_eq_is_identity_and_variables_are_hashable() -> None:
    """== compares identity (not values), so Variables work as dict keys and set members."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = op.var([1.0, 2.0])
    assert x == x and x != y and (x == y) is False
    assert len({x, y, x}) == 2 and {x: "x", y: "y"}[y] == "y"
    assert len(op.tape) == 0


@pytest.mark.parametrize("expr, expected, line", [
    (lambda x: np.array([[1.0, 2.0], [3.0, 4.0]]) @ x, "A @ x",
     "v1 = [[1.0000, 2.0000], [3.0000, 4.0000]] @ v0"),
    (lambda x: np.float64(2) * x, "2 * x", "v1 = 2.0 * v0"),
    (lambda x: np.array([1.0, 1.0]) - x, "1 - x", "v1 = [1.0000, 1.0000] - v0"),
    (lambda x: np.float32(3) + x, "3 + x", "v1 = 3.0 + v0"),
], ids=["matmul", "float64-mul", "array-sub", "float32-add"])
def test_numpy_on_the_left_gives_variables(expr: Callable, expected: str, line: str) -> None:
    """numpy values on the left of an operator defer to the Variable."""
    op = sg.Ops()
    x = op.var([0.5, -1.0])
    y = expr(x)
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    want = {"A @ x": A @ x.value, "2 * x": 2 * x.value, "1 - x": 1 - x.value,
            "3 + x": 3 + x.value}[expected]
    assert isinstance(y, sg.Variable)
    np.testing.assert_array_equal(y.value, want)
    assert op.format_trace().splitlines()[-1] == line


def test_transpose_reverses_axes() -> None:
    """op.transpose(x) and x.T reverse the axes; the gradient transposes back."""
    op = sg.Ops()
    xv = np.arange(24.0).reshape(2, 3, 4)
    x = op.var(xv)
    y = op.transpose(x)
    assert y.shape == (4, 3, 2)
    np.testing.assert_array_equal(y.value, np.transpose(xv))
    np.testing.assert_array_equal(x.T.value, np.transpose(xv))
    w = np.arange(24.0).reshape(4, 3, 2) - 7.0
    np.testing.assert_array_equal(op.grad((y * w).sum(), x).value, np.transpose(w))


# ---------------------------------------------------------------- numbering


def test_numbering() -> None:
    """Unnamed leaves and results take the next number; a grad seed takes one, unprinted."""
    op = sg.Ops()
    x = op.var([1.0, 2.0])                  # v0
    y = x * x                               # v1
    L = op.sum(y, name="L")                 # named: no number
    with op.no_grad():
        x * 3.0                             # unrecorded: no number
    op.grad(L, x, create_graph=False)       # records nothing: no number
    op.grad(L, x)                           # seed v2, then v3, v4, v5, v6
    z = x + 1.0
    assert (x.name, y.name, L.name, z.name) == ("v0", "v1", "L", "v7")
    lines = op.format_trace().splitlines()
    assert lines == ["v0 = [1.0000, 2.0000]", "v1 = v0 * v0", "L = v1.sum()",
                     "dL --------------",
                     "v3 = v2.expand([2])", "v4 = v3 * v0", "v5 = v3 * v0", "v6 = v4 + v5",
                     "dL_dL = v2", "dL_dv1 = v3", "dL_dv0 = v6", "-" * 18,
                     "v7 = v0 + 1.0"]


# ---------------------------------------------------------------- indexing

INDICES: dict[str, Any] = {
    "int": 1,
    "negative-int": -1,
    "row-col": (2, 3),
    "slice": slice(1, 3),
    "step-slice": (slice(None), slice(None, None, 2)),
    "reverse-slice": slice(None, None, -1),
    "int-array": np.array([0, 2]),
    "repeated-int-array": np.array([2, 0, 2, 2]),
    "int-list": [1, 1],
    "bool-mask": np.array([True, False, True]),
    "array-pair": (np.array([0, 0, 2]), np.array([1, 1, 3])),
    "slice-and-array": (slice(0, 2), np.array([3, 3, 0])),
    "ellipsis-newaxis": (Ellipsis, None),
}


@pytest.mark.parametrize("key", list(INDICES))
def test_indexing_values_and_gradients(key: str) -> None:
    """x[index] equals numpy's, and its gradient is np.add.at of the seed on zeros."""
    index = INDICES[key]
    xv = np.arange(12.0).reshape(3, 4)
    op = sg.Ops()
    x = op.var(xv)
    y = x[index]
    np.testing.assert_array_equal(y.value, xv[index])
    seed = np.arange(1.0, 1.0 + y.size).reshape(y.shape)
    expected = np.zeros_like(xv)
    np.add.at(expected, index if isinstance(index, tuple) else (index,), seed)
    np.testing.assert_array_equal(op.grad(y, x, seed=seed).value, expected)
    np.testing.assert_array_equal(op.grad(y, x, seed=seed, create_graph=False).value, expected)


def test_repeated_reads_accumulate() -> None:
    """Reads of the same entries add up, also at second order."""
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0, 4.0])
    L = x[0] * x[0] + x[np.array([1, 1, 1])].sum() + 2.0 * x[1:3].sum() + x[-1] * x[3]
    g = op.grad(L, x)
    np.testing.assert_array_equal(g.value, [2.0, 5.0, 2.0, 8.0])   # 2x0, 3 + 2, 2, 2x3
    h = op.grad((g * g).sum(), x)       # d/dx sum(g^2) = 2 g dg/dx, dg0/dx0 = dg3/dx3 = 2
    np.testing.assert_array_equal(h.value, [8.0, 0.0, 0.0, 32.0])


@pytest.mark.parametrize("dense_first", [True, False], ids=["dense-first", "reads-first"])
def test_reads_and_dense_uses_accumulate(dense_first: bool) -> None:
    """Indexing reads and whole-array uses of x add up, in either order, at orders 1 and 2."""
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0, 4.0])
    parts = [(x * x).sum(), x[0] * x[1], x[np.array([3, 3])].sum()]
    if not dense_first:
        parts.reverse()
    L = parts[0] + parts[1] + parts[2]
    expected = [4.0, 5.0, 6.0, 10.0]            # 2x + (x1, x0, 0, 2)
    np.testing.assert_array_equal(op.grad(L, x, create_graph=False).value, expected)
    g = op.grad(L, x)
    np.testing.assert_array_equal(g.value, expected)
    # d/dx sum(g^2) = 2 J^T g with J = 2I + (1 at (0, 1) and (1, 0))
    np.testing.assert_array_equal(op.grad((g * g).sum(), x).value, [26.0, 28.0, 24.0, 40.0])


@pytest.mark.parametrize("create_graph", [True, False], ids=["graph", "no-graph"])
def test_indexing_gradients_keep_dtype(create_graph: bool) -> None:
    """Reads of a float32 variable mixed with float64 give a float32 gradient."""
    op = sg.Ops()
    x = op.var(np.ones(3, np.float32))
    y = op.var(np.ones(3))
    L = (x[0] * y + x[np.array([1, 1])].sum() * y[1:2]).sum()
    gx, gy = op.grad(L, [x, y], create_graph=create_graph)
    assert (gx.dtype, gy.dtype) == (np.float32, np.float64)
    # the (1,)-shaped second term broadcasts over 3 entries of the first
    np.testing.assert_array_equal(gx.value, [3.0, 6.0, 0.0])
    np.testing.assert_array_equal(gy.value, [1.0, 7.0, 1.0])


def test_sparse_accumulation_peak_memory() -> None:
    """The gradient of x[0] + ... + x[4999] never builds one dense array per read.

    Bound: 4 MiB of peak traced memory during op.grad. One dense float64 array per
    read held on the tape would need 5000 x 40 kB = 191 MiB; the sparse path keeps
    5000 small index tuples and builds one dense array.
    """
    n = 5000
    op = sg.Ops()
    x = op.var(np.linspace(-1.0, 1.0, n))
    L = x[0]
    for i in range(1, n):
        L = L + x[i]
    entries = len(op.tape)
    tracemalloc.start()
    try:
        g = op.grad(L, x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert len(op.tape) - entries <= 3      # the dense gradient is one scatter_add
    np.testing.assert_array_equal(g.value, np.ones(n))
    tracemalloc.start()
    try:
        g = op.grad(L, x, create_graph=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MiB without recording"
    np.testing.assert_array_equal(g.value, np.ones(n))


# ---------------------------------------------------------------- a long chain

CHAIN = 1_000_000
FACTOR = 1.0000001


def _chain(n: int) -> tuple[sg.Variable, sg.Variable]:
    """x, then n recorded ops alternating + 1e-7 and * FACTOR, then the sum."""
    op = sg.Ops()
    x = op.var([0.5, -0.25])
    y = x
    for i in range(n):
        y = y * FACTOR if i % 2 else y + 1e-7
    return x, y.sum()


@pytest.mark.slow
def test_million_op_chain_values_only() -> None:
    """A chain of 10^6 recorded ops differentiates without RecursionError (about 6 s here)."""
    x, L = _chain(CHAIN)
    assert len(L.ops.tape) == CHAIN + 1
    g = L.ops.grad(L, x, create_graph=False)
    np.testing.assert_allclose(g.value, np.full(2, FACTOR ** (CHAIN // 2)), rtol=1e-9)
    del x, L, g
    gc.collect()            # tearing down the chain must not recurse either


@pytest.mark.slow
def test_million_op_chain_recorded() -> None:
    """The same chain with the gradient recorded, and through backward (about 12 s here)."""
    x, L = _chain(CHAIN)
    g = L.ops.grad(L, x)
    np.testing.assert_allclose(g.value, np.full(2, FACTOR ** (CHAIN // 2)), rtol=1e-9)
    x.grad = None
    L.backward()
    np.testing.assert_allclose(x.grad.value, np.full(2, FACTOR ** (CHAIN // 2)), rtol=1e-9)
    del x, L, g
    gc.collect()
