"""sg.simplify: common subexpressions, constant folding, identities, dead entries.

Oracle: the plain program. The simplified one must give the same values, bit for bit (the
rules only drop exact identities), at the recording point and at random new points.
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.primitives.elementwise import ADD, MUL, SUB
from simplegrad.primitives.rewrites import (
    FOLD,
    Same,
    cse_key,
    describe_variable,
    reduces_to,
    rewrite,
    simplified,
)
from simplegrad.program.core import Program
from simplegrad.program.nodes import CONST, INPUT, NODE, Constant, Input, Node, Ref

F64 = np.dtype(np.float64)


def same_values(plain: sg.Program, simple: sg.Program, points: list[list[np.ndarray]]) -> None:
    """The two programs agree exactly at every point (nan where nan)."""
    for args in points:
        a, b = plain(*args), simple(*args)
        for x, y in zip([a] if plain.single else a, [b] if simple.single else b):
            assert x.shape == y.shape and x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def one_input(f, x0, n_points: int = 3, rng=None):
    """Record f at x0; return (plain program, simplified program), checked at new points."""
    op = sg.Ops()
    x = op.var(x0, name="x")
    prog = op.program(x, f(op, x))
    simple = sg.simplify(prog)
    rng = rng or np.random.default_rng(0)
    x0 = np.asarray(x0, dtype=float)
    same_values(prog, simple, [[x0]] + [[rng.uniform(-2, 2, x0.shape)] for _ in range(n_points)])
    return prog, simple


def lines(prog: sg.Program) -> list[str]:
    return [prog.format_node(n) for n in prog.nodes]


# ---------------------------------------------------------------- common subexpressions


def test_seed_order2_block_shares_its_repeated_products():
    op, a, b = seed_program(echo=False)
    prog = op.program([a, b], [a.grad, b.grad])
    assert prog.duplicates() == [("v12", "v13"), ("v15", "v16")]   # v11 * v6, v11 * v4 twice
    simple = sg.simplify(prog)
    assert simple.duplicates() == []
    assert len(simple) < len(prog)
    keys = [cse_key(n.prim, n.args, n.attrs) for n in simple.nodes]
    assert len(set(keys)) == len(keys)
    rng = np.random.default_rng(1)
    same_values(prog, simple, [[a.value, b.value]] +
                [[rng.uniform(-2, 2, 4), rng.uniform(-2, 2, 4)] for _ in range(5)])


def test_seed_block_with_other_seeds_is_shared_by_cse_alone():
    # seeds 3 and 2 instead of ones: no identity applies, CSE alone removes v13 and v16
    op = sg.Ops()
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.named_var(np.array([0.0850, 0.3296, 0.9888, 0.6494]), "b")
    l0 = op.sum(op.mul(op.add(a, b), b), name="L0")
    da, db = op.grad(l0, [a, b], seed=np.array(3.0))
    l1 = op.sum(op.add(op.mul(da, da), op.mul(db, db)), name="L1")
    op.grad(l1, [a, b], seed=np.array(2.0))
    prog = op.program([a, b], [a.grad, b.grad])
    assert prog.duplicates() == [("v12", "v13"), ("v15", "v16")]
    simple = sg.simplify(prog)
    text = simple.format(raw=True).splitlines()     # (as simplified: the seeds named)
    assert "v12 = v11 * v6" in text and "v15 = v11 * v4" in text
    assert "v14 = v12 * 2.0" in text and "v17 = v15 * 2.0" in text     # v12 + v12, v15 + v15
    # CSE removes v13 and v16; the seeds' spreads (v3, v11: constants alone) fold
    assert len(simple) == len(prog) - 4 and simple.duplicates() == []
    rng = np.random.default_rng(5)
    same_values(prog, simple, [[rng.uniform(-2, 2, 4), rng.uniform(-2, 2, 4)] for _ in range(4)])


def test_a_later_sin_reuses_the_forward_one():
    op = sg.Ops()
    x, y = op.var([0.3, 1.2], name="x"), op.var([2.0, -1.0], name="y")
    f = (x * y + x.sin()).sum()
    gx, gy = op.grad(f, [x, y])
    hx = op.grad((gx * gx).sum(), x)          # the cos rule computes x.sin() again
    prog = op.program([x, y], [f, hx])
    assert sum(n.prim.name == "sin" for n in prog.nodes) == 2
    simple = sg.simplify(prog)
    assert sum(n.prim.name == "sin" for n in simple.nodes) == 1
    rng = np.random.default_rng(2)
    same_values(prog, simple, [[rng.uniform(-2, 2, 2), rng.uniform(-2, 2, 2)] for _ in range(4)])


def test_commutative_inputs_count_in_either_order():
    prog, simple = one_input(lambda op, x: (x.sin() * x.cos()) + (x.cos() * x.sin()),
                             [0.5, -0.25])
    assert len(prog) == 7
    assert lines(simple) == ["v0 = x.sin()", "v1 = x.cos()", "v2 = v0 * v1", "v6 = v2 * 2.0"]


def test_non_commutative_inputs_keep_their_order():
    _, simple = one_input(lambda op, x: (x.sin() - x.cos()) * (x.cos() - x.sin()), [0.5])
    assert sum(n.prim.name == "sub" for n in simple.nodes) == 2


def test_attributes_are_part_of_the_key():
    def f(op, x):
        return x.sum(axis=0) + x.sum(axis=1) + x.sum(axis=0) + x[np.array([0, 1])].sum(axis=0) \
            + x[np.array([1, 0])].sum(axis=0)
    prog, simple = one_input(f, np.arange(4.0).reshape(2, 2))
    assert [n.prim.name for n in simple.nodes].count("sum") == 4
    assert [n.prim.name for n in simple.nodes].count("getitem") == 2


# ---------------------------------------------------------------- identities, one at a time

IDENTITIES = {
    "x * 1": lambda op, x: x * 1.0,
    "1 * x": lambda op, x: 1 * x,
    "x * ones": lambda op, x: x * np.ones(3),
    "ones * x": lambda op, x: op.mul(np.ones(3), x),
    "x + 0": lambda op, x: x + 0.0,
    "0 + x": lambda op, x: 0 + x,
    "x - 0": lambda op, x: x - 0,
    "x / 1": lambda op, x: x / 1.0,
    "--x": lambda op, x: op.neg(op.neg(x)),
    "expand to x's shape": lambda op, x: x.expand(3),
    "reshape to x's shape": lambda op, x: x.reshape(-1),
    "x.T of a vector": lambda op, x: x.T,
    "cast to x's dtype": lambda op, x: x.astype(np.float64),
}


@pytest.mark.parametrize("label", list(IDENTITIES))
def test_identity_reduces_to_its_input(label):
    f = IDENTITIES[label]
    prog, simple = one_input(lambda op, x: f(op, x).tanh(), [0.5, -1.5, 2.0])
    assert len(prog) == (3 if label == "--x" else 2)
    assert lines(simple) == [f"{prog.nodes[-1].name} = x.tanh()"]


def test_transposes_undone():
    def f(op, x):
        return op.transpose(op.transpose(x, (2, 0, 1)), (1, 2, 0)).sin() + x.T.T.sin()
    prog, simple = one_input(f, np.arange(24.0).reshape(2, 3, 4) / 10)
    assert [n.prim.name for n in simple.nodes] == ["sin", "mul"]     # sin(x) + sin(x)

    # not inverse: kept
    def g(op, x):
        return op.transpose(op.transpose(x, (2, 0, 1)), (2, 0, 1))
    _, kept = one_input(g, np.arange(24.0).reshape(2, 3, 4))
    assert len(kept) == 2


def test_x_plus_x_is_x_times_2():
    _, simple = one_input(lambda op, x: (x.exp() + x.exp()).sin(), [0.5, 1.0])
    assert lines(simple) == ["v0 = x.exp()", "v2 = v0 * 2.0", "v3 = v2.sin()"]


@pytest.mark.parametrize("label,f,text", [
    ("x * -1", lambda op, x, y: x * -1.0, ["v0 = -x"]),
    ("-1 * x", lambda op, x, y: -1 * x, ["v0 = -x"]),
    ("x + -y", lambda op, x, y: x + -y, ["v1 = x - y"]),
    ("-y + x", lambda op, x, y: -y + x, ["v1 = x - y"]),
    ("x - -y", lambda op, x, y: x - -y, ["v1 = x + y"]),
    ("x + -y broadcast", lambda op, x, y: x + -(y.sum()), ["v0 = y.sum()", "v2 = x - v0"]),
])
def test_rewrites(label, f, text):
    op = sg.Ops()
    x, y = op.var([0.5, -1.5, 2.0], name="x"), op.var([1.0, 0.0, -0.0], name="y")
    prog = op.program([x, y], f(op, x, y))
    simple = sg.simplify(prog)
    assert lines(simple) == text
    rng = np.random.default_rng(4)
    points = [[np.array([1.0, -0.0, np.inf]), np.array([1.0, 0.0, np.inf])]] + \
        [[rng.uniform(-2, 2, 3), rng.uniform(-2, 2, 3)] for _ in range(3)]
    with np.errstate(invalid="ignore"):
        same_values(prog, simple, points)
        for args in points:      # signs of zeros too (a nan's sign is not specified)
            a, b = prog(*args), simple(*args)
            assert np.array_equal(np.signbit(a)[~np.isnan(a)], np.signbit(b)[~np.isnan(b)])


@pytest.mark.parametrize("label,f", [
    ("ones that broadcast x", lambda op, x: x * np.ones((2, 3))),
    ("zeros that broadcast x", lambda op, x: x + np.zeros((2, 3))),
    ("expand to a larger shape", lambda op, x: x.expand(2, 3)),
    ("reshape to another shape", lambda op, x: x.reshape(3, 1)),
    ("x * 0", lambda op, x: x * 0.0),
    ("x - x", lambda op, x: x - x),
    ("0 - x", lambda op, x: 0 - x),
    ("x * 2", lambda op, x: x * 2.0),
    ("1 / x", lambda op, x: 1.0 / x),
])
def test_what_does_not_reduce(label, f):
    prog, simple = one_input(f, [0.5, -1.5, 2.0])
    assert len(simple) == len(prog) == 1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_ieee_stays_at_inf_and_nan():
    op = sg.Ops()
    x = op.var([1.0, 2.0, 3.0], name="x")
    prog = op.program(x, [x * 0.0, x - x, (x * 1.0) * 0.0])
    simple = sg.simplify(prog)
    got = simple(np.array([np.inf, np.nan, -1.0]))
    for g in got:
        np.testing.assert_array_equal(g, [np.nan, np.nan, -0.0])
    same_values(prog, simple, [[np.array([np.inf, np.nan, -1.0])]])


def test_ones_of_another_dtype_do_not_reduce():
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0], dtype=np.float32), name="x")
    y = op.mul(x, np.ones(2, dtype=np.float32))          # same dtype: reduces
    z = x * op.var(np.ones(2))       # float64 ones (a captured Variable) promote x: kept
    assert z.dtype == np.float64
    simple = sg.simplify(op.program(x, [y, z]))
    assert len(simple) == 1 and simple.outputs[0] == Ref(INPUT, 0)


def test_the_default_seed_is_multiplied_out():
    # grad of sum((a + b) * b): the recorded block multiplies by the expanded ones seed
    op, a, b = seed_program(echo=False)
    prog = op.program([a, b], [a.grad, b.grad])
    assert "v4 = v3 * b" in prog.format(raw=True).splitlines()
    assert prog.format() == sg.simplify(prog).format()        # printed as a person reads it
    text = sg.simplify(prog).format().splitlines()
    assert not any("v3" in line for line in text)
    assert text == ["inputs: a, b", "v0 = a + b", "v6 = v0 + b", "v14 = v6 * 2.0",
                    "v17 = b * 2.0", "v18 = v17 + v14", "v25 = v18 + v14", "outputs: v14, v25"]


# ---------------------------------------------------------------- folding and dead entries


def _hand_made() -> Program:
    mul, add, sin = (sg.REGISTRY[n] for n in ("mul", "add", "sin"))
    x = Input("x", (2,), F64)
    consts = [Constant(2.0), Constant(np.array([3.0, 4.0]), "w")]
    nodes = [Node(mul, (Ref(CONST, 0), Ref(CONST, 1)), None, "c", (2,), F64),      # fold: [6, 8]
             Node(sin, (Ref(CONST, 1),), None, "s", (2,), F64),                    # fold
             Node(add, (Ref(INPUT, 0), Ref(NODE, 0)), None, "y", (2,), F64),
             Node(mul, (Ref(NODE, 2), Ref(NODE, 1)), None, "z", (2,), F64),
             Node(sin, (Ref(INPUT, 0),), None, "dead", (2,), F64)]                 # unused
    return Program([x], consts, nodes, [Ref(NODE, 3)], single=True)


def test_constant_folding_and_dead_entries():
    prog = _hand_made()
    simple = sg.simplify(prog)
    assert simple.format().splitlines() == [
        "inputs: x", "c = [6.0000, 8.0000]", "s = [ 0.1411, -0.7568]", "y = x + c", "z = y * s",
        "outputs: z"]
    x = np.array([0.5, -2.0])
    np.testing.assert_array_equal(simple(x), (x + [6.0, 8.0]) * np.sin([3.0, 4.0]))
    same_values(prog, simple, [[x], [np.array([1e3, -1e-3])]])


def test_dead_entries_after_rewriting_are_removed():
    _, simple = one_input(lambda op, x: op.neg(op.neg(x)).sin() + (x * 1.0).sin(), [0.5])
    assert lines(simple) == ["v2 = x.sin()", "v5 = v2 * 2.0"]


def test_cotangents_nobody_asked_for_are_not_in_the_program():
    op = sg.Ops()
    x, y = op.var([1.0, 2.0], name="x"), op.var([3.0, 4.0], name="y")
    f = (x * y.exp()).sum()
    gx, gy = op.grad(f, [x, y])
    assert len(sg.simplify(op.program([x, y], gx))) == 1        # y.exp() only
    assert len(sg.simplify(op.program([x, y], [gx, gy]))) == 2


def test_an_output_that_folds_to_a_constant():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    gx = op.grad((x * 3.0).sum(), x)          # 3 * ones: computed from the seed only
    simple = sg.simplify(op.program(x, gx))
    assert len(simple) == 0
    np.testing.assert_array_equal(simple(np.array([5.0, 6.0])), [3.0, 3.0])


def test_simplify_takes_a_program():
    with pytest.raises(sg.ArgumentError, match="expected a Program, got list"):
        sg.simplify([])


# ---------------------------------------------------------------- nested derivatives


def test_nested_tanh_derivatives_shrink_and_agree():
    op = sg.Ops()
    x = op.var(0.3, name="x")
    y = x.tanh()
    for _ in range(6):
        y = op.grad(y, x)
    prog = op.program(x, y)
    simple = sg.simplify(prog)
    assert simple.duplicates() == []
    assert 2 * len(simple) <= len(prog)
    rng = np.random.default_rng(3)
    same_values(prog, simple, [[np.array(v)] for v in rng.uniform(-2, 2, 5)])


# ---------------------------------------------------------------- the rules on tape Variables


def test_rules_apply_to_tape_variables():
    op = sg.Ops()
    x, y = op.var([1.0, 2.0]), op.var([3.0, 4.0])
    mul, add, neg = (sg.REGISTRY[n] for n in ("mul", "add", "neg"))
    assert cse_key(mul, (x, y), None) == cse_key(mul, (y, x), None)
    assert cse_key(add, (x, 1.0), None) != cse_key(add, (x, 1), None)
    assert cse_key(add, (x, -0.0), None) != cse_key(add, (x, 0.0), None)
    assert reduces_to(mul, (x, 1.0), None) is x
    assert reduces_to(mul, (np.ones(2), y), None) is y
    assert reduces_to(mul, (x, np.ones((2, 2))), None) is None
    assert reduces_to(neg, (-x,), None) is x.node     # (the rules read entries)
    assert rewrite(add, (x, x), None) == (mul, (x, 2.0), None)
    assert describe_variable(2.0).constant and not describe_variable(x).constant


def test_mask_identities():
    def f(op, x):
        m = x > 0
        a = op.where(op.logical_or(m, m), x, 0.0)                 # m | m -> m
        b = op.where(op.logical_not(op.logical_not(m)), x.sin(), x.sin())   # ~~m; where(c, s, s)
        c = op.where(m, 0.0, op.where(m, 0.0, x.cos()))           # a where repeated -> the inner
        d = op.where(op.logical_and(m, m), op.where(m, x, 1.0), 1.0)   # m & m; mirror image
        return a + b + c + d
    prog, simple = one_input(f, [0.5, -1.5, 0.0, 2.0])
    assert lines(simple) == [
        "v0 = x > 0", "v2 = where(v0, x, 0.0)", "v5 = x.sin()", "v8 = x.cos()",
        "v9 = where(v0, 0.0, v8)", "v12 = where(v0, x, 1.0)", "v14 = v2 + v5", "v15 = v14 + v9",
        "v16 = v15 + v12"]
    assert len(prog) == 17


def test_x_plus_0_keeps_the_sign_of_a_zero_the_plain_program_drops():
    # the one documented difference: -0.0 + 0 is +0.0, the simplified program gives x itself
    prog, simple = one_input(lambda op, x: x + 0.0, [1.0, 2.0])
    plain, simplified = prog(np.array([-0.0, 1.0])), simple(np.array([-0.0, 1.0]))
    assert not np.signbit(plain[0]) and np.signbit(simplified[0])


# ---------------------------------------------------------------- simplifying while recording

def _seed_on(op):
    _, a, b = seed_program(ops=op)
    return a, b


def test_simplifying_ops_gives_the_seed_values_with_a_smaller_order_two_block():
    plain, simple = sg.Ops(), sg.Ops(simplify=True)
    pa, pb = _seed_on(plain)
    sa, sb = _seed_on(simple)
    np.testing.assert_allclose(sa.grad.value, pa.grad.value, rtol=1e-15)
    np.testing.assert_allclose(sb.grad.value, pb.grad.value, rtol=1e-15)
    from simplegrad.engine.explain import blocks
    sizes = [b.size for b in blocks(simple.tape)]
    assert sizes[1] <= blocks(plain.tape)[1].size // 3
    keys = [cse_key(v.prim, v.inputs, v.attrs) for v in simple.tape]
    assert len(keys) == len(set(keys))          # no entry computed twice


def test_simplifying_ops_reuses_the_forward_and_removes_identities():
    op = sg.Ops(simplify=True)
    x = op.var([0.5, 1.0], name="x")
    s = x.sin()
    assert x.sin() is s                      # hash-consing
    neg = op.neg(x)
    assert (x * 1.0) is x and (x + 0.0) is x and op.neg(neg) is x
    assert (x + x).prim.name == "mul"         # x + x -> x * 2.0
    named = op.sin(x, name="again")           # a name asked for is recorded as asked
    assert named is not s and named.name == "again"


def test_simplifying_ops_prunes_cotangents_nobody_asked_for():
    op, plain = sg.Ops(simplify=True), sg.Ops()
    for o in (op, plain):
        x, y = o.var([1.0, 2.0], name="x"), o.var([3.0, 4.0], name="y")
        f = (x * y).sin().sum()
        g = o.grad(f, x)
        np.testing.assert_allclose(g.value, np.cos([3.0, 8.0]) * [3.0, 4.0], rtol=1e-15)
    assert "_dy =" not in op.format_trace() and "_dy =" in plain.format_trace()


def test_nested_derivatives_of_the_simplified_graph_are_right():
    # tanh''' (x) = -2 (1 - t^2)(1 - 3 t^2) with t = tanh x
    op = sg.Ops(simplify=True)
    x = op.var(np.array([0.3, -1.2]))
    g = x.tanh()
    for _ in range(3):
        g = op.grad(g.sum(), x)
    t = np.tanh([0.3, -1.2])
    np.testing.assert_allclose(g.value, -2 * (1 - t**2) * (1 - 3 * t**2), rtol=1e-13)


# ---------------------------------------------------------------- the one step, three callers

def test_the_step_folds_a_scale_then_sees_the_identity():
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0]), name="x")
    y = x * 2.0
    step = simplified(MUL, (y.node, 0.5), None)
    assert type(step) is Same and step.input is x.node      # (x * 2.0) * 0.5 is x * 1.0: x
    assert simplified(MUL, (y.node, 0.5), None, recording=True) is None   # no reassociation
    assert simplified(MUL, (2.0, 3.0), None) is FOLD


def test_recording_rewrites_before_the_identity():
    op = sg.Ops()
    y = op.var(np.array([0.0, 1.0]), name="y")
    n = -y
    prim, inputs, attrs, key = simplified(ADD, (n.node, 0), None, recording=True)
    assert (prim, inputs, attrs, key) == (SUB, (0, y.node), None, None)
    assert np.signbit(SUB.forward(0, y.raw)[0]) == np.signbit(np.add(-y.raw, 0)[0])  # +0.0
    step = simplified(ADD, (n.node, 0), None)     # sg.simplify and the derivation: the identity
    assert type(step) is Same and step.input is n.node


def test_sg_simplify_and_a_simplifying_ops_agree_on_a_rewrite():
    op = sg.Ops(simplify=True)
    x = op.var(np.array([1.0, -2.0]), name="x")
    recorded = x + x
    assert recorded.prim is MUL and recorded.inputs == (x.node, 2.0)
    plain = sg.Ops()
    px = plain.var(np.array([1.0, -2.0]), name="x")
    prog = sg.simplify(plain.program([px], [px + px]))
    assert [n.prim for n in prog.nodes] == [MUL]
    assert [c.value for c in prog.constants] == [2.0]
