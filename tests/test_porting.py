"""What a user porting HIPS autograd, JAX or scipy code reaches for: refusals that name what
records (never a silent `.value`), the warning of float(v) / int(v), and the porting helpers
(sg.elementwise_grad, np.vdot, np.real / np.imag, sg.logsumexp with scipy's signature).

Expected values are closed forms, or the values scipy's and autograd's documentation print.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg

ROOT = Path(__file__).resolve().parents[1]


def _refusal(call) -> str:
    with pytest.raises((sg.ArgumentError, sg.DTypeError)) as info:
        call()
    return str(info.value)


def _recorded_first(message: str, alternative: str) -> None:
    """``alternative`` is named, and before any mention of .value."""
    assert alternative in message, message
    if ".value" in message:
        assert message.index(alternative) < message.index(".value"), message


# ---------------------------------------------------------------- refusals name what records

def _foreign_module(name: str, source: str) -> types.ModuleType:
    """A module named like a library's (scipy.special._logsumexp), not installed anywhere."""
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


SCIPY_LIKE = """
import numpy as np

def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    a = np.asarray(a)           # scipy converts its argument through numpy first
    return np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims))

def softmax(x, axis=None):
    x = np.asarray(x)
    return np.exp(x) / np.sum(np.exp(x), axis=axis, keepdims=True)
"""


def test_a_library_converting_a_variable_is_told_what_records():
    special = _foreign_module("scipy.special._logsumexp", SCIPY_LIKE)
    op = sg.Ops()
    v = op.var(np.array([1.0, 2.0, 3.0]), name="v")
    message = _refusal(lambda: special.logsumexp(v))
    assert message.startswith("scipy.special.logsumexp converts v to a numpy array"), message
    _recorded_first(message, "a.logsumexp(axis=)")
    _recorded_first(message, "sg.logsumexp(a, axis=, b=, keepdims=)")
    assert ".value" not in message
    _recorded_first(_refusal(lambda: special.softmax(v)), "x.softmax(axis=)")
    assert len(op.tape) == 0
    # what it names records, and equals log(e + e^2 + e^3)
    np.testing.assert_allclose(sg.logsumexp(v).value, np.log(np.exp([1, 2, 3]).sum()),
                               rtol=1e-15)


def test_an_array_built_from_variables_names_stack_first():
    op = sg.Ops()
    v = op.var(np.array([1.0, 2.0]), name="v")
    message = _refusal(lambda: np.array([v[0] * 2, v[1]]))
    _recorded_first(message, "np.stack([...])")
    _recorded_first(message, "x.at[i].set(v)")
    _recorded_first(_refusal(lambda: np.asarray(v)), "np.stack([...])")
    # what it names records: d/dv of sum(stack([2 v0, v1]) * [1, 3]) = [2, 3]
    L = (np.stack([v[0] * 2, v[1]]) * np.array([1.0, 3.0])).sum()
    np.testing.assert_array_equal(op.grad(L, v).value, [2.0, 3.0])


def test_an_integer_cast_says_indices_come_from_values():
    op = sg.Ops()
    v = op.var(np.array([0.5, 2.7, 1.2]), name="v")
    for call in (lambda: np.floor(v).astype(int), lambda: np.asarray(v, dtype=np.int64),
                 lambda: v.astype(bool)):
        message = _refusal(call)
        for word in ("x.argmax()", "x.argsort()", "np.floor(x.value).astype(int)",
                     "floor has zero gradient"):
            assert word in message, message
    # the index it points to: the gather it records has the gradient of v[floor(v[0])]
    i = np.floor(v.value).astype(int)[0]
    np.testing.assert_array_equal(op.grad(v[i] * 3.0, v).value, [3.0, 0.0, 0.0])
    assert int(v.argmax().value) == 1


def test_ufunc_refusals_name_the_form_that_records():
    op = sg.Ops()
    v = op.var(np.array([1.0, 2.0, 3.0]), name="v")
    _recorded_first(_refusal(lambda: np.logaddexp.reduce(v)), "x.logsumexp(axis=)")
    _recorded_first(_refusal(lambda: np.add.reduce(v)), "np.sum(x, axis)")
    _recorded_first(_refusal(lambda: np.exp(v, out=np.zeros(3))), "without out=")
    assert np.conjugate(v) is v         # a real Variable is its own conjugate
    for message in (_refusal(lambda: np.nanargmax(v)), _refusal(lambda: np.fix(v, out=None))):
        # no entry: the docs page first; .value only with what it costs
        assert "docs/numpy.md" in message and "no gradient through it" in message, message
    assert len(op.tape) == 0


# ---------------------------------------------------------------- float(v) and int(v) warn

def test_float_and_int_of_a_recorded_variable_warn_at_the_callers_line():
    op = sg.Ops()
    x = op.var(np.array([0.3, 2.0, 3.0]), name="x")
    with pytest.warns(sg.ConversionWarning, match=r"v\.item\(\) or v\.value") as seen:
        assert float(x[0]) == 0.3
    assert seen[0].filename == __file__
    assert "x.at[i].set(v), np.stack" in str(seen[0].message)
    with pytest.warns(sg.ConversionWarning, match=r"^int\(\) of a Variable"):
        assert int(x[1] * 2) == 4
    assert issubclass(sg.ConversionWarning, UserWarning) and "ConversionWarning" in sg.__all__


def test_a_numpy_write_warns_and_the_recorded_form_keeps_the_gradient():
    op = sg.Ops()
    x = op.var(np.array([0.3, 2.0, 3.0]), name="x")
    y = np.zeros(3)
    with pytest.warns(sg.ConversionWarning, match="y\\[i\\] = v into a numpy array"):
        y[0] = x[0]                 # numpy calls float(x[0])
    np.testing.assert_array_equal(op.grad((y * x).sum(), x).value, [0.3, 0.0, 0.0])  # dropped
    # the answer the warning leads to (docs/numpy.md): build y from Variables
    y = np.where(np.arange(3) == 0, x[0], 0.0)
    np.testing.assert_allclose(op.grad((y * x).sum(), x).value, [0.6, 0.0, 0.0], rtol=1e-15)
    page = (ROOT / "docs" / "numpy.md").read_text()
    assert "sg.ConversionWarning" in page and "y[0] = x[0]" in page


def test_item_format_and_values_without_history_stay_silent():
    op = sg.Ops()
    x = op.var(np.array([1.5, 2.0]), name="x")
    c = op.var(4.0, requires_grad=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", sg.ConversionWarning)
        assert x[0].item() == 1.5 and f"{x[1]:.2f}" == "2.00"
        assert float(c) == 4.0 and int(c * 2) == 8 and float(x[0].detach()) == 1.5
        with op.no_grad():
            assert float(x[0] * 2) == 3.0
        assert float(sg.grad(lambda t: (t * t).sum())(np.array([2.0]))[0]) == 4.0
    assert [w for w in seen if issubclass(w.category, sg.ConversionWarning)] == []


def test_the_default_filters_show_it_once_per_line():
    code = ("import numpy as np, simplegrad as sg\n"
            "op = sg.Ops(); x = op.var(np.array([1.0, 2.0]))\n"
            "for _ in range(5):\n"
            "    y = np.zeros(2); y[0] = x[0]\n"
            "float(x[1])\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("ConversionWarning") == 2, run.stderr
    assert "<string>:4: ConversionWarning" in run.stderr
    assert "<string>:5: ConversionWarning" in run.stderr


# ---------------------------------------------------------------- porting helpers

def test_elementwise_grad_is_autograds():
    assert list(inspect.signature(sg.elementwise_grad).parameters) == ["fun", "argnum"]
    assert inspect.signature(sg.elementwise_grad).parameters["argnum"].default == 0
    x = np.array([-1.0, 0.0, 0.5, 2.0])
    t = np.tanh(x)
    np.testing.assert_allclose(sg.elementwise_grad(np.tanh)(x), 1 - t ** 2, rtol=1e-14)
    np.testing.assert_allclose(sg.elementwise_grad(sg.elementwise_grad(np.tanh))(x),
                               -2 * t * (1 - t ** 2), rtol=1e-12, atol=1e-15)
    y = np.array([3.0, 4.0, 5.0, 6.0])
    np.testing.assert_array_equal(sg.elementwise_grad(lambda a, b: a * b, 1)(x, y), x)
    ga, gb = sg.elementwise_grad(lambda a, b: a * b ** 2, (0, 1))(x, y)
    np.testing.assert_array_equal(ga, y ** 2)
    np.testing.assert_array_equal(gb, 2 * x * y)
    # the vjp of a ones seed, also off the diagonal: d/dx sum(outer(x, x)) = 2 sum(x)
    np.testing.assert_allclose(sg.elementwise_grad(lambda a: np.outer(a, a))(x),
                               np.full(4, 2 * x.sum()), rtol=1e-15)
    X = np.array([[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_allclose(sg.vmap(sg.elementwise_grad(np.sin))(X), np.cos(X), rtol=1e-15)


def test_vdot_real_and_imag_record_on_real_variables():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([0.5, -1.0, 2.0, 1.5])
    assert sg.grad(lambda a: np.vdot(a, b))(a).tolist() == [[0.5, -1.0], [2.0, 1.5]]
    assert sg.grad(lambda a: np.vdot(b, a))(a).tolist() == [[0.5, -1.0], [2.0, 1.5]]
    np.testing.assert_array_equal(sg.hessian(lambda v: np.vdot(v, v))(b), 2 * np.eye(4))
    op = sg.Ops()
    x = op.var(np.array([1.0, np.nan, np.inf]), name="x")
    assert float(np.vdot(x[:1], np.array([[2.0]])).item()) == 2.0
    with pytest.raises(sg.DTypeError, match="np.vdot: a complex constant"):
        np.vdot(x, np.array([1j, 2.0, 3.0]))
    assert np.real(x) is x
    z = np.imag(x)
    assert z.value.tolist() == [0.0, 0.0, 0.0] and z.dtype == x.dtype and not z.requires_grad
    np.testing.assert_array_equal(sg.grad(lambda a: (np.real(a) * 3 + np.imag(a)).sum())(a),
                                  np.full((2, 2), 3.0))
    out = sg.vmap(lambda r: np.imag(r) + np.real(r))(a)
    np.testing.assert_array_equal(out, a)
    i = op.argmax(x[:2] * 0.0 + np.array([1.0, 5.0]))
    assert np.imag(i).value == 0 and np.imag(i).dtype == i.dtype


def test_logsumexp_takes_scipys_signature_on_arrays():
    assert list(inspect.signature(sg.logsumexp).parameters) == [
        "a", "axis", "b", "keepdims", "return_sign"]
    # the values scipy.special.logsumexp's documentation prints
    assert sg.logsumexp(np.arange(10)) == pytest.approx(9.4586297444267107, rel=1e-15)
    assert sg.logsumexp(np.arange(10), b=np.arange(10, 0, -1)) == pytest.approx(
        9.9170178533034665, rel=1e-15)
    out, sign = sg.logsumexp([1, 2], b=[1, -1], return_sign=True)
    assert out == pytest.approx(1.5413248546129181, rel=1e-15) and sign == -1.0
    masked = np.array([np.log(2), np.inf, np.log(3)])     # weight 0 drops even inf
    assert sg.logsumexp(masked, b=np.array([1, 0, 1])) == pytest.approx(np.log(5), rel=1e-15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no warning on the log of a negative or 0 sum
        assert np.isnan(sg.logsumexp([1.0, 2.0], b=[1.0, -1.0]))
        assert sg.logsumexp(np.array([-np.inf, -np.inf]), b=[1.0, 1.0]) == -np.inf
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    np.testing.assert_allclose(sg.logsumexp(a, axis=1), np.log(np.exp(a).sum(1)), rtol=1e-15)
    kept = sg.logsumexp(a, axis=0, b=2.0, keepdims=True)
    assert kept.shape == (1, 3)
    np.testing.assert_allclose(kept, np.log(2 * np.exp(a).sum(0, keepdims=True)), rtol=1e-15)
    with pytest.raises(sg.DTypeError, match="logsumexp: values of dtype complex128"):
        sg.logsumexp(np.array([1j, 2.0]))


def test_logsumexp_records_on_variables_with_every_argument():
    a = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]])
    w = np.array([[1.0, 0.0, 2.0], [0.5, 0.5, 0.0]])
    p = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    np.testing.assert_allclose(sg.grad(lambda a: sg.logsumexp(a, axis=1).sum())(a), p,
                               rtol=1e-14)
    S = (w * np.exp(a)).sum(1, keepdims=True)
    np.testing.assert_allclose(sg.grad(lambda a: sg.logsumexp(a, axis=1, b=w).sum())(a),
                               w * np.exp(a) / S, rtol=1e-14)
    # a recorded weight: d/db log(sum(b e^a)) = e^a / sum, also where the weight is 0
    np.testing.assert_allclose(sg.grad(lambda b: sg.logsumexp(a, b=b))(w),
                               np.exp(a) / (w * np.exp(a)).sum(), rtol=1e-14)
    # the Hessian of a weighted logsumexp: diag(q) - q q^T with q = b e^a / sum
    r, bw = a[0], np.array([1.0, 2.0, 0.5])
    q = bw * np.exp(r) / (bw * np.exp(r)).sum()
    np.testing.assert_allclose(sg.hessian(lambda r: sg.logsumexp(r, b=bw))(r),
                               np.diag(q) - np.outer(q, q), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(sg.vmap(lambda r: sg.logsumexp(r, b=bw))(a),
                               np.log((bw * np.exp(a)).sum(1)), rtol=1e-15)
    op = sg.Ops()
    v = op.var(np.array([1.0, 2.0]), name="v")
    out, sign = sg.logsumexp(v, b=np.array([1.0, -1.0]), return_sign=True)
    assert out.value == pytest.approx(1.5413248546129181, rel=1e-15) and sign.value == -1.0
    # d/dv log|e^v0 - e^v1| = [e^v0, -e^v1] / (e^v0 - e^v1)
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(op.grad(out, v).value, np.array([e[0], -e[1]]) / (e[0] - e[1]),
                               rtol=1e-14)
    assert sg.logsumexp(v).prim.name == "logsumexp"     # no weights: the primitive itself
    assert sg.logsumexp(v, axis=0, keepdims=True).shape == (1,)
    assert np.isnan(sg.logsumexp(v, b=np.array([1.0, -1.0])).value)


def test_the_new_names_are_exported_and_documented():
    for name in ("elementwise_grad", "logsumexp", "ConversionWarning"):
        assert name in sg.__all__ and hasattr(sg, name)
    pages = (ROOT / "docs" / "transforms.md").read_text() + (ROOT / "docs" / "numpy.md").read_text()
    for name in ("sg.elementwise_grad", "sg.logsumexp", "np.vdot", "np.real", "np.imag"):
        assert name in pages, name
