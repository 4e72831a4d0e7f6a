"""Programs at other batch sizes: the counts read from the reductions' records, batch 0, and
the list of pinning entries in docs/programs.md.

The oracles are closed forms in numpy (float64, 1e-12) and fresh recordings at the new size.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine import explain
from tests.test_primitives import sample

TOL = {"rtol": 1e-12, "atol": 1e-12}


def _program(n: int, f, width: int = 3, seed: int = 1) -> sg.Program:
    """``f(X)`` and its gradient in X, recorded at batch ``n``."""
    op = sg.Ops()
    X = op.var(np.random.default_rng(seed).normal(size=(n, width)), name="X")
    L = f(X)
    return op.program(X, [L, op.grad(L, X)])


# ---------------------------------------------------------------- counts from the records


def test_the_counted_records_name_their_multiple():
    # what the vjp of each counted reduction multiplies 1 / count by: d mean = g / n,
    # d var = 2 (x - mean) / (n - ddof), d std = (x - mean) / ((n - ddof) std)
    counted = {p.name: p.counted for p in sg.REGISTRY.values() if p.counted}
    assert {k: (1.0 if v is True else v) for k, v in counted.items()} == \
        {"mean": 1.0, "variance": 2.0, "std": 1.0}


@pytest.mark.parametrize("prim", [p for p in sg.REGISTRY.values() if p.counted],
                         ids=lambda p: p.name)
def test_a_counted_rule_scales_by_its_count_only(prim, rng):
    # the fact extraction reads from the record: in a counted reduction's pullback and
    # tangent, every entry that scales by a number scales by times / (n - ddof) (times
    # over the number), n the entries reduced into one output
    times = {"mean": 1.0, "variance": 2.0, "std": 1.0}[prim.name]
    for case in prim.cases:
        (x,) = sample(prim, case, rng)
        attrs = dict(case.attrs)
        n = x.size // max(np.size(prim.forward(x, **attrs)), 1)
        dof = n - attrs.get("ddof", 0)
        op = sg.Ops()
        v = op.var(x)
        y = op.apply(prim, (v,), attrs or None)
        op.grad(op.sum(op.mul(y, rng.normal(size=y.shape))), v)
        op.jvp(y, v, rng.normal(size=x.shape))
        origins = explain.origins(op.tape)
        seen = 0
        for e in op.tape:
            origin = origins.get(e.position)
            if origin is None or origin[0] is not y.node or e.prim.scales is None or \
                    type(e.inputs[1]) not in (int, float):
                continue
            seen += 1
            want = dof if e.prim.scales == "over" else times / dof
            assert e.inputs[1] == want, (case, e)
        assert seen or dof == 1 and times == 1.0, case


def test_numbers_equal_to_the_count_are_the_users_constants(rng):
    # at n = 4, 0.25 = 1/n and 4 = n; they are the user's and stay, the mean's 1/n follows:
    # d/dX of sum(mean(X*X, 0) * 0.25 + X*X / 4) = 2 X (0.25 / n + 1 / 4)
    def f(X):
        return ((X * X).mean(axis=0) * 0.25).sum() + (X * X / 4).sum()

    def second(n: int) -> sg.Program:
        op = sg.Ops()
        X = op.var(np.random.default_rng(0).normal(size=(n, 3)), name="X")
        g = op.grad(f(X), X)
        return op.program(X, [g, op.grad((g * g).sum(), X)])

    prog = _program(4, f)
    assert len(prog.counts) == 1 and prog.constants[prog.counts[0].const].value == 4
    hess = second(4)
    for n in (4, 7, 100):
        X = rng.normal(size=(n, 3))
        c = 0.25 / n + 0.25
        value, g = prog(X)
        np.testing.assert_allclose(value, (X * X).sum() * c, **TOL)
        np.testing.assert_allclose(g, 2 * X * c, **TOL)
        g2, h = hess(X)
        np.testing.assert_allclose(g2, 2 * X * c, **TOL)
        np.testing.assert_allclose(h, 8 * X * c * c, **TOL)      # d/dX sum((2 X c)^2)


def test_a_count_of_1_records_no_division_and_pins_its_axis(tmp_path, rng):
    # std with ddof=1 over 2 rows divides by n - 1 = 1: no entry is recorded, so the
    # program cannot follow the batch; it refuses (it used to answer as if n - 1 were 1)
    def f(X):
        return (np.std(X, axis=0, ddof=1) * np.array([1.0, 2.0, 3.0])).sum()

    prog = _program(2, f)
    prog.save(tmp_path / "std")
    loaded = sg.load_program(tmp_path / "std")
    assert loaded.counts == prog.counts and prog.counts[0].const is None
    X2 = rng.normal(size=(2, 3))
    for run in (prog, loaded, sg.compile(prog)):
        s = np.std(X2, axis=0, ddof=1)
        np.testing.assert_allclose(run(X2)[1], (X2 - X2.mean(axis=0)) / s * [1, 2, 3], **TOL)
        with pytest.raises(sg.ShapeError, match=r"X axis 0 has size 5, but the gradient v\d+ "
                                                r"would divide by the count .* less ddof 1, "
                                                r"which was 1"):
            run(rng.normal(size=(5, 3)))
    # the variance's 2 / (n - 1) is 1.0 at n = 3: recorded, so it follows
    var = _program(3, lambda X: np.var(X, axis=0, ddof=1).sum())
    X6 = rng.normal(size=(6, 3))
    np.testing.assert_allclose(var(X6)[1], 2 * (X6 - X6.mean(axis=0)) / 5, **TOL)


# ---------------------------------------------------------------- batch 0


@pytest.mark.parametrize("loss", ["mean", "sum"])
def test_a_program_recorded_at_batch_0_runs_at_other_batches(loss, rng):
    # L = reduce(tanh(X w)^2); dL/dw = X^T (2 t (1 - t^2)) (/ n for the mean)
    op = sg.Ops()
    X = op.var(np.zeros((0, 3)), name="X")
    w = op.var(rng.normal(size=3), name="w")
    t = (X @ w).tanh()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # the mean of nothing, 1 / 0
        L = (t * t).mean() if loss == "mean" else (t * t).sum()
        prog = op.program([X, w], [L, op.grad(L, w)])
    for n in (1, 2, 7):
        Xn = rng.normal(size=(n, 3))
        tn = np.tanh(Xn @ w.value)
        scale = 1 / n if loss == "mean" else 1.0
        for run in (prog, sg.compile(prog)):
            value, g = run(Xn, w.value)
            np.testing.assert_allclose(value, (tn * tn).sum() * scale, **TOL)
            np.testing.assert_allclose(g, Xn.T @ (2 * tn * (1 - tn * tn)) * scale, **TOL)


def test_a_flattened_batch_0_follows_the_batch(rng):
    # x.reshape(-1) of a (0, 3) batch is (0,): its -1 is the batch times 3, not the batch
    def f(X):
        flat = X.reshape(-1)
        return (flat * flat).sum() + (flat.reshape(-1, 3) * np.array([1.0, 2.0, 3.0])).sum()

    prog = _program(0, f)
    for n in (1, 5):
        X = rng.normal(size=(n, 3))
        value, g = prog(X)
        np.testing.assert_allclose(value, (X * X).sum() + (X * [1, 2, 3]).sum(), **TOL)
        np.testing.assert_allclose(g, 2 * X + [1, 2, 3], **TOL)


def test_batch_0_pins_what_a_batch_of_n_pins(rng):
    # a reshape to a literal shape: the same refusal, naming the entry, at 0 as at 6
    for n in (0, 6):
        op = sg.Ops()
        X = op.var(np.ones((n, 2)), name="X")
        prog = op.program(X, op.reshape(X, (2 * n,), name="flat").sum())
        with pytest.raises(sg.ShapeError, match=r"flat = reshape\(...\) reshapes to the "
                                                rf"literal shape \[{2 * n}\]"):
            prog(rng.normal(size=(4, 2)))


# ---------------------------------------------------------------- the docs' list


def _pinning_list() -> str:
    text = (Path(__file__).parent.parent / "docs" / "programs.md").read_text()
    start = text.index("What the recording fixes stays fixed")
    return text[start:text.index("```", start)]


def test_concatenating_along_the_batch_pins_it_as_the_docs_say(rng):
    op = sg.Ops()
    X = op.var(rng.normal(size=(4, 2)), name="X")
    prog = op.program(X, (np.concatenate([X, X * 2.0]) ** 2).sum())
    with pytest.raises(sg.ShapeError, match=r"concatenate\(...\) does not take another size"):
        prog(rng.normal(size=(5, 2)))
    assert "concatenate" in _pinning_list()


# each way sizes.py pins a size: the words of its message, a program that meets it (recorded
# at batch 4, called at 6), and the words of the docs' list that name it
PINS = [
    ("reshapes to the", lambda op, X: op.reshape(X, (12,)), "a reshape that mixes the batch"),
    ("the constant", lambda op, X: X * op.var(np.ones((4, 1)), name="mask"),
     "a constant of the batch's shape"),
    ("indexes this axis", lambda op, X: X[:3], "a recorded index along the batch"),
    ("adds at", lambda op, X: np.sort(X, axis=0), "an order recorded along the batch"),
    ("does not take", lambda op, X: np.concatenate([X, X * 2.0]), "`np.concatenate`"),
    ("does not take", lambda op, X: np.repeat(X, 2, axis=0), "`np.repeat`"),
    ("does not take", lambda op, X: np.tile(X, (2, 1)), "`np.tile`"),
    ("does not take", lambda op, X: np.pad(X, ((1, 0), (0, 0))), "`np.pad`"),
    ("does not take", lambda op, X: np.cumsum(X), "`np.cumsum` of the flattened batch"),
    ("would divide by the count", lambda op, X: np.std(X, axis=0, ddof=3),
     "a count of 1 that a mean's, variance's or std's gradient divides by"),
]


@pytest.mark.parametrize(("words", "f", "docs"), PINS, ids=[p[2] for p in PINS])
def test_each_pinning_entry_is_refused_as_the_docs_list_says(words, f, docs, rng):
    op = sg.Ops()
    X = op.var(rng.normal(size=(4, 3)), name="X")
    y = f(op, X)
    prog = op.program(X, [y, op.grad((y * y).sum(), X)])
    prog(rng.normal(size=(4, 3)))
    with pytest.raises(sg.ShapeError, match=f"X axis 0 has size 6, but .*{words}.*: that "
                                            "entry pins the size"):
        prog(rng.normal(size=(6, 3)))
    assert docs in re.sub(r"\s+", " ", _pinning_list())


def test_the_docs_list_covers_every_pin_in_the_code():
    # every place sizes.py pins a size has a case above (so a line in the docs' list)
    source = (Path(sg.__file__).parent / "program" / "sizes.py").read_text()
    sites = source.split("pins.append(")[1:]
    assert len(sites) == len({w for w, _, _ in PINS}), "a pin with no case in PINS"
    for site in sites:
        call = site[:site.index("))")]
        assert any(w in call for w, _, _ in PINS), call
