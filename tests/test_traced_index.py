"""Indexing by recorded integers (x[i], np.take(x, i), x[i:i + k]) against numpy's indexing
of the values and a Python loop over the examples under vmap; gradients against the closed
form (one-hot scatters) and float64 central differences; recorded programs replay at new
positions.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

X = np.arange(20.0).reshape(4, 5) * 0.5 - 3.0


def test_vmap_of_indexing_by_a_batched_integer():
    idx = np.array([0, 4, 1, 3])
    np.testing.assert_array_equal(sg.vmap(lambda x, i: x[i])(X, idx), X[np.arange(4), idx])
    np.testing.assert_array_equal(sg.vmap(lambda x, i: np.take(x, i))(X, idx),
                                  [np.take(x, i) for x, i in zip(X, idx)])


def test_vmap_of_gradients_through_a_batched_index(rng):
    idx = np.array([2, 0, 4, 4])
    grads = sg.vmap(sg.grad(lambda x, i: x[i] ** 3))(X, idx)
    want = np.zeros_like(X)
    want[np.arange(4), idx] = 3 * X[np.arange(4), idx] ** 2
    np.testing.assert_allclose(grads, want, rtol=1e-14)
    for k in range(4):
        np.testing.assert_allclose(grads[k], sg.grad(lambda x, j=idx[k]: x[j] ** 3)(X[k]))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_dynamic_slices_under_vmap(k):
    starts = np.array([0, 2, 1, 5 - k])
    got = sg.vmap(lambda x, i: x[i:i + k])(X, starts)
    np.testing.assert_array_equal(got, [x[i:i + k] for x, i in zip(X, starts)])
    g = sg.vmap(sg.grad(lambda x, i: (x[i:i + k] ** 2).sum()))(X, starts)
    want = np.zeros_like(X)
    for r, i in enumerate(starts):
        want[r, i:i + k] = 2 * X[r, i:i + k]
    np.testing.assert_allclose(g, want, rtol=1e-14)


def test_recorded_positions_replay_at_new_values():
    op = sg.Ops()
    x = op.var([0.5, 3.0, -1.0, 2.0], name="x")
    i = op.argmax(x)                        # an integer entry
    y = x[i] + x[i - 1:i + 1].sum() + np.take(x, i)
    (g,) = op.grad(y, [x])
    prog = op.program([x], [y, g])
    new = np.array([4.0, -2.0, 0.0, 7.0])   # argmax moves to 3
    out, grad = prog(new)
    assert out == pytest.approx(7.0 + 0.0 + 7.0 + 7.0)
    np.testing.assert_array_equal(grad, [0.0, 0.0, 1.0, 3.0])


def test_mixed_indices_match_numpy():
    op = sg.Ops()
    a = np.arange(60.0).reshape(3, 4, 5)
    x = op.var(a, name="x")
    j = op.argmin(op.var([3.0, 1.0, 0.0, 2.0]))      # 2
    k = op.argmax(op.var([0.0, 9.0, 1.0]))            # 1
    for got, want in [(x[j], a[2]), (x[k], a[1]), (x[:, j], a[:, 2]),
                      (x[1, j], a[1, 2]), (x[..., j], a[..., 2]), (x[k, j, 1:3], a[1, 2, 1:3]),
                      (x[None, k], a[None, 1]), (x[:, j:j + 2, ::2], a[:, 2:4, ::2]),
                      (x[k, :, j - 1:j + 2:2], a[1, :, 1:4:2])]:
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.value, want)


def test_an_integer_array_variable_gathers(rng):
    op = sg.Ops()
    x = op.var(X, name="x")
    order = op.argsort(op.var([3.0, 0.0, 2.0, 1.0]))         # [1, 3, 2, 0]
    np.testing.assert_array_equal(x[order].value, X[[1, 3, 2, 0]])
    np.testing.assert_array_equal(x[:, order].value, X[:, [1, 3, 2, 0]])
    key = np.array([3.0, 0.0, 2.0, 1.0])
    sg.check_grads(lambda v: v[(v[:, 0] * 0.0 + key).argsort()] ** 2, [X])


def test_gradient_against_finite_differences():
    sg.check_grads(lambda x: (x[x.argmax()] * x[x.argmin():x.argmin() + 2]).sum(),
                   [np.array([0.3, -1.2, 0.7, 2.0, 0.1])], atol=1e-6, rtol=1e-6)


def test_errors_name_the_operation_and_are_raised_before_recording():
    op = sg.Ops()
    x = op.var(X, name="x")
    i = op.argmax(op.var([0.0, 1.0, 0.5]))             # 1
    end, real, order, mask = i + 6, x[0, 0], op.argsort(op.var([1.0, 0.0])), x > 0
    before = len(op.tape)
    with pytest.raises(sg.OutOfBoundsError, match=r"getitem: the dynamic slice \[1:7\]"):
        x[0, i:end]
    with pytest.raises(sg.ArgumentError, match="getitem: a slice start must be an integer"):
        x[real:2]
    with pytest.raises(sg.ArgumentError, match="constant bool mask cannot be mixed"):
        x[np.array([True, False, True, False]), order]
    with pytest.raises(sg.OutOfBoundsError, match="getitem: an index is out of bounds .* 5"):
        x[0, end]
    with pytest.raises(sg.ArgumentError, match="getitem: a recorded bool mask .* op.where"):
        x[mask]
    with pytest.raises(sg.ArgumentError, match="one length for every example"):
        sg.vmap(lambda r, a, b: r[a:b])(X, np.array([0, 1, 0, 1]), np.array([2, 2, 2, 2]))
    assert len(op.tape) == before


def test_a_constant_table_gathered_by_a_recorded_index():
    """op.take and op.getitem of a constant array by a recorded integer (numpy's own X[i] and
    np.take(X, i) never hand the index to simplegrad)."""
    idx = np.array([2, 0, 3, 3])
    np.testing.assert_array_equal(sg.vmap(lambda i: i.ops.take(X, i, axis=0))(idx), X[idx])
    np.testing.assert_array_equal(sg.vmap(lambda i: i.ops.getitem(X, (slice(None), i)))(idx),
                                  X[:, idx].T)
    g = sg.vmap(sg.grad(lambda w, i: (w * w.ops.take(X, i, axis=0)).sum()))(np.ones((4, 5)), idx)
    np.testing.assert_array_equal(g, X[idx])


def test_programs_with_the_new_entries_replay_compile_and_load(tmp_path):
    """A gradient program through recorded positions, a dynamic slice, betainc with a recorded
    a, polygamma, cummax, erfinv, median, convolve and cov, at new inputs: replayed, compiled
    and loaded from a file, each equal to a fresh recording there."""
    def build(op, av, xv, kv):
        a, x, k = op.var(av, name="a"), op.var(xv, name="x"), op.var(kv, name="k")
        lo = op.argmin(k)
        y = (op.betainc(a, 3.0, x) + x[op.argmax(k)] + x[lo:lo + 2].sum() + np.median(x) +
             op.polygamma(1, x) + x.cummax() + x.erfinv() + np.convolve(x, [1.0, 2.0], "same") +
             np.cov(x))
        (g,) = op.grad(y.sum(), [x])
        return a, x, k, y, g

    op = sg.Ops()
    a, x, k, y, g = build(op, 2.0, [0.2, 0.5, 0.7], [0.0, 3.0, 1.0])
    prog = op.program([a, x, k], [y, g])
    new = (np.array(3.0), np.array([0.3, 0.1, 0.9]), np.array([5.0, 0.0, 2.0]))
    *_, y2, g2 = build(sg.Ops(), *new)
    json_path, _ = prog.save(str(tmp_path / "p"))
    for run in (prog, sg.compile(prog), sg.load_program(json_path)):
        out = run(*new)
        np.testing.assert_allclose(out[0], y2.value, rtol=1e-13)
        np.testing.assert_allclose(out[1], g2.value, rtol=1e-13)
