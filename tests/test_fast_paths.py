"""The fast paths of the hot forwards and transforms give what the general paths give.

log_softmax and logsumexp skip their guards when every maximum is finite; sum, max and min of
an array call their ufunc's reduce; expand of one number builds a stride-0 view;
value_and_grad takes plain arrays without walking pytrees; compiled programs use ufunc and
array-method templates. Each is checked against an independent answer: closed forms, numpy's
own functions, or the pytree path of the same transform.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.core import REGISTRY

INF = math.inf
ROWS = np.array([[1.0, 2.0, 3.0], [-INF, 0.0, 1.0], [-INF, -INF, -INF], [1.0, INF, 0.0],
                 [0.0, math.nan, 1.0], [700.0, 710.0, -700.0]])


def _lse_row(row: list[float]) -> float:
    """logsumexp of one row by hand (math module only)."""
    if any(math.isnan(v) for v in row):
        return math.nan
    if INF in row:
        return INF
    m = max(row)
    if m == -INF:
        return -INF
    return m + math.log(sum(math.exp(v - m) for v in row))


def test_logsumexp_and_log_softmax_match_closed_forms_on_finite_and_nonfinite_rows():
    with np.errstate(invalid="ignore"):     # inf - inf in row 3, as numpy says
        lse = REGISTRY["logsumexp"].forward(ROWS, axis=1)
        ls = REGISTRY["log_softmax"].forward(ROWS, axis=1)
    expect = np.array([_lse_row(list(r)) for r in ROWS])
    np.testing.assert_allclose(lse, expect, rtol=1e-15)
    finite = [0, 1, 5]      # rows whose maximum is finite: x - logsumexp(x) exactly
    np.testing.assert_allclose(ls[finite], ROWS[finite] - expect[finite, None], rtol=1e-15)
    assert np.isnan(ls[2]).all()                   # -inf - (-inf)
    assert ls[3, 1] != ls[3, 1] and ls[3, 0] == -INF and ls[3, 2] == -INF   # inf - inf
    assert np.isnan(ls[4]).all()


def test_the_unguarded_path_warns_about_nothing():
    x = np.array([[1.0, -INF, 3.0], [1000.0, -1000.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = REGISTRY["log_softmax"].forward(x, axis=1)
        lse = REGISTRY["logsumexp"].forward(x, axis=-1, keepdims=True)
        assert lse.shape == (2, 1)
        REGISTRY["logsumexp"].forward(np.array([-INF, -INF]))    # guarded: -inf, quietly
    np.testing.assert_allclose(np.exp(out).sum(axis=1), [1.0, 1.0], rtol=1e-15)


def test_compiled_log_softmax_replays_nonfinite_rows_as_recorded():
    op = sg.Ops()
    x = op.var(np.zeros((6, 3)))
    y = op.log_softmax(x, axis=1)
    fn = sg.compile(op.program([x], [y]))
    with np.errstate(invalid="ignore"):
        got = fn(ROWS)[0]
        want = REGISTRY["log_softmax"].forward(ROWS, axis=1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a", [np.array([[True, False], [True, True]]),
                               np.arange(6, dtype=np.int32).reshape(2, 3),
                               np.linspace(0, 1, 6).reshape(3, 2), np.float64(2.5), 3.0])
@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": None, "keepdims": True}])
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduction_forwards_match_numpy_in_value_type_and_dtype(a, kw, name):
    if np.ndim(a) == 0 and kw.get("axis") == 0:
        pytest.skip("a 0-d value has no axis 0")
    got, want = REGISTRY[name].forward(a, **kw), getattr(np, name)(a, **kw)
    assert type(got) is type(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("x", [np.asarray(1.5), np.float64(-2.0), np.asarray(True),
                               np.arange(5.0)[3, ...]])   # a 0-d view at an offset
def test_expanding_one_number_is_a_read_only_view_equal_to_broadcast_to(x):
    out = REGISTRY["expand"].forward(x, (3, 4))
    np.testing.assert_array_equal(out, np.broadcast_to(x, (3, 4)))
    assert out.dtype == np.asarray(x).dtype and out.shape == (3, 4)
    assert not out.flags.writeable
    with pytest.raises(ValueError):
        out[0, 0] = 7


def test_value_and_grad_of_plain_arrays_equals_its_pytree_form():
    rng = np.random.default_rng(3)
    W, b, x = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=(5, 4))

    def loss(W, b):
        return ((x @ W + b).tanh() ** 2).sum()

    v1, (gW, gb) = sg.value_and_grad(loss, argnums=(0, 1))(W, b)
    v2, (gd,) = sg.value_and_grad(lambda d: loss(d["W"], d["b"]), argnums=(0,))({"W": W, "b": b})
    assert v1 == pytest.approx(float(v2), rel=1e-15)
    np.testing.assert_allclose(gW, gd["W"], rtol=1e-15)
    np.testing.assert_allclose(gb, gd["b"], rtol=1e-15)
    # closed form: d/dW sum(tanh(a)^2) = x^T (2 tanh(a) (1 - tanh(a)^2))
    t = np.tanh(x @ W + b)
    da = 2 * t * (1 - t * t)
    np.testing.assert_allclose(gW, x.T @ da, rtol=1e-13)
    np.testing.assert_allclose(gb, da.sum(axis=0), rtol=1e-13)
    assert gW.flags.writeable and W.flags.writeable


def test_compiled_templates_reduce_transpose_and_reshape_match_numpy():
    op = sg.Ops()
    x = op.var(np.arange(24.0).reshape(2, 3, 4) / 5, name="x")
    outs = [x.sum(), x.sum(axis=1, keepdims=True), x.sum(axis=(0, 2)), x.transpose(),
            op.transpose(x, (1, 0, 2)), x.reshape((4, 6))]
    fn = sg.compile(op.program(x, outs))
    assert "np.add.reduce(x, axis=None)" in fn.source and "x.transpose()" in fn.source
    x2 = np.linspace(-2, 3, 24).reshape(2, 3, 4)
    want = [np.sum(x2), np.sum(x2, axis=1, keepdims=True), np.sum(x2, axis=(0, 2)), x2.T,
            np.transpose(x2, (1, 0, 2)), np.reshape(x2, (4, 6))]
    for got, w in zip(fn(x2), want):
        assert got.shape == np.shape(w)
        np.testing.assert_allclose(got, w, rtol=1e-15)


def test_a_method_template_on_a_number_constant_compiles():
    """A program read from a file may hold a number constant where a method template expects
    an array: the compiler wraps the literal (``np.asarray(2.5).transpose()``)."""
    from simplegrad.program.core import Program
    from simplegrad.program.nodes import CONST, NODE, Constant, Input, Node, Ref
    for name, attrs in [("transpose", {"axes": None}), ("sum", {"axis": None,
                                                             "keepdims": False})]:
        node = Node(REGISTRY[name], (Ref(CONST, 0),), attrs, "v0", (), np.dtype(np.float64))
        prog = Program([Input("x", (), np.dtype(np.float64))], [Constant(2.5)], [node],
                       [Ref(NODE, 0)], single=True)
        assert float(sg.compile(prog)(np.float64(1.0))) == 2.5
