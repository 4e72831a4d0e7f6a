"""Programs: extracted from the tape, replayed at new inputs, formatted; errors.

The oracle of a replay is a fresh recording at the new point: the program recorded at one
input and run at another must give what recording there gives (float64, rtol 1e-12), for every
registered primitive and case at order 0 (the primitive), 1 (the recorded gradient program of
sum(out * u)) and 2 (the gradient of sum(g * g * w) over the order-1 gradients g). The
simplified program must give the plain program's values exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad.program.nodes import CONST, INPUT, NODE, Ref
from tests.test_primitives import applying, case_id, sample

RTOL = 1e-12


def weights(shapes: list[tuple], seed: int) -> list[np.ndarray]:
    """Fixed weights, the same for every recording of one case."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, s) for s in shapes]


def record(prim: sg.Primitive, case: sg.Case, args: list[np.ndarray], order: int):
    """Record prim at ``args``, then ``order`` gradients; returns (Ops, inputs, outputs)."""
    op = sg.Ops()
    xs = [op.var(a) for a in args]
    out = applying(prim, case)(*xs)
    if order == 0:
        return op, xs, out
    (u,) = weights([out.shape], 1)
    gs = op.grad(op.sum(op.mul(out, u)), xs)
    if order == 1:
        return op, xs, gs
    ws = weights([g.shape for g in gs], 2)
    total = None
    for g, w in zip(gs, ws):
        term = op.sum(op.mul(op.mul(g, g), w))
        total = term if total is None else op.add(total, term)
    return op, xs, op.grad(total, xs)


def values(outs) -> list[np.ndarray]:
    return [outs.value] if isinstance(outs, sg.Variable) else [g.value for g in outs]


def _params() -> list:
    return [pytest.param(prim, case, order, id=f"{prim.name}-{case_id(case)}-order{order}")
            for prim in sg.REGISTRY.values() for case in prim.cases for order in (0, 1, 2)]


@pytest.mark.parametrize(("prim", "case", "order"), _params())
def test_replay_matches_a_fresh_recording(prim, case, order, rng):
    here, there = sample(prim, case, rng), sample(prim, case, rng)
    op, xs, outs = record(prim, case, here, order)
    prog = op.program(xs, outs)
    got = prog(*there)
    got = [got] if order == 0 else got
    _, _, fresh = record(prim, case, there, order)
    for k, (g, want) in enumerate(zip(got, values(fresh))):
        assert g.shape == want.shape and g.dtype == want.dtype, f"output {k}"
        np.testing.assert_allclose(g, want, rtol=RTOL, atol=0, err_msg=f"output {k}")
    # and at the recording point, the program gives the recorded values
    again = prog(*here)
    for g, want in zip([again] if order == 0 else again, values(outs)):
        np.testing.assert_array_equal(g, want)
    # simplified, it gives the same values (attributes of every kind make CSE keys)
    simple = sg.simplify(prog)
    assert simple.duplicates() == []
    for g, want in zip(simple(*there), prog(*there)) if order else [(simple(*there), got[0])]:
        np.testing.assert_array_equal(g, want)


# ---------------------------------------------------------------- extraction


def test_seed_program_extracts_and_formats():
    from simplegrad.cli import seed_program

    op, a, b = seed_program(echo=False)
    prog = op.program([a, b], [a.grad, b.grad])
    assert len(prog) == 16
    text = prog.format(raw=True).splitlines()
    assert text[:3] == ["inputs: a, b", "v2 = 1.0000", "v10 = 1.0000"]    # the seeds
    assert "v3 = v2.expand([4])" in text     # the seed spread: an entry, to follow a's size
    assert "v0 = a + b" in text and "v12 = v11 * v6" in text and "v25 = v22 + v20" in text
    assert text[-1] == "outputs: v20, v25"
    # every program line is the tape's line for that entry
    trace = set(op.format_trace().splitlines())
    assert all(line in trace for line in text[3:-1])
    # closed forms at a new point: d/da of sum(da^2 + db^2) with da = b, db = a + 2b
    a2, b2 = np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.25, 1.0, -1.0, 2.0])
    ga, gb = prog(a2, b2)
    np.testing.assert_allclose(ga, 2 * (a2 + 2 * b2), rtol=1e-15)
    np.testing.assert_allclose(gb, 2 * b2 + 4 * (a2 + 2 * b2), rtol=1e-15)


def test_program_is_its_own_data():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    w = op.var([3.0, -1.0], name="w")
    y = (x * w).sin() + w.exp()         # w is not an input: captured, w.exp() too
    prog = op.program(x, y)
    assert [n.name for n in prog.nodes] == ["v0", "v1", "v3"]
    assert {c.name for c in prog.constants} == {"w", "v2"}
    assert all(r.kind in (INPUT, CONST, NODE) for n in prog.nodes for r in n.args)
    assert prog.outputs == (Ref(NODE, 2),)
    op.release()                        # the tape is gone; the program is not
    np.testing.assert_allclose(prog(np.array([0.5, 0.0])),
                               np.sin(np.array([1.5, -0.0])) + np.exp([3.0, -1.0]), rtol=1e-15)
    assert repr(prog) == "<Program: 1 inputs, 3 entries, 1 outputs>"


def test_single_output_and_list_of_outputs():
    op = sg.Ops()
    x = op.var(2.0)
    y = x * x
    assert isinstance(op.program(x, y)(np.array(3.0)), np.ndarray)
    (only,) = op.program([x], [y])(np.array(3.0))
    assert only == 9.0


def test_outputs_that_are_inputs_or_constants():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    y = op.var([5.0, 6.0])
    gx, gy = op.grad((x * 2.0).sum(), [x, y])     # gy is a zeros leaf: a constant
    prog = op.program([x, y], [gx, gy, x])
    a, b, c = prog(np.array([7.0, 8.0]), np.array([0.0, 1.0]))
    np.testing.assert_array_equal(a, [2.0, 2.0])
    np.testing.assert_array_equal(b, [0.0, 0.0])
    np.testing.assert_array_equal(c, [7.0, 8.0])


def test_a_computed_variable_as_input_cuts_the_program():
    op = sg.Ops()
    x = op.var([1.0, 2.0])
    h = x.exp()
    y = h.sin()
    prog = op.program(h, y)
    assert len(prog) == 1
    np.testing.assert_allclose(prog(np.array([0.0, 1.0])), np.sin([0.0, 1.0]), rtol=1e-15)


def test_control_flow_on_a_value_is_a_guard():
    # the number x.item() read is a guard: the same value replays, another raises (the
    # recorded branch, sin, would have answered for cos at -0.5)
    def f(op, x):
        return x.sin() if x.item() > 0 else x.cos()

    op = sg.Ops()
    x = op.var([0.5])
    prog = op.program(x, f(op, x))
    np.testing.assert_allclose(prog(np.array([0.5])), np.sin([0.5]), rtol=1e-15)
    with pytest.raises(sg.ReplayError, match="x.item"):
        prog(np.array([-0.5]))


def test_long_chain_extracts_without_recursion():
    op = sg.Ops()
    x = op.var(0.5)
    y = x
    for _ in range(20_000):
        y = y * 1.0
    prog = op.program(x, y)
    assert len(prog) == 20_000
    assert prog(np.array(0.25)) == 0.25


def test_custom_vjp_and_checkpoint_replay():
    @sg.custom_vjp
    def softplus(x):
        return (x.exp() + 1.0).log()

    @softplus.defvjp
    def _(g, out, x):
        return g * x.sigmoid()

    @sg.checkpoint
    def block(x, w):
        return (x * w).tanh() * w

    def f(op, x, w):
        return (softplus(x) * block(x, w)).sum()

    def grads(x0, w0):
        op = sg.Ops()
        x, w = op.var(x0), op.var(w0)
        gx, gw = op.grad(f(op, x, w), [x, w])
        hx, hw = op.grad((gx * gx).sum() + gw.sum(), [x, w])      # order 2 through both
        return op, (x, w), (gx, gw, hx, hw)

    here = np.array([0.3, -1.2, 2.0]), np.array([0.7, 0.1, -0.4])
    there = np.array([-0.5, 0.9, 1.1]), np.array([1.3, -0.6, 0.2])
    op, xs, gs = grads(*here)
    prog = op.program(list(xs), list(gs))
    assert any(n.prim.name == "softplus" for n in prog.nodes)
    assert any(n.prim.name == "checkpoint(block)" for n in prog.nodes)
    want = [g.value for g in grads(*there)[2]]
    simple = sg.simplify(prog)
    for got, simplified, w in zip(prog(*there), simple(*there), want):
        np.testing.assert_allclose(got, w, rtol=RTOL)
        np.testing.assert_array_equal(simplified, got)


# ---------------------------------------------------------------- errors


def test_call_checks_count_shape_and_dtype():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    prog = op.program(x, x.sin())
    with pytest.raises(sg.ArgumentError, match=r"takes 1 input\(s\) \(x\), got 2"):
        prog(np.zeros(2), np.zeros(2))
    with pytest.raises(sg.ShapeError, match=r"input x has shape \(2,\), got \(2, 2\)"):
        prog(np.zeros((2, 2)))
    np.testing.assert_allclose(prog(np.arange(3.0)), np.sin(np.arange(3.0)), rtol=1e-15)
    with pytest.raises(sg.DTypeError, match="input x has dtype float64, got complex128"):
        prog(np.zeros(2, dtype=complex))
    with pytest.raises(sg.ArgumentError, match=r"pass its value \(x.value\)"):
        prog(x)
    # integers convert safely to the recorded float dtype
    np.testing.assert_allclose(prog(np.array([0, 1])), np.sin([0.0, 1.0]), rtol=1e-15)


def test_extract_checks_its_arguments():
    op, other = sg.Ops(), sg.Ops()
    x = op.var(1.0, name="x")
    z = other.var(1.0, name="z")
    y = x * 2.0
    with pytest.raises(sg.ArgumentError, match="x is given twice"):
        op.program([x, x], y)
    with pytest.raises(sg.GraphError, match="z belongs to another Ops"):
        op.program(x, z)
    with pytest.raises(sg.GraphError, match="belongs to another Ops"):
        op.program([z], y)
    with pytest.raises(sg.ArgumentError, match="must be Variables, got ndarray"):
        op.program([np.zeros(1)], y)
    with pytest.raises(sg.ArgumentError, match="at least one output"):
        op.program(x, [])


def test_hand_made_programs_are_checked():
    from simplegrad.program.core import Program
    from simplegrad.program.nodes import Input, Node

    sin = sg.REGISTRY["sin"]
    spec = Input("x", (2,), np.dtype(np.float64))
    with pytest.raises(sg.GraphError, match="refers to node\\[0\\]"):
        Program([spec], [], [Node(sin, (Ref(NODE, 0),), None, "v0", (2,), spec.dtype)],
                [Ref(NODE, 0)])
    with pytest.raises(sg.GraphError, match="an output refers to input\\[1\\]"):
        Program([spec], [], [], [Ref(INPUT, 1)])


# ---------------------------------------------------------------- random programs

W = np.array([1.0, -0.5, 0.25, 2.0])


def _random_steps():
    unary = st.sampled_from(["relu", "abs", "max", "min", "where_sqrt", "where_pos", "sin",
                             "square", "tanh", "sign_mix"])
    binary = st.sampled_from(["maximum", "minimum", "where_gt", "where_le", "add", "mul",
                              "sub"])
    step = st.one_of(st.tuples(st.just(1), unary, st.integers(0, 99)),
                     st.tuples(st.just(2), binary, st.integers(0, 99), st.integers(0, 99)))
    return st.lists(step, min_size=1, max_size=7)


def _random_step(op, pool, step):
    if step[0] == 1:
        _, name, i = step
        x = pool[i % len(pool)]
        return {
            "relu": lambda: x.relu(),
            "abs": lambda: abs(x),
            "max": lambda: x - x.max(),          # ties: integer-valued inputs repeat
            "min": lambda: x * x.min(),
            "where_sqrt": lambda: op.where(x > 0, x.sqrt() * x, 0),
            "where_pos": lambda: op.where(x >= 0, x * x, -x),
            "sin": lambda: x.sin(),
            "square": lambda: x * x,
            "tanh": lambda: x.tanh(),
            "sign_mix": lambda: op.where(x < 0, x.exp(), x + 1.0),
        }[name]()
    _, name, i, j = step
    x, y = pool[i % len(pool)], pool[j % len(pool)]
    return {
        "maximum": lambda: op.maximum(x, y),
        "minimum": lambda: op.minimum(x, y),
        "where_gt": lambda: op.where(x > y, x, y * 0.5),
        "where_le": lambda: op.where(x <= y, x * y, y),
        "add": lambda: x + y,
        "mul": lambda: x * y,
        "sub": lambda: x - y,
    }[name]()


def _random_record(steps, a0, b0):
    """Record the program, its gradient and an order-2 gradient; outputs [L, ga, gb, ha, hb]."""
    op = sg.Ops()
    a, b = op.var(a0, name="a"), op.var(b0, name="b")
    pool = [a, b]
    for step in steps:
        pool.append(_random_step(op, pool, step))
    L = op.sum(op.mul(pool[-1], W), name="L")
    ga, gb = op.grad(L, [a, b])
    ha, hb = op.grad(op.sum(ga * ga * W + gb), [a, b])
    return op, (a, b), [L, ga, gb, ha, hb]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=60, deadline=None)
@given(steps=_random_steps(), seed=st.integers(0, 2**16))
def test_random_programs_replay_like_a_fresh_recording(steps, seed):
    rng = np.random.default_rng(seed)
    # integer values: ties for max/min/maximum/minimum, zeros for relu, abs and where
    here, there = ([rng.integers(-2, 3, 4).astype(float) for _ in range(2)] for _ in range(2))
    op, xs, outs = _random_record(steps, *here)
    prog = op.program(list(xs), outs)
    simple = sg.simplify(prog)
    assert simple.duplicates() == []
    assert len(sg.simplify(simple)) == len(simple)          # one pass reaches the fixed point
    _, _, fresh = _random_record(steps, *there)
    for got, simplified, want in zip(prog(*there), simple(*there), fresh):
        np.testing.assert_allclose(got, want.value, rtol=RTOL, atol=0)
        np.testing.assert_array_equal(simplified, got)
