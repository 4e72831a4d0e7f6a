"""No silent zeros (issue 16, item 5 and where's dtype of item 6): a gradient that cannot be
computed raises, recorded values cannot be written, a growing tape warns, and constants keep
their dtype. Expected answers are written out by hand (PyTorch's and JAX's semantics) or come
from numpy itself.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import simplegrad as sg

# ---------------------------------------------------------------- recorded values are immutable


def _variables():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0, 4.0])
    y = x * 2.0
    return op, x, [x, y, y.reshape(2, 2), y.reshape(2, 2).T, y[1:3], op.sum(y)]


def test_a_write_through_value_raises_whatever_flag_is_set():
    op, x, vs = _variables()
    for v in vs:
        before = np.array(v.raw)
        arr = v.value
        with pytest.raises(ValueError):
            arr.flags.writeable = True
        with pytest.raises(ValueError):
            arr[...] = 0.0
        with pytest.raises(ValueError):
            v.numpy()[...] = 0.0
        np.testing.assert_array_equal(v.raw, before)
        assert np.shares_memory(arr, v.raw)         # a view, not a copy
    with pytest.raises(sg.ArgumentError):          # numpy's conversions refuse a Variable
        np.asarray(x)
    with pytest.raises(sg.ArgumentError):
        x.__array__()


def test_a_gradient_cannot_be_changed_through_value():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = x * x                                       # dy/dx = 2 x, read from the recorded x
    arr = x.value
    with pytest.raises(ValueError):
        arr.flags.writeable = True
    np.testing.assert_array_equal(op.grad(y.sum(), x).value, [2.0, 4.0])

# ---------------------------------------------------------------- where keeps the branches' dtype


BRANCHES = {
    "f64": np.array([1.5, 2.5, -3.5]),
    "f32": np.array([1.5, 2.5, -3.5], dtype=np.float32),
    "i64": np.array([1, 2, 3]),
    "bool": np.array([True, False, True]),
    "scalar": 7.25,
}


def test_where_with_a_recorded_condition_and_constant_branches_is_numpy_where():
    op = sg.Ops()
    x = op.var([1.0, -2.0])
    got = op.where(x > 0, np.array([1.5, 2.5]), np.array([-1.0, -2.0]))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.value, [1.5, -2.0])


FLOAT = ("f64", "f32")     # what a leaf can hold
WHERE_CASES = [(a, b, kind) for a, b in itertools.product(BRANCHES, repeat=2)
               for kind in ("none", "a", "b", "both")
               if (kind in ("none", "b") or a in FLOAT) and (kind in ("none", "a") or b in FLOAT)]


@pytest.mark.parametrize("a,b,variable", WHERE_CASES)
def test_where_matches_numpy_for_every_branch_kind(a, b, variable):
    op = sg.Ops()
    x = op.var([0.5, -1.0, 2.0])
    cond = x > 0
    va, vb = BRANCHES[a], BRANCHES[b]
    args = []
    for v, as_var in ((va, variable in ("a", "both")), (vb, variable in ("b", "both"))):
        if as_var:
            v = op.var(v)
        args.append(v)
    got = op.where(cond, *args)
    # numpy's where on what is recorded: constant arrays take the dtype of the first float
    # Variable among the inputs (the documented rule), and keep their own without one
    floats = [v.dtype for v in args if isinstance(v, sg.Variable)]
    recorded = [v.value if isinstance(v, sg.Variable) else
                np.asarray(v, floats[0]) if floats and isinstance(v, np.ndarray) else v
                for v in args]
    want = np.where(cond.value, *recorded)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.value, want)
    if not floats:      # no float Variable at all: exactly numpy's where on the given values
        np.testing.assert_array_equal(got.value, np.where(cond.value, va, vb))
        assert got.dtype == np.where(cond.value, va, vb).dtype


def test_a_bool_or_integer_variable_never_decides_a_constants_dtype():
    op = sg.Ops()
    x = op.var([0.5, -1.0, 2.0])
    mask = x > 0                                    # bool entry
    scaled = mask * np.array([1.5, 2.5, 3.5])       # numpy: bool * float64 is float64
    np.testing.assert_array_equal(scaled.value, [1.5, 0.0, 3.5])
    idx = op.argmax(x)                              # integer entry
    half = idx + np.array([0.5])
    np.testing.assert_array_equal(half.value, [2.5])

# ---------------------------------------------------------------- a gradient with no history


def _recorded():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    return op, x, (x * x).sum()


def test_grad_after_the_with_block_closed_raises_naming_the_release():
    with sg.Ops() as op:
        x = op.var([1.0, 2.0])
        L = (x * x).sum()
        np.testing.assert_array_equal(op.grad(L, x).value, [2.0, 4.0])     # inside: 2 x
    for call in (lambda: op.grad(L, x), lambda: op.grad(L, x, create_graph=False),
                 lambda: L.backward(), lambda: op.jvp(L, x, np.ones(2))):
        with pytest.raises(sg.GraphError, match="released") as caught:
            call()
        assert ".value" not in str(caught.value)    # advice that would drop the dependence


def test_grad_after_release_raises_and_a_new_recording_works():
    op, x, L = _recorded()
    op.release()
    with pytest.raises(sg.GraphError, match=r"op\.release\(\)"):
        op.grad(L, x)
    with pytest.raises(sg.GraphError, match="released"):
        op.grad(L, [x])
    L2 = (x * x).sum()                              # x is still a leaf of op: record again
    np.testing.assert_array_equal(op.grad(L2, x).value, [2.0, 4.0])


def test_grad_of_a_value_made_under_no_grad_raises():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    with op.no_grad():
        L = (x * x).sum()
        h = x * 3.0
    with pytest.raises(sg.GraphError, match="no_grad") as caught:
        op.grad(L, x)
    assert ".value" not in str(caught.value)
    with pytest.raises(sg.GraphError, match="no_grad"):
        L.backward()
    with pytest.raises(sg.GraphError, match="no_grad"):   # through it: PyTorch raises too
        op.grad((h * h).sum(), x)
    # a path around the no_grad value still gives its gradient (h is a constant there)
    np.testing.assert_array_equal(op.grad((h * x).sum(), x).value, [3.0, 6.0])


def test_leaves_and_genuinely_independent_outputs_keep_their_answers():
    op, x, L = _recorded()
    np.testing.assert_array_equal(op.grad(x, x, seed=np.ones(2)).value, [1.0, 1.0])   # dx/dx
    y = op.var([5.0, 6.0])
    np.testing.assert_array_equal(op.grad(L, y).value, [0.0, 0.0])      # no path: zeros
    c = op.var([1.0, 1.0], requires_grad=False)
    np.testing.assert_array_equal(op.grad((c * 2.0).sum(), x).value, [0.0, 0.0])
    np.testing.assert_array_equal(op.grad(y.sum(), x).value, [0.0, 0.0])   # another leaf
    op.release()                                    # a leaf stays a leaf after a release
    np.testing.assert_array_equal(op.grad(x.sum(), x).value, [1.0, 1.0])
    with op.no_grad():
        d = x.detach()
    np.testing.assert_array_equal(op.grad(x, x, seed=np.ones(2)).value, [1.0, 1.0])
    assert d.requires_grad is False

# ---------------------------------------------------------------- Parameter.assign


@pytest.mark.parametrize("create_graph", [True, False])
def test_grad_after_assign_is_the_gradient_at_the_value_each_use_saw(create_graph):
    p = sg.Parameter([1.0, 2.0])
    op = sg.Ops()
    x = op.var([1.0, 1.0])
    old = (x * p * p).sum()                     # d/dp = 2 p at p = [1, 2]
    p.assign([3.0, 4.0])
    np.testing.assert_array_equal(op.grad(old, p, create_graph=create_graph).value, [2.0, 4.0])
    new = (x * p * p).sum()                     # computed again: at the new value
    np.testing.assert_array_equal(op.grad(new, p, create_graph=create_graph).value, [6.0, 8.0])
    both = old + new                            # one use per value: the sum, as backward gives
    np.testing.assert_array_equal(op.grad(both, p, create_graph=create_graph).value,
                                  [8.0, 12.0])
    p.grad = None                               # (op.grad set it; backward accumulates)
    both.backward()
    np.testing.assert_array_equal(p.grad.value, [8.0, 12.0])


def test_grad_after_assign_on_the_implicit_ops_of_parameters():
    p = sg.Parameter([1.0, 2.0])
    L = (p * p).sum()                           # recorded on the parameters' implicit Ops
    p.assign([5.0, 6.0])
    np.testing.assert_array_equal(L.ops.grad(L, p).value, [2.0, 4.0])
    L2 = (p * p).sum()
    np.testing.assert_array_equal(L2.ops.grad(L2, p).value, [10.0, 12.0])


def test_a_training_loop_with_assign_on_one_ops_gets_every_steps_gradient():
    # gradient descent on (p - 3)^2 with op.grad: the PyTorch habit of assigning the data and
    # computing again; zeros would leave p where it started
    p = sg.Parameter([0.0])
    for _ in range(60):
        with sg.Ops() as op:
            loss = ((op.var([1.0]) * p - 3.0) ** 2).sum()
            p.assign(p.value - 0.1 * op.grad(loss, p).value)
    np.testing.assert_allclose(p.value, [3.0], rtol=1e-5)

# ---------------------------------------------------------------- a tape that keeps growing


def _growth(run, action="always") -> list:
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter(action)
        run()
    return [c for c in caught if issubclass(c.category, sg.TapeGrowthWarning)]


@pytest.mark.parametrize("create_graph", [True, False])
def test_a_reused_ops_warns_at_every_pass_from_the_hundredth(create_graph):
    def loop():
        op = sg.Ops()
        W = sg.Parameter([0.5, -0.5])
        X = np.array([[1.0, 2.0], [3.0, 4.0]])
        for _ in range(120):
            loss = ((op.var(X) @ W) ** 2).sum()           # a new forward from the leaves
            W.assign(W.value - 0.01 * op.grad(loss, W, create_graph=create_graph).value)
    assert len(_growth(loop)) == 21                     # passes 100 to 120
    shown = _growth(loop, "default")
    assert len(shown) == 1 and shown[0].filename == __file__ and "op.release()" in \
        str(shown[0].message)


def test_one_step_with_many_nested_passes_does_not_warn():
    def hessian_rows():     # a Hessian by rows on one Ops: each row's L is read from a gradient
        op = sg.Ops()
        x = op.var(np.linspace(0.1, 1.0, 150))
        g = op.grad((x ** 3).sum(), x)
        rows = [op.grad(g[i], x).value for i in range(150)]
        np.testing.assert_allclose(np.array(rows), np.diag(6 * x.value), rtol=1e-12)

    def grad_of_grad_chain():   # derivatives of derivatives, 120 deep
        op = sg.Ops()
        x = op.var(0.3)
        y = x.sin()
        for _ in range(120):
            y = op.grad(y, x)

    def jacobian_rows():    # one graph swept again and again, recording each pass
        op = sg.Ops()
        x = op.var(np.ones(150))
        y = x * x
        for i in range(150):
            op.grad(y, x, seed=np.eye(150)[i])

    def fresh_ops_per_step():
        for _ in range(150):
            with sg.Ops() as op:
                v = op.var([1.0, 2.0])
                op.grad((v * v).sum(), v)

    for run in (hessian_rows, grad_of_grad_chain, jacobian_rows, fresh_ops_per_step):
        assert _growth(run) == [], run.__name__
    assert _growth(lambda: sg.hessian(lambda v: (v ** 3).sum())(np.ones(150))) == []

# ---------------------------------------------------------------- outputs that do not depend


def _disconnected(run) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        out = run()
    return out, [c for c in caught if issubclass(c.category, sg.DisconnectedWarning)]


def constant_output(x):
    return 3.0


def left_the_tape(x):
    return np.sin(x.value).sum()


def through_float(x):
    return math.sin(float(x))


@pytest.mark.parametrize("f", [constant_output, left_the_tape, through_float],
                         ids=lambda f: f.__name__)
def test_a_transform_of_a_disconnected_output_returns_zeros_and_warns_naming_f(f):
    x = np.array(0.5) if f is through_float else np.array([0.5, 1.5])
    calls = {
        "grad": lambda: sg.grad(f)(x),
        "value_and_grad": lambda: sg.value_and_grad(f)(x)[1],
        "vjp": lambda: sg.vjp(f, x)[1](np.ones(np.shape(f(sg.Ops().var(x)))))[0],
        "jvp": lambda: sg.jvp(f, (x,), (np.ones_like(x),))[1],
    }
    for name, run in calls.items():
        out, caught = _disconnected(run)
        np.testing.assert_array_equal(out, np.zeros(np.shape(out)))
        assert len(caught) == 1, name
        assert f.__name__ in str(caught[0].message) and caught[0].filename == __file__
    for _ in range(3):      # every call warns (the filters, not simplegrad, decide repeats)
        assert len(_disconnected(calls["grad"])[1]) == 1


def test_a_connected_output_does_not_warn_even_with_a_zero_derivative():
    for f in (lambda x: (x * 0.0).sum(), lambda x: (x * x).sum()):
        _, caught = _disconnected(lambda f=f: sg.grad(f)(np.array([1.0, 0.0])))
        assert caught == []
    _, caught = _disconnected(lambda: sg.jvp(lambda x: x * 2.0, (np.ones(2),), (np.ones(2),)))
    assert caught == []


@pytest.mark.parametrize("f", [constant_output, left_the_tape, through_float],
                         ids=lambda f: f.__name__)
def test_the_other_transforms_of_a_disconnected_output_warn_too(f):
    x = np.array(0.5)
    calls = {
        "jacobian": lambda: sg.jacobian(f)(x),
        "hessian": lambda: sg.hessian(f)(x),
        "derivative": lambda: sg.derivative(f)(x),
        "taylor": lambda: sg.taylor(f, x, 1.0, 2)[1:],
        "hvp": lambda: sg.hvp(f, x, np.float64(1.0)),
    }
    for name, run in calls.items():
        out, caught = _disconnected(run)
        np.testing.assert_array_equal(np.asarray(out), np.zeros(np.shape(out)))
        assert len(caught) == 1 and f.__name__ in str(caught[0].message), name


def test_a_gradient_cut_by_a_release_in_the_middle_raises():
    """L2 = L * 2 recorded after L's Ops was released: the path from x to L2 went through L's
    released history, so op.grad(L2, x) refuses instead of answering zeros; a wrt made after
    the release with no path to L2 keeps JAX's zeros, and one that reaches L2 its gradient."""
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    L = (x * x).sum()
    op.release()
    L2 = L * 2.0
    with pytest.raises(sg.GraphError, match="whose history was released"):
        op.grad(L2, x)
    y, z = op.var([3.0], name="y"), op.var([4.0], name="z")
    L3 = (L * y).sum()
    np.testing.assert_array_equal(op.grad(L3, y).value, [5.0])      # dL3/dy = L = 5
    np.testing.assert_array_equal(op.grad(L3, z).value, [0.0])      # no path, made after
