"""Bad input raises simplegrad's own error class, names what went wrong, and records nothing.

Each case runs on a fresh Ops with echo on. After the error, the trace text,
the tape's length, the echoed output and the next v-number are exactly as
before the call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

import simplegrad as sg


def _setup() -> SimpleNamespace:
    op = sg.Ops(echo=True)
    e = SimpleNamespace(op=op)
    e.x = op.named_var(np.ones(3), "x")
    e.y = op.named_var(np.ones(4), "y")
    e.M = op.named_var(np.ones((2, 3)), "M")
    e.N = op.named_var(np.ones((4, 5)), "N")
    e.Z = op.named_var(np.zeros((3, 3)), "Z")
    e.v = e.x * 2.0                         # a recorded (3,) result, v0
    e.L = op.sum(e.v * e.x, name="L")       # a recorded scalar
    e.other = sg.Ops().named_var(np.ones(3), "other")
    return e


def _write_into(e: SimpleNamespace) -> None:
    e.v[0] = 1.0


@dataclass(frozen=True)
class Bad:
    """One bad call: the error class it must raise and text its message must contain."""

    call: Callable[[SimpleNamespace], object]
    error: type
    says: tuple[str, ...] = ()


CASES: dict[str, Bad] = {
    # shapes that do not broadcast: the primitive, both names and both shapes
    "broadcast-add": Bad(lambda e: e.x + e.y, sg.ShapeError, ("add", "x", "y", "(3,)", "(4,)")),
    "broadcast-mul": Bad(lambda e: e.op.mul(e.M, e.y), sg.ShapeError,
                         ("mul", "M", "y", "(2, 3)", "(4,)")),
    "broadcast-sub-recorded": Bad(lambda e: e.v - e.y, sg.ShapeError,
                                  ("sub", "v0", "y", "(3,)", "(4,)")),
    "broadcast-constant": Bad(lambda e: e.x * np.ones(4), sg.ShapeError,
                              ("mul", "x", "(3,)", "(4,)")),
    "expand": Bad(lambda e: e.x.expand([4]), sg.ShapeError, ("expand", "x", "(3,)")),
    "reshape": Bad(lambda e: e.x.reshape(2, 2), sg.ShapeError, ("reshape", "x", "(3,)")),
    # matmul shapes that do not multiply
    "matmul": Bad(lambda e: e.M @ e.N, sg.ShapeError, ("matmul", "M", "N", "(2, 3)", "(4, 5)")),
    "matmul-vector": Bad(lambda e: e.x @ e.N, sg.ShapeError, ("matmul", "x", "N")),
    "matmul-constant": Bad(lambda e: np.ones((3, 4)) @ e.M, sg.ShapeError, ("matmul", "M")),
    # a variable of another Ops
    "other-ops-operator": Bad(lambda e: e.x + e.other, sg.GraphError, ("add", "other")),
    "other-ops-method": Bad(lambda e: e.op.tanh(e.other), sg.GraphError, ("tanh", "other")),
    "other-ops-grad-L": Bad(lambda e: e.op.grad(e.other.sum(), e.x), sg.GraphError),
    "other-ops-grad-wrt": Bad(lambda e: e.op.grad(e.L, [e.x, e.other]), sg.GraphError,
                              ("other",)),
    "other-ops-seed": Bad(lambda e: e.op.grad(e.v, e.x, seed=e.other), sg.GraphError),
    # non-scalar L without seed, and a seed of the wrong shape
    "nonscalar-L": Bad(lambda e: e.op.grad(e.v, e.x), sg.ShapeError,
                       ("v0", "(3,)", "seed=", ".sum()")),
    "nonscalar-backward": Bad(lambda e: e.v.backward(), sg.ShapeError, ("seed=", ".sum()")),
    "seed-shape": Bad(lambda e: e.op.grad(e.v, e.x, seed=np.ones((3, 1))), sg.ShapeError,
                      ("(3, 1)", "(3,)")),
    "seed-shape-scalar-L": Bad(lambda e: e.op.grad(e.L, e.x, seed=np.ones(3)), sg.ShapeError),
    "seed-dtype": Bad(lambda e: e.op.grad(e.L, e.x, seed=np.array(1j)), sg.DTypeError),
    # wrt or L that is not a Variable
    "wrt-array": Bad(lambda e: e.op.grad(e.L, [np.ones(3)]), sg.ArgumentError, ("ndarray",)),
    "wrt-number": Bad(lambda e: e.op.grad(e.L, 3.0), sg.ArgumentError, ("float",)),
    "wrt-name": Bad(lambda e: e.op.grad(e.L, [e.x, "M"]), sg.ArgumentError, ("str",)),
    "L-number": Bad(lambda e: e.op.grad(1.0, e.x), sg.ArgumentError),
    # axis out of range
    "axis-sum": Bad(lambda e: e.x.sum(axis=1), sg.AxisError, ("sum", "x", "(3,)")),
    "axis-mean-tuple": Bad(lambda e: e.M.mean(axis=(0, 5)), sg.AxisError,
                           ("mean", "M", "(2, 3)")),
    "axis-max-negative": Bad(lambda e: e.M.max(axis=-3), sg.AxisError, ("max", "M")),
    "axis-logsumexp": Bad(lambda e: e.op.logsumexp(e.M, axis=2), sg.AxisError, ("logsumexp",)),
    "axis-softmax": Bad(lambda e: e.M.softmax(axis=2), sg.AxisError, ("softmax", "M")),
    # index out of bounds: the variable and its shape
    "index-int": Bad(lambda e: e.x[3], sg.OutOfBoundsError, ("x", "(3,)", "3")),
    "index-negative": Bad(lambda e: e.x[-4], sg.OutOfBoundsError, ("x", "(3,)")),
    "index-array": Bad(lambda e: e.x[np.array([0, 5])], sg.OutOfBoundsError, ("x", "(3,)", "5")),
    "index-2d": Bad(lambda e: e.M[0, 3], sg.OutOfBoundsError, ("M", "(2, 3)")),
    "index-recorded": Bad(lambda e: e.v[[1, 3]], sg.OutOfBoundsError, ("v0", "(3,)")),
    "index-too-many": Bad(lambda e: e.x[0, 0], sg.OutOfBoundsError, ("x", "(3,)")),
    "index-float": Bad(lambda e: e.x[1.5], sg.ArgumentError, ("getitem", "x")),
    # writing into a recorded value
    "setitem-recorded": Bad(_write_into, sg.GraphError, ("v0",)),
    # constants and names that cannot be taken
    "constant-str-array": Bad(lambda e: e.x * np.array(["a", "b", "c"]), sg.DTypeError,
                              ("mul", "x")),
    "constant-str": Bad(lambda e: e.x + "a", sg.ArgumentError, ("add", "str")),
    "constant-none": Bad(lambda e: e.op.mul(e.x, None), sg.ArgumentError, ("NoneType",)),
    "name-not-str": Bad(lambda e: e.op.add(e.x, e.x, name=3), sg.ArgumentError),
    "var-object": Bad(lambda e: e.op.var(np.array([1, None], dtype=object)), sg.DTypeError,
                      ("object",)),
    "cast-to-int": Bad(lambda e: e.x.astype(np.int32), sg.DTypeError, ("int32",)),
    "cast-to-complex256": Bad(lambda e: e.x.astype(np.clongdouble), sg.DTypeError,
                              (np.dtype(np.clongdouble).name,)),
    "singular-solve": Bad(lambda e: e.op.solve(e.Z, e.x), sg.LinAlgError, ("solve", "Z", "(3, 3)")),
}

BUILTIN = {sg.ShapeError: ValueError, sg.AxisError: ValueError, sg.GraphError: ValueError,
           sg.DTypeError: TypeError, sg.ArgumentError: TypeError,
           sg.OutOfBoundsError: IndexError, sg.LinAlgError: ValueError}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_bad_input_raises_before_recording(case: Bad, capsys: pytest.CaptureFixture) -> None:
    """The error is ours (and the builtin a caller expects) and nothing is recorded."""
    e = _setup()
    op = e.op
    trace, entries = op.format_trace(), len(op.tape)
    probe = op.var(0.0).name            # the number an unnamed leaf takes now
    capsys.readouterr()
    with pytest.raises(case.error) as info:
        case.call(e)
    assert isinstance(info.value, sg.SimplegradError)
    assert isinstance(info.value, BUILTIN[case.error])
    message = str(info.value)
    for part in case.says:
        assert part in message, f"{part!r} not in {message!r}"
    assert capsys.readouterr().out == ""
    assert len(op.tape) == entries
    assert op.format_trace() == f"{trace}\n{probe} = 0.0000"
    assert op.var(0.0).name == f"v{int(probe[1:]) + 1}"


def test_writing_into_value_raises_value_error() -> None:
    """Writing into a leaf's or a result's .value is numpy's ValueError; nothing changes."""
    e = _setup()
    trace, entries = e.op.format_trace(), len(e.op.tape)
    for v in (e.x, e.v, e.L):
        before = v.value.copy()
        with pytest.raises(ValueError, match="read-only"):
            v.value[...] = 5.0
        np.testing.assert_array_equal(v.value, before)
    assert (e.op.format_trace(), len(e.op.tape)) == (trace, entries)


def test_broadcast_message_reads_well() -> None:
    """The broadcast message: primitive first, then numpy's reason, then names and shapes."""
    e = _setup()
    with pytest.raises(sg.ShapeError) as info:
        e.op.add(e.M, e.y)
    message = str(info.value)
    assert message.startswith("add: ")
    assert message.endswith("(M with shape (2, 3), y with shape (4,))")
    assert "  " not in message


def test_errors_can_be_caught_as_one_family() -> None:
    """Every error class derives from sg.SimplegradError."""
    for cls in (sg.ShapeError, sg.AxisError, sg.GraphError, sg.DTypeError, sg.ArgumentError,
                sg.OutOfBoundsError, sg.NotDifferentiableError, sg.GradientCheckError):
        assert issubclass(cls, sg.SimplegradError)
    assert issubclass(sg.AxisError, sg.ShapeError)


def test_a_variable_of_another_ops_gets_advice_that_keeps_its_dependence():
    """A Variable of another live Ops: the message says to record on one Ops (or pass it to
    the transform), never to take .value, which would drop what it depends on; one whose Ops
    was released has no history left, so its value may be used as a constant."""
    live = sg.Ops()
    w = live.var([1.0, 2.0], name="w")
    op = sg.Ops()
    x = op.var([3.0, 4.0], name="x")
    before = len(op.tape)
    with pytest.raises(sg.GraphError, match="w belongs to another Ops, still live") as err:
        op.mul(x, w)
    assert ".value" not in str(err.value) and len(op.tape) == before
    live.release()
    with pytest.raises(sg.GraphError, match=r"released since it was recorded.*w\.value"):
        op.mul(x, w)
    assert len(op.tape) == before
