"""Programs at other input sizes: recorded at one batch, replayed at another.

The oracle is a fresh recording at the new size (float64, 1e-12): a program recorded at batch
32 and called at batch 1, 7 or 100 must give what recording at that batch gives, the mean's
1/N included (also against its closed form). Every registered primitive and case, resized
along one size, either gives the fresh recording's values or raises ShapeError; never
another value. Entries that pin a size raise ShapeError naming them.
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

import simplegrad as sg
from tests.test_primitives import case_id, sample
from tests.test_program import record, values

TOL = {"rtol": 1e-12, "atol": 1e-12}
D, H = 5, 8         # features and hidden units: not the batch


def weights(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.normal(size=(D, H)), rng.normal(size=H), rng.normal(size=(H, 1))]


def mlp(n: int, params: list, loss: str = "mean", seed: int = 0) -> sg.Program:
    """An MLP's loss and gradients in its weights, recorded at batch ``n``."""
    rng = np.random.default_rng(seed)
    op = sg.Ops()
    X = op.var(rng.normal(size=(n, D)), name="X")
    y = op.var(rng.normal(size=(n, 1)), name="y")
    W1, b1, W2 = (op.var(p, name=k) for p, k in zip(params, ("W1", "b1", "W2")))
    err = (X @ W1 + b1).tanh() @ W2 - y
    L = (err ** 2).mean() if loss == "mean" else (err ** 2).sum(axis=0).sum()
    return op.program([X, y, W1, b1, W2], [L, *op.grad(L, [W1, b1, W2])])


def batch(n: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.normal(size=(n, D)), rng.normal(size=(n, 1))]


def close(got, want) -> None:
    for k, (g, w) in enumerate(zip(got, want)):
        assert np.shape(g) == np.shape(w), f"output {k}"
        np.testing.assert_allclose(g, w, err_msg=f"output {k}", **TOL)


# ---------------------------------------------------------------- an MLP at other batches


@pytest.mark.parametrize("loss", ["mean", "sum"])
@pytest.mark.parametrize("n", [1, 7, 100])
def test_mlp_program_at_another_batch_equals_a_fresh_recording(n, loss, rng):
    params = weights(rng)
    prog = mlp(32, params, loss)
    compiled = sg.compile(prog)
    data = batch(n, rng)
    fresh = mlp(n, params, loss)(*data, *params)
    close(prog(*data, *params), fresh)
    close(compiled(*data, *params), fresh)
    close(compiled.with_shapes(*(np.shape(a) for a in data + params))(*data, *params), fresh)
    # the recorded size still runs the program itself, with no copy made
    here = batch(32, rng)
    assert prog.with_shapes(*(np.shape(a) for a in here + params)) is prog
    close(prog(*here, *params), mlp(32, params, loss)(*here, *params))


def test_the_means_count_follows_the_batch(rng):
    # d/dw mean(X @ w) = X.mean(axis=0): the 1/N of a batch of 32 becomes 1/7
    op = sg.Ops()
    X, w = op.var(rng.normal(size=(32, 3)), name="X"), op.var(rng.normal(size=3), name="w")
    L = (X @ w).mean()
    prog = op.program([X, w], [L, op.grad(L, w)])
    assert prog.counts and prog.constants[prog.counts[0].const].value == 32
    X7 = rng.normal(size=(7, 3))
    for run in (prog, sg.compile(prog)):
        value, g = run(X7, w.value)
        np.testing.assert_allclose(value, (X7 @ w.value).sum() / 7, **TOL)
        np.testing.assert_allclose(g, X7.sum(axis=0) / 7, **TOL)
    small = prog.with_shapes((7, 3), (3,))
    assert small.constants[small.counts[0].const].value == 7 and small.inputs[0].shape == (7, 3)


@pytest.mark.parametrize(("name", "axis", "ddof"), [("mean", 0, 0), ("var", 0, 1),
                                                    ("std", 0, 0), ("var", None, 2)])
def test_counted_reductions_over_the_batch(name, axis, ddof, rng):
    kw = {} if name == "mean" else {"ddof": ddof}

    def program(n: int) -> sg.Program:
        op = sg.Ops()
        X = op.var(np.random.default_rng(n).normal(size=(n, 4)), name="X")
        L = (getattr(np, name)(X * X, axis=axis, **kw) * np.arange(1.0, 5.0)).sum()
        g = op.grad(L, X)
        H = op.grad((g * g).sum(), X)           # the count in a second-order gradient too
        return op.program(X, [L, g, H])

    prog = program(32)
    for n in (5, 40):
        X = rng.normal(size=(n, 4))
        close(prog(X), program(n)(X))
        close(sg.compile(prog)(X), program(n)(X))


def test_hidden_size_equal_to_the_batch_stays_fixed(rng):
    # X (32, 5) @ W (5, 32): the batch and the hidden units have one size when recorded, and
    # only the batch follows X
    op = sg.Ops()
    X, W = op.var(rng.normal(size=(32, 5)), name="X"), op.var(rng.normal(size=(5, 32)), name="W")
    L = (X @ W).tanh().mean()
    prog = op.program([X, W], [L, op.grad(L, W)])
    X9 = rng.normal(size=(9, 5))
    op9 = sg.Ops()
    x9, w9 = op9.var(X9), op9.var(W.value)
    L9 = (x9 @ w9).tanh().mean()
    close(prog(X9, W.value), [L9.value, op9.grad(L9, w9).value])
    with pytest.raises(sg.ShapeError, match=r"input W has shape \(5, 32\), got \(6, 32\): "
                                            r"its axis 0 \(6\) must have the size of X axis 1"):
        prog(X9, rng.normal(size=(6, 32)))      # 6 features in W, 5 in X


def test_reshapes_that_keep_the_batch_free_follow_it(rng):
    def program(n: int) -> sg.Program:
        op = sg.Ops()
        X = op.var(np.zeros((n, 2, 3)), name="X")
        Y = X.reshape(n, 6) * np.arange(6.0)    # the batch leads: it stays free
        Z = Y.reshape(n, 3, 2).sum(axis=2).mean()
        return op.program(X, [Z, op.grad(Z, X)])

    prog = program(32)
    X = rng.normal(size=(11, 2, 3))
    close(prog(X), program(11)(X))
    assert [n.attrs["shape"] for n in prog.with_shapes((11, 2, 3)).nodes
            if n.prim.name == "reshape"][:2] == [(11, 6), (11, 3, 2)]


def test_a_flattened_batch_with_minus_one_stays_free(rng):
    # numpy infers a -1: X.reshape(-1) has n * 6 entries at any batch n, and unflattens back
    def program(n: int) -> sg.Program:
        op = sg.Ops()
        X = op.var(np.zeros((n, 2, 3)), name="X")
        flat = X.reshape(-1) * 2.0
        L = (flat.reshape(n, 6) ** 2).mean() + flat.sum()
        return op.program(X, [L, op.grad(L, X)])

    prog = program(32)
    for n in (1, 5, 40):
        X = rng.normal(size=(n, 2, 3))
        close(prog(X), program(n)(X))
    shapes = [n.attrs["shape"] for n in prog.with_shapes((5, 2, 3)).nodes
              if n.prim.name == "reshape"]
    assert shapes == [(-1,), (5, 6), (30,), (5, 2, 3)]


# ---------------------------------------------------------------- what pins a size


def test_a_reshape_to_a_literal_shape_pins_the_batch(rng):
    op = sg.Ops()
    X = op.var(rng.normal(size=(32, 5)), name="X")
    flat = op.reshape(X, (160,), name="flat")   # the batch mixed with the features
    prog = op.program(X, (flat * flat).sum())
    with pytest.raises(sg.ShapeError, match=r"X axis 0 has size 7, but flat = reshape\(...\) "
                                            r"reshapes to the literal shape \[160\]"):
        prog(rng.normal(size=(7, 5)))
    with pytest.raises(sg.ShapeError, match="flat = reshape"):
        sg.compile(prog)(rng.normal(size=(7, 5)))
    np.testing.assert_allclose(prog(np.ones((32, 5))), 160.0, **TOL)    # as recorded: runs


def test_a_recorded_index_along_the_batch_pins_it(rng):
    # the targets of a cross-entropy given as an array: rows 0..31 picked by recorded indices
    op = sg.Ops()
    X, W = op.var(rng.normal(size=(32, 4)), name="X"), op.var(rng.normal(size=(4, 3)), name="W")
    L = sg.nn.losses.cross_entropy(X @ W, rng.integers(0, 3, 32))
    prog = op.program([X, W], [L, op.grad(L, W)])
    for n in (7, 100):
        with pytest.raises(sg.ShapeError, match="getitem.* indexes this axis with a recorded "
                                                "index"):
            prog(rng.normal(size=(n, 4)), W.value)
    last = sg.Ops()
    x = last.var(rng.normal(size=(32, 2)), name="x")
    with pytest.raises(sg.ShapeError, match="recorded index"):
        last.program(x, x[-1].sum())(rng.normal(size=(40, 2)))


def test_a_batch_shaped_constant_pins_the_batch(rng):
    op = sg.Ops()
    X = op.var(rng.normal(size=(32, 3)), name="X")
    mask = op.var(rng.uniform(size=(32, 1)) > 0.5, name="mask")     # not an input: constant
    prog = op.program(X, (X * mask).sum())
    with pytest.raises(sg.ShapeError, match=r"the constant mask has shape \(32, 1\)"):
        prog(rng.normal(size=(8, 3)))
    prog(rng.normal(size=(32, 3)))


def test_a_count_that_would_reach_zero_is_refused(rng):
    op = sg.Ops()
    X = op.var(rng.normal(size=(8, 2)), name="X")
    L = np.var(X, axis=0, ddof=1).sum()
    prog = op.program(X, [L, op.grad(L, X)])
    with pytest.raises(sg.ShapeError, match=r"less ddof 1\) would be 0"):
        prog(rng.normal(size=(1, 2)))
    X3 = rng.normal(size=(3, 2))
    np.testing.assert_allclose(prog(X3)[1], 2 * (X3 - X3.mean(axis=0)) / 2, **TOL)


def test_inputs_that_must_share_a_size_are_checked(rng):
    params = weights(rng)
    prog = mlp(32, params)
    X, y = rng.normal(size=(7, D)), rng.normal(size=(8, 1))
    for run in (prog, sg.compile(prog)):
        with pytest.raises(sg.ShapeError, match=r"input y has shape \(32, 1\), got \(8, 1\): "
                                                r"its axis 0 \(8\) must have the size of X "
                                                r"axis 0 \(7\)"):
            run(X, y, *params)
        with pytest.raises(sg.ShapeError, match=r"input X has shape \(32, 5\), got \(7,\)"):
            run(X[:, 0], y, *params)


def test_a_size_recorded_as_1_is_not_a_batch(rng):
    op = sg.Ops()
    X, b = op.var(rng.normal(size=(1, 3)), name="X"), op.var(rng.normal(size=3), name="b")
    prog = op.program([X, b], (X + b).sum())
    with pytest.raises(sg.ShapeError, match="recorded with size 1, which broadcasts"):
        prog(rng.normal(size=(4, 3)), b.value)


def test_simplified_programs_follow_the_batch_and_saved_ones_keep_theirs(tmp_path, rng):
    params = weights(rng)
    prog = mlp(32, params)
    simple = sg.simplify(prog)
    assert simple.origin is prog and len(simple) < len(prog)
    data = batch(7, rng)
    fresh = mlp(7, params)(*data, *params)
    close(simple(*data, *params), fresh)
    close(sg.compile(simple)(*data, *params), fresh)
    close(sg.simplify(simple)(*data, *params), fresh)       # simplified twice: same origin
    again = simple.with_shapes(*((7, D), (7, 1)), *(p.shape for p in params))
    assert len(again) == len(simple)        # the resized origin, simplified again
    simple.save(tmp_path / "simple")        # a file holds the simplified entries only
    loaded = sg.load_program(tmp_path / "simple")
    assert loaded.counts is None
    with pytest.raises(sg.ShapeError, match="keeps no record of which sizes follow.*save it "
                       "before sg.simplify"):
        loaded(*data, *params)


def test_indexing_gradients_scatter_into_the_batch(rng):
    # x[:, 0] and x[..., 1:] read every row: their gradients scatter into X's shape, which
    # follows the batch (the scatter's shape attribute is resized with it)
    def build(op, X, w):
        L = (X[:, 0] ** 2).sum() + (X[..., 1:] * w[1:]).mean() + (X @ w).sum()
        return [L, *op.grad(L, [X, w])]

    op = sg.Ops()
    X, w = op.var(rng.normal(size=(8, 3)), name="X"), op.var(rng.normal(size=3), name="w")
    prog = op.program([X, w], build(op, X, w))
    assert "scatter_add" in {n.prim.name for n in prog.nodes}
    for n in (1, 5, 13):
        Xn = rng.normal(size=(n, 3))
        gX = 2 * np.pad(Xn[:, :1], ((0, 0), (0, 2))) + w.value + np.pad(
            np.broadcast_to(w.value[1:] / (2 * n), (n, 2)), ((0, 0), (1, 0)))
        op2 = sg.Ops()
        fresh = values(build(op2, op2.var(Xn), op2.var(w.value)))
        for run in (prog, sg.compile(prog)):
            got = run(Xn, w.value)
            close(got, fresh)
            np.testing.assert_allclose(got[1], gX, **TOL)      # by hand


# ---------------------------------------------------------------- kept when saved


def test_save_load_and_pickle_keep_the_sizes(tmp_path, rng):
    params = weights(rng)
    prog = mlp(32, params)
    prog.save(tmp_path / "mlp")
    data = batch(13, rng)
    fresh = mlp(13, params)(*data, *params)
    for again in (sg.load_program(tmp_path / "mlp"), pickle.loads(pickle.dumps(prog)),
                  pickle.loads(pickle.dumps(sg.compile(prog)))):
        assert again.counts == prog.counts if isinstance(again, sg.Program) else True
        close(again(*data, *params), fresh)


def test_files_saved_before_load_with_their_sizes_fixed():
    from pathlib import Path
    prog = sg.load_program(Path(__file__).parent / "data" / "saved_0_1_gradient")
    assert prog.counts is None
    shapes = [i.shape for i in prog.inputs]
    prog(*(np.full(s, 0.5) for s in shapes))
    bigger = [(s[0] + 1, *s[1:]) if s else s for s in shapes]
    if bigger != shapes:
        with pytest.raises(sg.ShapeError, match="keeps no record"):
            prog(*(np.full(s, 0.5) for s in bigger))


def test_malformed_counts_are_refused(tmp_path, rng):
    import json
    prog = mlp(32, weights(rng))
    json_path, _ = prog.save(tmp_path / "mlp")
    doc = json.loads(json_path.read_text())
    doc["counts"] = [[0, 10**6, None, 0, None]]
    json_path.write_text(json.dumps(doc))
    with pytest.raises(sg.FormatError, match="counts 0"):
        sg.load_program(tmp_path / "mlp")


# ---------------------------------------------------------------- every primitive


def _bigger(shapes: list[tuple]) -> list[tuple] | None:
    """The shapes with every axis of the first input's first size n > 1 made n + 2 (None when
    there is none, or n + 2 is a size already)."""
    n = next((s[0] for s in shapes if s and s[0] > 1), None)
    if n is None or any(n + 2 in s for s in shapes):
        return None
    return [tuple(n + 2 if k == n else k for k in s) for s in shapes]


def _params() -> list:
    return [pytest.param(prim, case, order, id=f"{prim.name}-{case_id(case)}-order{order}")
            for prim in sg.REGISTRY.values() for case in prim.cases for order in (0, 1, 2)
            if _bigger([tuple(s) for s in case.shapes]) is not None]


@pytest.mark.parametrize(("prim", "case", "order"), _params())
def test_every_primitive_resized_equals_a_fresh_recording_or_refuses(prim, case, order, rng):
    shapes = _bigger([tuple(s) for s in case.shapes])
    there = sample(prim, dataclasses.replace(case, shapes=tuple(shapes)), rng)
    try:
        _, _, fresh = record(prim, dataclasses.replace(case, shapes=tuple(shapes)), there, order)
    except (ValueError, IndexError):
        pytest.skip("the case's attributes fix its shapes")
    op, xs, outs = record(prim, case, sample(prim, case, rng), order)
    prog = op.program(xs, outs)
    try:
        got = prog(*there)
    except sg.ShapeError:
        return      # a size pinned by an entry: refused, never a wrong value
    got = [got] if order == 0 else got
    close(got, values(fresh))


def test_a_zero_gradient_follows_its_variable_saved_too(tmp_path, rng):
    # floor has no gradient: dL/dX is zeros of X's shape, which follows X
    op = sg.Ops()
    X, w = op.var(rng.normal(size=(6, 2)), name="X"), op.var(rng.normal(size=2), name="w")
    L = (X.floor() * w).sum()
    prog = op.program([X, w], op.grad(L, [X, w]))
    prog.save(tmp_path / "floor")
    X9 = rng.normal(size=(9, 2))
    for run in (prog, sg.load_program(tmp_path / "floor"), sg.compile(prog)):
        gX, gw = run(X9, w.value)
        np.testing.assert_array_equal(gX, np.zeros((9, 2)))
        np.testing.assert_array_equal(gw, np.floor(X9).sum(axis=0))
