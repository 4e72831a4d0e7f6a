"""0 x 0 matrices in linear algebra, as numpy takes them: det is 1, log|det| is 0, inv, solve,
cholesky, eigh, qr, svd, pinv, lstsq and matrix_power give empty results of numpy's shapes,
single and batched; their gradients (orders 1 and 2) are empty arrays of the input's shape.
Each program also saves and loads (the loader's stand-in for a 0 x 0 matrix is empty too).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

CASES = {
    "det": (lambda op, a: op.det(a), np.linalg.det),
    "slogdet": (lambda op, a: op.slogdet(a), lambda a: np.linalg.slogdet(a)[1]),
    "inv": (lambda op, a: op.inv(a), np.linalg.inv),
    "solve": (lambda op, a: op.solve(a, np.ones(a.shape[:-1] + (2,))),
              lambda a: np.linalg.solve(a, np.ones(a.shape[:-1] + (2,)))),
    "cholesky": (lambda op, a: op.cholesky(a), np.linalg.cholesky),
    "eigh-values": (lambda op, a: op.eigh(a)[0], lambda a: np.linalg.eigh(a)[0]),
    "eigh-vectors": (lambda op, a: op.eigh(a)[1], lambda a: np.linalg.eigh(a)[1]),
    "qr-Q": (lambda op, a: op.qr(a)[0], lambda a: np.linalg.qr(a)[0]),
    "qr-R": (lambda op, a: op.qr(a)[1], lambda a: np.linalg.qr(a)[1]),
    "svd-U": (lambda op, a: op.svd(a, full_matrices=False)[0],
              lambda a: np.linalg.svd(a, full_matrices=False)[0]),
    "svd-S": (lambda op, a: op.svd(a, full_matrices=False)[1],
              lambda a: np.linalg.svd(a, full_matrices=False)[1]),
    "pinv": (lambda op, a: op.pinv(a), np.linalg.pinv),
    "matrix_power": (lambda op, a: op.matrix_power(a, 3),
                     lambda a: np.linalg.matrix_power(a, 3)),
    "matrix_power-inverse": (lambda op, a: op.matrix_power(a, -2),
                             lambda a: np.linalg.matrix_power(a, -2)),
}


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)], ids=str)
@pytest.mark.parametrize("name", list(CASES))
def test_empty_matrices_as_numpy_takes_them(name, shape, tmp_path):
    f, numpy_f = CASES[name]
    op = sg.Ops()
    a = op.var(np.zeros(shape), name="a")
    out = f(op, a)
    want = numpy_f(np.zeros(shape))
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.value, want)
    g = op.grad(op.sum(out), a)
    assert g.shape == shape and g.value.size == 0
    h = op.grad(op.sum(g * g), a)
    assert h.shape == shape
    prog = op.program(a, [out, g])
    back = sg.load_program(prog.save(tmp_path / name)[0])
    for got, w in zip(back(np.zeros(shape)), prog(np.zeros(shape))):
        np.testing.assert_array_equal(got, w)


def test_det_of_an_empty_matrix_is_one_and_its_gradient_empty():
    """The issue's case: numpy's det of a 0 x 0 matrix is 1; the gradient is (0, 0)."""
    op = sg.Ops()
    a = op.var(np.zeros((0, 0)), name="a")
    d = op.det(a)
    assert d.value == 1.0
    (g,) = op.grad(d, [a])
    assert g.value.shape == (0, 0)
    assert sg.grad(lambda x: np.linalg.det(x).sum())(np.zeros((3, 0, 0))).shape == (3, 0, 0)
    np.testing.assert_array_equal(op.jvp(d, a, np.zeros((0, 0))).value, 0.0)


def test_lstsq_of_empty_systems():
    for m, n in ((0, 0), (0, 3), (3, 0)):
        op = sg.Ops()
        a, b = op.var(np.zeros((m, n)), name="a"), op.var(np.ones(m), name="b")
        x = op.lstsq(a, b)[0]
        np.testing.assert_array_equal(x.value, np.linalg.lstsq(np.zeros((m, n)), np.ones(m))[0])
        ga, gb = op.grad(op.sum(x), [a, b])
        assert ga.shape == (m, n) and gb.shape == (m,)
