"""einsum and the products: values against explicit loops or numpy, derivatives at orders 1-2.

Oracles: einsum's values are checked against hand-written Python loops over the index space
(never against np.einsum itself); its derivatives with sg.check_grads (float64 central
differences, eps=1e-6, atol=rtol=1e-6) in reverse and forward mode at orders 1 and 2; a few
closed forms (d trace(A) / dA = I, d diag-product / dA = diagonal embedding, the gradients of
the cross product). The other products are checked against numpy's own functions, which do
not share code with the recorded rules.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.errors import AxisError, ShapeError
from simplegrad.primitives.subscripts import parse_subscripts

TOL = {"atol": 1e-6, "rtol": 1e-6}


def loops(ins: list[str], out: str, arrays: list[np.ndarray]) -> np.ndarray:
    """Explicit sum over every assignment of the letters: the definition of einsum."""
    sizes: dict[str, int] = {}
    for term, a in zip(ins, arrays):
        for c, n in zip(term, a.shape):
            sizes[c] = max(sizes.get(c, 1), n)
    letters = sorted(sizes)
    result = np.zeros(tuple(sizes[c] for c in out))
    for values in itertools.product(*(range(sizes[c]) for c in letters)):
        at = dict(zip(letters, values))
        term = 1.0
        for t, a in zip(ins, arrays):     # a size-1 dimension broadcasts: read index 0
            term *= a[tuple(at[c] if n > 1 else 0 for c, n in zip(t, a.shape))]
        result[tuple(at[c] for c in out)] += term
    return result


# (numpy subscripts, operand shapes, the same contraction written out: inputs, output)
EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)], (["ij", "jk"], "ik")),
    ("ij,jk", [(2, 3), (3, 4)], (["ij", "jk"], "ik")),            # implicit output
    ("ii->i", [(3, 3)], (["ii"], "i")),                            # diagonal
    ("ii", [(3, 3)], (["ii"], "")),                                # trace
    ("ji", [(2, 3)], (["ji"], "ij")),                              # implicit transpose
    ("i,i", [(3,), (3,)], (["i", "i"], "")),
    ("i,j->ij", [(3,), (2,)], (["i", "j"], "ij")),
    ("ii,i->i", [(3, 3), (3,)], (["ii", "i"], "i")),
    ("iij,jk->ik", [(2, 2, 3), (3, 2)], (["iij", "jk"], "ik")),
    ("iji->j", [(2, 3, 2)], (["iji"], "j")),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)], (["ij", "jk", "kl"], "il")),
    ("...i,...i->...", [(2, 3), (2, 3)], (["ai", "ai"], "a")),
    ("...ij,...jk", [(2, 2, 3), (3, 2)], (["aij", "jk"], "aik")),
    ("i...->...", [(3, 2, 2)], (["iab"], "ab")),
    ("...,...", [(2, 1), (3,)], (["ab", "b"], "ab")),              # ellipsis broadcasting
    ("ij,j->", [(2, 1), (3,)], (["ij", "j"], "")),                 # a size-1 letter broadcasts
    ("Ba,aC", [(2, 3), (3, 2)], (["Ba", "aC"], "BC")),
]


@pytest.mark.parametrize("subscripts, shapes, written", EINSUMS,
                         ids=[e[0] for e in EINSUMS])
def test_einsum_matches_loops_and_differentiates_at_order_2(subscripts, shapes, written, rng):
    arrays = [rng.uniform(-1.0, 1.0, s) for s in shapes]
    op = sg.Ops()
    xs = [op.var(a) for a in arrays]
    y = op.einsum(subscripts, *xs)
    np.testing.assert_allclose(y.value, loops(*written, arrays), rtol=1e-12, atol=1e-14)
    sg.check_grads(lambda *vs: vs[0].ops.einsum(subscripts, *vs), arrays, order=2, **TOL)


@pytest.mark.parametrize("subscripts, f", [
    ("i,i", lambda x: (x * x).sum()),                       # one Variable in two places
    ("ij,ij,ij->", lambda x: (x * x * x).sum()),
    ("ii,jj->ij", lambda x: x.diagonal().reshape(3, 1) * x.diagonal().reshape(1, 3)),
])
def test_einsum_of_one_variable_repeated(subscripts, f, rng):
    a = rng.uniform(-1.0, 1.0, (3, 3) if "jj" in subscripts else (2, 3))
    if subscripts == "i,i":
        a = a[0]
    n = subscripts.split("->")[0].count(",") + 1
    op = sg.Ops()
    x = op.var(a)
    np.testing.assert_allclose(op.einsum(subscripts, *[x] * n).value, f(x).value, rtol=1e-14)
    sg.check_grads(lambda v: v.ops.einsum(subscripts, *[v] * n), [a], order=2, **TOL)


def test_einsum_records_explicit_subscripts():
    op = sg.Ops()
    a, b = op.var(np.ones((2, 3)), name="A"), op.var(np.ones((3, 4)), name="B")
    y = op.einsum("ij,jk", a, b)
    assert op.format_trace().splitlines()[-1] == f"{y.name} = einsum('ij,jk->ik', A, B)"
    assert y.attrs == {"subscripts": "ij,jk->ik"}


def test_parse_subscripts_places_ellipsis_letters_right_aligned():
    assert parse_subscripts("...i,...i->...", [(2, 1, 3), (4, 3)]) == (["abi", "bi"], "ab")
    assert parse_subscripts("i...", [(3,)]) == (["i"], "i")


def test_trace_and_diagonal_gradients_are_the_diagonal_embedding():
    a = np.arange(9.0).reshape(3, 3)
    op = sg.Ops()
    x = op.var(a)
    g = op.grad(op.einsum("ii", x), x)
    np.testing.assert_array_equal(g.value, np.eye(3))       # d trace(A) / dA = I
    # sum_i A_ii^2: gradient 2 diag(A) on the diagonal, 0 elsewhere; second derivative 2 I
    d = op.einsum("ii->i", x)
    g = op.grad((d * d).sum(), x)
    np.testing.assert_array_equal(g.value, np.diag(2 * np.diag(a)))
    h = op.grad(g.sum(), x)
    np.testing.assert_array_equal(h.value, 2 * np.eye(3))


def test_einsum_vjp_is_an_einsum_with_an_identity_for_a_repeated_letter():
    op = sg.Ops()
    x = op.var(np.ones((3, 3)), name="A")
    op.grad(op.einsum("ii->i", x).sum(), x)
    lines = op.format_trace().splitlines()
    assert any("einsum('i,ia->ia', " in line and "<float64 3x3>" in line for line in lines)


def test_einsum_sublist_form():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    op = sg.Ops()
    y = op.einsum(op.var(a), [0, 1], op.var(b), [1, 2], [0, 2])
    np.testing.assert_allclose(y.value, a @ b)


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,jk->ik", [(2, 3)]),            # too few operands
    ("ij->k", [(2, 3)]),                 # output letter not in the inputs
    ("ij->ii", [(2, 3)]),                # repeated output letter
    ("ijk", [(2, 3)]),                   # more letters than dimensions
    ("ij,jk", [(2, 3), (4, 5)]),         # sizes of j disagree
    ("ii", [(2, 3)]),                    # a repeated letter with different sizes
    ("i1", [(2, 3)]),                    # not a letter
    ("...i->i", [(2, 3)]),               # '...' inputs need '...' in the output
    ("i->i->i", [(2,)]),
])
def test_einsum_bad_subscripts_raise_before_recording(subscripts, shapes):
    op = sg.Ops()
    xs = [op.var(np.ones(s)) for s in shapes]
    with pytest.raises(ShapeError, match="einsum"):
        op.einsum(subscripts, *xs)
    assert len(op.tape) == 0


# ---------------------------------------------------------------- products written with einsum

PRODUCTS = [
    ("tensordot", lambda o, x, y: o.tensordot(x, y, axes=1), np.tensordot, [(2, 3), (3, 4)], 1),
    ("tensordot-2", lambda o, x, y: o.tensordot(x, y), np.tensordot, [(2, 3, 4), (3, 4, 2)], 2),
    ("tensordot-pairs", lambda o, x, y: o.tensordot(x, y, axes=([0, 2], [1, 0])),
     None, [(2, 3, 4), (4, 2)], ([0, 2], [1, 0])),
    ("dot-vec", lambda o, x, y: o.dot(x, y), np.dot, [(3,), (3,)], None),
    ("dot-mat", lambda o, x, y: o.dot(x, y), np.dot, [(2, 3), (3, 2)], None),
    ("dot-scalar", lambda o, x, y: o.dot(x, y), np.dot, [(), (3,)], None),
    ("dot-nd", lambda o, x, y: o.dot(x, y), np.dot, [(2, 2, 3), (2, 3, 2)], None),
    ("dot-nd-vec", lambda o, x, y: o.dot(x, y), np.dot, [(2, 2, 3), (3,)], None),
    ("inner", lambda o, x, y: o.inner(x, y), np.inner, [(2, 3), (4, 3)], None),
    ("inner-vec", lambda o, x, y: o.inner(x, y), np.inner, [(3,), (3,)], None),
    ("outer", lambda o, x, y: o.outer(x, y), np.outer, [(2, 2), (3,)], None),
    ("kron", lambda o, x, y: o.kron(x, y), np.kron, [(2, 2), (2, 3)], None),
    ("kron-ranks", lambda o, x, y: o.kron(x, y), np.kron, [(3,), (2, 2)], None),
    ("cross", lambda o, x, y: o.cross(x, y), np.cross, [(2, 3), (3,)], None),
    ("cross-axis", lambda o, x, y: o.cross(x, y, axis=0), None, [(3, 2), (3, 2)], None),
]


@pytest.mark.parametrize("name, f, reference, shapes, extra", PRODUCTS,
                         ids=[p[0] for p in PRODUCTS])
def test_products_match_numpy_and_differentiate(name, f, reference, shapes, extra, rng):
    arrays = [rng.uniform(-1.0, 1.0, s) for s in shapes]
    op = sg.Ops()
    got = f(op, *(op.var(a) for a in arrays)).value
    if name == "tensordot-pairs":
        expected = np.tensordot(*arrays, axes=extra)
    elif name == "cross-axis":
        expected = np.cross(*arrays, axis=0)
    elif extra is not None:
        expected = reference(*arrays, extra)
    else:
        expected = reference(*arrays)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    sg.check_grads(lambda x, y: f(x.ops, x, y), arrays, order=2, **TOL)


def test_cross_gradients_closed_form():
    # d/da <c, a x b> = b x c and d/db <c, a x b> = c x a
    a, b, c = np.array([1.0, 2.0, 3.0]), np.array([-1.0, 0.5, 2.0]), np.array([0.3, -2.0, 1.0])
    op = sg.Ops()
    x, y = op.var(a), op.var(b)
    ga, gb = op.grad((op.cross(x, y) * c).sum(), [x, y])
    np.testing.assert_allclose(ga.value, np.cross(b, c), rtol=1e-15)
    np.testing.assert_allclose(gb.value, np.cross(c, a), rtol=1e-15)


def test_dot_records_matmul_up_to_two_dimensions():
    op = sg.Ops()
    a, b = op.var(np.ones((2, 3)), name="A"), op.var(np.ones(3), name="b")
    y = a.dot(b)
    assert op.format_trace().splitlines()[-1] == f"{y.name} = A @ b"


# ---------------------------------------------------------------- diagonal, trace, diag, tri

@pytest.mark.parametrize("shape, kwargs", [
    ((3, 3), {}), ((3, 4), {"offset": 1}), ((4, 3), {"offset": -1}), ((3, 3), {"offset": 5}),
    ((2, 3, 3), {"axis1": 1, "axis2": 2}), ((3, 2, 4), {"axis1": -1, "axis2": 0, "offset": 1}),
])
def test_diagonal_and_trace_match_numpy(shape, kwargs, rng):
    a = rng.uniform(-1.0, 1.0, shape)
    op = sg.Ops()
    x = op.var(a)
    np.testing.assert_array_equal(x.diagonal(**kwargs).value, np.diagonal(a, **kwargs))
    np.testing.assert_allclose(x.trace(**kwargs).value, np.trace(a, **kwargs), rtol=1e-14)
    sg.check_grads(lambda v: v.trace(**kwargs), [a], order=2, **TOL)
    sg.check_grads(lambda v: v.ops.diagonal(v, **kwargs), [a], order=2, **TOL)


@pytest.mark.parametrize("shape, k", [((3,), 0), ((3,), 1), ((2,), -2), ((3, 3), 0),
                                      ((3, 4), -1)])
def test_diag_matches_numpy(shape, k, rng):
    a = rng.uniform(-1.0, 1.0, shape)
    op = sg.Ops()
    np.testing.assert_array_equal(op.diag(op.var(a), k=k).value, np.diag(a, k=k))
    sg.check_grads(lambda v: v.ops.diag(v, k=k), [a], order=2, **TOL)


@pytest.mark.parametrize("fn", ["tril", "triu"])
@pytest.mark.parametrize("shape, k", [((3, 3), 0), ((3, 4), 1), ((2, 3, 3), -1)])
def test_tril_triu_match_numpy(fn, shape, k, rng):
    a = rng.uniform(-1.0, 1.0, shape)
    op = sg.Ops()
    x = op.var(a)
    y = getattr(op, fn)(x, k=k)
    np.testing.assert_array_equal(y.value, getattr(np, fn)(a, k=k))
    g = op.grad((y * a).sum(), x)       # the gradient is the same triangle of a
    np.testing.assert_array_equal(g.value, getattr(np, fn)(a, k=k))


def test_product_errors_raise_before_recording():
    op = sg.Ops()
    x, m = op.var(np.ones(3)), op.var(np.ones((3, 3)))
    for call, kind in [(lambda: op.cross(x, op.var(np.ones(2))), ShapeError),
                       (lambda: op.cross(m, op.var(np.ones((3, 3, 3))), axis=2), AxisError),
                       (lambda: op.diagonal(m, axis1=0, axis2=0), AxisError),
                       (lambda: op.trace(x), AxisError),
                       (lambda: op.tril(x), ShapeError),
                       (lambda: op.diag(op.var(np.ones((2, 2, 2)))), ShapeError),
                       (lambda: op.tensordot(m, x, axes=3), AxisError)]:
        before = len(op.tape)
        with pytest.raises(kind):
            call()
        assert len(op.tape) == before


@pytest.mark.parametrize("vector_first", [False, True])
def test_matrix_vector_gradients_are_an_outer_product_and_one_matmul(vector_first, rng):
    """W @ x and u @ W: the matrix's gradient is the outer product of the cotangent and the
    vector (a broadcast product), the vector's is one matmul with W's transpose; against the
    closed forms of sum(tanh(.)) at orders 1 and 2 (the Hessian in the vector)."""
    W = rng.normal(size=(4, 3) if not vector_first else (3, 4))
    v = rng.normal(size=3)

    def f(W, v):
        return ((v @ W) if vector_first else (W @ v)).tanh().sum()
    op = sg.Ops()
    Wv, vv = op.var(W, name="W"), op.var(v, name="v")
    L = f(Wv, vv)
    gW, gv = op.grad(L, [Wv, vv])
    t = np.tanh(v @ W if vector_first else W @ v)
    d = 1 - t * t
    np.testing.assert_allclose(gW.value, np.outer(v, d) if vector_first else np.outer(d, v),
                               rtol=1e-14, atol=1e-15)
    M = W.T if vector_first else W                  # out = M @ v
    np.testing.assert_allclose(gv.value, M.T @ d, rtol=1e-14, atol=1e-15)
    # the gradient block ends with the two pullbacks, in input order: x's first
    outer, inner = ["reshape", "mul"], ["transpose", "matmul"]
    assert [e.prim.name for e in op.tape[-4:]] == (inner + outer if vector_first else
                                                    outer + inner)
    H = sg.hessian(lambda v: f(W, v))(v)
    # d2/dv2 sum tanh(M v) = M^T diag(-2 t (1 - t^2)) M
    np.testing.assert_allclose(H, M.T @ np.diag(-2 * t * d) @ M, rtol=1e-12, atol=1e-14)
