"""sg.compile: generated numpy source equals the program it came from.

The oracles are the tape and the Program (run by the registry's forward rules, entry by entry):
for every registered primitive and case at orders 0, 1 and 2 (the recordings of test_program),
the compiled function gives the recorded values at the recording point and the program's values
at a new point, to float64 round-off (rtol 1e-12; exact for most entries, since all three call
the same numpy functions).
"""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program
from tests.test_primitives import case_id, sample
from tests.test_program import record, values

RTOL = 1e-12


def _params() -> list:
    return [pytest.param(prim, case, order, id=f"{prim.name}-{case_id(case)}-order{order}")
            for prim in sg.REGISTRY.values() for case in prim.cases for order in (0, 1, 2)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize(("prim", "case", "order"), _params())
def test_compiled_equals_the_program(prim, case, order, rng):
    here, there = sample(prim, case, rng), sample(prim, case, rng)
    op, xs, outs = record(prim, case, here, order)
    prog = op.program(xs, outs)
    fn = sg.compile(prog)
    want = prog(*there)
    got = fn(*there)
    for k, (g, w) in enumerate(zip([got] if order == 0 else got,
                                   [want] if order == 0 else want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {k}"
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-300, err_msg=f"output {k}")
    # at the recording point it gives the tape's values
    for k, (g, w) in enumerate(zip([fn(*here)] if order == 0 else fn(*here), values(outs))):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=1e-300, err_msg=f"tape output {k}")
    # one assignment per entry, each commented with its trace line (entries of constants
    # alone, the seed's spread, are computed once when compiled)
    lines = [line for line in fn.source.splitlines() if " = " in line and "# " in line
             and not line.lstrip().startswith("#")]
    computed = [node for node in prog.nodes if node.name not in fn.folded]
    assert len(lines) == len(computed)
    for line, node in zip(lines, computed):     # (a loop's: its first line, bodies below)
        assert line.endswith("# " + prog.format_node(node).split("\n    ", 1)[0])


def test_seed_program_source_is_readable_numpy():
    op, a, b = seed_program(echo=False)
    prog = op.program([a, b], [a.grad, b.grad])
    fn = sg.compile(prog, name="seed_grad")
    src = fn.source.splitlines()
    assert src[0] == "def seed_grad(a, b):"
    assert src[1] == "    # v3 = [1.0000, 1.0000, 1.0000, 1.0000]  (constant, float64, shape (4,))"
    assert src[3].split("#")[0].rstrip() == "    v0 = a + b"
    assert src[-1] == "    return [v20, v25]"
    # closed forms at a new point (see test_program): da = b, db = a + 2b at order 1
    a2, b2 = np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.25, 1.0, -1.0, 2.0])
    ga, gb = fn(a2, b2)
    np.testing.assert_allclose(ga, 2 * (a2 + 2 * b2), rtol=1e-15)
    np.testing.assert_allclose(gb, 2 * b2 + 4 * (a2 + 2 * b2), rtol=1e-15)


def test_numpy_functions_operators_and_private_forwards():
    op = sg.Ops()
    x = op.var(np.arange(6.0).reshape(2, 3) / 7, name="x")
    y = (x.tanh() @ x.T).sum(axis=1, keepdims=True)
    z = (y.sigmoid() * x[:, 1:]).reshape([4]) ** 2.0
    prog = op.program(x, z)
    src = sg.compile(prog).source
    assert "np.tanh(x)" in src and " @ " in src and "x.transpose()" in src
    assert "np.add.reduce(v2, axis=1, keepdims=True)" in src
    assert 'F[\'sigmoid\'](v3)' in src                  # a private forward, by registry name
    assert "x[:, 1:]" in src and "v6.reshape((4,))" in src and "np.power(v7, 2.0)" in src
    x2 = np.linspace(-1, 1, 6).reshape(2, 3)
    np.testing.assert_allclose(sg.compile(prog)(x2), prog(x2), rtol=1e-15)


def test_array_attributes_and_unusual_names_are_bound():
    op = sg.Ops()
    x = op.var(np.arange(5.0), name="x")
    mask = np.array([True, False, True, True, False])
    y = x[mask] * x[np.array([4, 0, 1])]
    w = op.var(2.0, name="lambda")                  # a keyword as a name
    prog = op.program([x, w], (y * w).sum())
    fn = sg.compile(prog)
    assert "def program(x, v_lambda):" in fn.source
    np.testing.assert_array_equal(fn(np.arange(5.0) + 1, 3.0), prog(np.arange(5.0) + 1,
                                                                       np.array(3.0)))


def test_compile_checks_its_arguments():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    fn = sg.compile(op.program(x, x.sin()))
    with pytest.raises(sg.ArgumentError, match=r"takes 1 input\(s\) \(x\), got 2"):
        fn(np.zeros(2), np.zeros(2))
    with pytest.raises(sg.ShapeError, match=r"input x has shape \(2,\), got \(2, 2\)"):
        fn(np.zeros((2, 2)))
    np.testing.assert_allclose(fn(np.arange(3.0)), np.sin(np.arange(3.0)), rtol=1e-15)
    with pytest.raises(sg.ArgumentError, match="expected a Program"):
        sg.compile(x)
    with pytest.raises(sg.ArgumentError, match="must be a Python identifier"):
        sg.compile(op.program(x, x.sin()), name="not valid")


def test_names_cannot_break_out_of_a_comment():
    from simplegrad.program.core import Program
    from simplegrad.program.nodes import INPUT, Input, Node, Ref

    f64 = np.dtype(np.float64)
    prog = Program([Input("x\nraise SystemExit('injected')", (2,), f64)], [],
                   [Node(sg.REGISTRY["sin"], (Ref(INPUT, 0),), None,
                         "y\r\nraise SystemExit('injected')", (2,), f64)],
                   [Ref("node", 0)], single=True)
    fn = sg.compile(prog)
    assert all(line.startswith(("def ", "    ")) for line in fn.source.splitlines())
    assert "\\r\\n" in fn.source           # shown escaped in the comment
    np.testing.assert_allclose(fn(np.array([0.5, 1.0])), np.sin([0.5, 1.0]), rtol=1e-15)


def test_custom_vjp_and_checkpoint_compile():
    def make(scale):
        @sg.custom_vjp
        def f(x):
            return (x * scale).tanh()

        @f.defvjp
        def _(g, out, x):
            return g * (1.0 - out * out) * scale
        return f

    first, second = make(2.0), make(-3.0)         # two custom primitives named "f"

    @sg.checkpoint
    def block(x):
        return x.sin() * x

    op = sg.Ops()
    x = op.var([0.3, -0.7], name="x")
    y = (first(x) + second(x) + block(x)).sum()
    gx = op.grad(y, x)
    prog = op.program(x, [y, gx])
    fn = sg.compile(prog)
    assert "F['f']" in fn.source and "F['f#2']" in fn.source
    x2 = np.array([1.1, 0.2])
    for got, want in zip(fn(x2), prog(x2)):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    with pytest.raises(sg.DTypeError, match="input x has dtype float64, got complex128"):
        fn(np.zeros(2, dtype=complex))


def test_an_entry_nobody_reads_is_compiled_and_deleted_on_its_own_line(tmp_path):
    """A loaded program may hold an entry no later one reads (a file edited by hand): the
    compiled function computes and drops it, and answers as the program does."""
    import json

    op = sg.Ops()
    x = op.var(np.arange(3.0), "x")
    y = op.sum(op.mul(op.tanh(x), x))
    prog = op.program([x], y)
    json_path, _ = prog.save(tmp_path / "p")
    doc = json.loads(json_path.read_text())
    names = [n["primitive"] for n in doc["nodes"]]
    mul = names.index("mul")
    doc["nodes"][mul]["args"] = [["input", 0], ["input", 0]]    # tanh's value now unread
    json_path.write_text(json.dumps(doc))
    edited = sg.load_program(tmp_path / "p")
    fn = sg.compile(edited)
    assert "v0 = np.tanh(x); del v0" in fn.source
    np.testing.assert_allclose(fn(np.array([1.0, 2.0, 3.0])), 14.0, rtol=1e-15)
    assert edited(np.array([1.0, 2.0, 3.0])) == fn(np.array([1.0, 2.0, 3.0]))


def test_number_constants_are_literals_negative_ones_parenthesised():
    """-0.0, -2 and 1.5 are written into the source (a negative one in parentheses, so it binds
    as one operand), nan is a bound name; the compiled values equal the program's to the bit
    (the sign of zero too)."""
    from simplegrad.program.nodes import literal
    assert [literal(v) for v in (1.5, -0.0, 0.0, -2, 3, float("nan"), float("inf"), True)] == \
        ["1.5", "(-0.0)", "0.0", "(-2)", "3", None, None, None]
    op = sg.Ops()
    x = op.var(np.array([2.0, -3.0, 0.0]), name="x")
    prog = op.program(x, (x * -0.0 - (-2)) * 1.5 + x * np.nan)
    compiled = sg.compile(prog)
    assert "(-0.0)" in compiled.source and "(-2)" in compiled.source, compiled.source
    assert not any("nan" in line.split("#")[0] for line in compiled.source.splitlines())
    for v in (np.array([2.0, -3.0, 0.0]), np.array([-0.0, 5.0, -1e300])):
        assert compiled(v).tobytes() == prog(v).tobytes()
