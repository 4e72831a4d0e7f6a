"""The command line against hostile input: exact integer constants, constants that are not a
float64 (exit 2) or not finite (exit 1), every error (a MemoryError included) as one line on
stderr naming the primitive and its arguments, never a traceback; and a fuzzed command line
(random expressions from a grammar of every primitive's name, huge and non-finite numbers,
keywords and indices, random variable values and orders) that exits 0, 1 or 2 and touches no
process-wide state.
"""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad.cli import main


def _run(capsys, expr: str, *var: str, order: int = 1) -> tuple[int, str, str]:
    args = ["trace", expr, *[f"--var={v}" for v in var or ("a=1,2",)], f"--order={order}"]
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def _grad(out: str) -> np.ndarray:
    line = next(x for x in out.splitlines() if x.startswith("da = ["))   # (not the alias line)
    return np.array([float(t) for t in line[6:-1].split(",")])


@pytest.mark.parametrize(("expr", "factor", "text"), [
    ("sum(a * 2**64)", 2.0**64, "a * 1.8446744073709552e+19"),     # beyond int64: a float
    ("sum(a * 10**19)", 1e19, "a * 1e+19"),
    ("sum(a * (2**52 + 2**52))", 2.0**53, "a * 9007199254740992"),
    ("sum(a * -(2**63))", -(2.0**63), "a * -9223372036854775808"),
    ("sum(a * (2**70 // 1 if False else 2**70))", None, None),
])
def test_integer_constants_are_exact(capsys, expr, factor, text):
    code, out, err = _run(capsys, expr)
    if factor is None:              # a conditional expression: refused, exit 2
        assert code == 2 and "conditional expression is not allowed" in err
        return
    assert code == 0, err
    assert text in out
    # d/da sum(a * c) = c, printed to 4 significant digits (closed form)
    np.testing.assert_allclose(_grad(out), [factor, factor], rtol=1e-4)


def test_a_power_beyond_int64_and_its_gradient(capsys):
    """d/da a**p = p a**(p - 1): at a = 1, p; at a = 0.5, 0 (p = 2**64, a float64)."""
    code, out, err = _run(capsys, "sum(a ** 2**64)", "a=1,0.5")
    assert code == 0, err
    assert "v0 = a ** 1.8446744073709552e+19" in out
    np.testing.assert_allclose(_grad(out), [2.0**64, 0.0], rtol=1e-4)


@pytest.mark.parametrize(("expr", "code", "message"), [
    ("sum(a * (2**62 * 2 - 1 + 2))", 2, r"2\*\*62 \* 2 - 1 \+ 2 is not exactly"),
    ("sum(a * 10**23)", 2, r"the constant 10\*\*23 is not exactly a float64"),
    ("sum(a * (2**53 + 1))", 2, r"the constant 2\*\*53 \+ 1 is not exactly a float64"),
    ("sum(a * 3**100000000)", 2, r"the constant 3\*\*100000000 is beyond the range of float64"),
    ("sum(a * 10**400)", 2, r"the constant 10\*\*400 is beyond the range of float64"),
    ("sum(a + 1e999 - 1e999)", 1, "the constant 1e999 is not finite"),
    ("sum(a * (1e308 * 10))", 1, r"the constant 1e308 \* 10 is not finite"),
    ("sum(a * (1 / 0))", 1, "the constant 1 / 0 divides by zero"),
    ("maximum(a, -1e999)", 1, "the constant -1e999 is not finite"),
    ("sum(a, axis=1000000000000000000000000000000)", 2,
     r"sum\(...\): the keyword axis=1000000000000000000000000000000 is out of range"),
    ("tile(a, (1000000, 1000000))", 1, r"tile\(x=a with shape \(2,\), reps=\(1000000, "
     r"1000000\)\): not enough memory for the result"),
    ("repeat(a, 10000000000000, axis=0)", 1, r"repeat\(x=a with shape \(2,\), "
     r"repeats=10000000000000, axis=0\): not enough memory"),
    ("sum(log(a - 5))", 1, r"L0 is not finite; first nan: v1 = v0.log\(\)"),
    ("a[1000000000000000000000000]", 1, "getitem: only integers"),
])
def test_constants_and_errors_exit_with_a_message(capsys, expr, code, message):
    got, out, err = _run(capsys, expr)
    assert got == code, err
    assert err.startswith("simplegrad: error: ") and "Traceback" not in err
    assert re.search(message, err), err


def test_variables_that_are_not_finite(capsys):
    for value in ("1e999", "nan", "1,-inf"):
        code, _, err = _run(capsys, "sum(a)", f"a={value}")
        assert code == 1 and "--var a: a value that is not finite" in err, err


@pytest.mark.parametrize(("error", "text"), [
    (MemoryError(), "not enough memory (in the gradient of"),
    (np.linalg.LinAlgError("Singular matrix"), "Singular matrix; in the gradient of"),
    (KeyError("k"), "KeyError: 'k'; in the gradient of"),
])
def test_an_error_inside_a_gradient_sweep_names_the_entry(capsys, monkeypatch, error, text):
    """A rule failing with an error not of simplegrad's (numpy's, a MemoryError) exits 1 with
    one line naming the entry, its inputs' shapes and the input it was pulling back to."""
    def failing(o, g, out, x):
        raise error

    monkeypatch.setattr(sg.REGISTRY["sin"], "vjp", [failing])
    code, out, err = _run(capsys, "sum(sin(a * 2))")
    assert code == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"simplegrad: error: {text} v1 = v0.sin() (v0 with shape (2,)) to "
                          "its input v0 = a * 2"), err


def test_errors_in_sweeps_keep_their_type_and_gain_a_note(monkeypatch):
    """In the library, the error keeps its type (nothing is wrapped) and carries one note
    naming the entry, in reverse (recorded or values only) and in forward mode."""
    def failing(*args, **kwargs):
        raise FloatingPointError("overflow in the rule")

    monkeypatch.setattr(sg.REGISTRY["exp"], "vjp", [failing])
    monkeypatch.setattr(sg.REGISTRY["exp"], "jvp", failing)
    for create_graph in (True, False):
        op = sg.Ops()
        x = op.var(np.ones(3), name="x")
        L = op.exp(x, name="y").sum()
        n = len(op.tape)
        with pytest.raises(FloatingPointError) as info:
            op.grad(L, x, create_graph=create_graph)
        assert info.value.__notes__ == ["simplegrad: in the gradient of y = x.exp() (x with "
                                        "shape (3,)) to its input x"]
        assert len(op.tape) == n        # the failed sweep left nothing on the tape
    with pytest.raises(FloatingPointError) as info:
        sg.jvp(lambda t: t.exp().sum(), (np.ones(2),), (np.ones(2),))
    assert len(info.value.__notes__) == 1 and "in the tangent of" in info.value.__notes__[0]


@pytest.mark.parametrize(("expr", "code", "start"), [
    ("tile(a, (1000000, 1000000))", 1, "simplegrad: error: tile(x=a with shape (2,), reps="),
    ("8or", 2, "simplegrad: error: cannot parse the expression '8or': the number 8 runs"),
    ("sum(a, dtype='\\d')", 2, "simplegrad: error: the string '\\d' is not allowed"),
])
def test_a_real_process_prints_one_line_and_no_traceback(expr, code, start):
    """In a real process (warnings shown, nothing captured): one line on stderr, the exit code
    of its kind; a MemoryError and Python's parser warnings included."""
    done = subprocess.run([sys.executable, "-m", "simplegrad", "trace", expr, "--var", "a=1,2"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == code
    assert done.stderr.startswith(start) and done.stderr.count("\n") == 1, done.stderr

# ---------------------------------------------------------------- fuzzed


NUMBERS = ["0", "1", "2.5", "1e999", "-1e999", "2**64", "10**19", "10**23", "10**400",
           "3**100000000", "1e-320", "(1/0)", "(0**-1)", "(-8)**0.5", "2**-1080", "1e308*10",
           "1000000000000000000000000", "0.1"]
KEYWORDS = ["axis=0", "axis=-1", "axis=1000000000000000000000000000000", "axis=(0, 0)",
            "keepdims=True", "shape=(2,)", "reps=(1000000, 1000000)", "repeats=2",
            "n=3", "name='x'", "dtype='float32'", "k=1", "ord=2", "axis=None", "decimals=1e999",
            "subscripts='i->i'", "__class__=1", "**{}"]
INDICES = ["0", "1:3", "::-1", "None", "...", "1000000000000000000000000", "(0, 0)",
           "[0, 1]", "::0", "-3"]
NAMES = sorted(sg.REGISTRY) + ["eval", "__import__", "open", "exec", "getattr", "a", "nan"]


def expressions() -> st.SearchStrategy[str]:
    atoms = st.one_of(st.sampled_from(["a", "b", "a", "b", "c"]), st.sampled_from(NUMBERS))

    def extend(inner):
        return st.one_of(
            inner.map(lambda e: f"-{e}"),
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "**", "@"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(NAMES), st.lists(inner, min_size=0, max_size=3),
                      st.lists(st.sampled_from(KEYWORDS), max_size=2)).map(
                lambda t: f"{t[0]}({', '.join(t[1] + t[2])})"),
            st.tuples(inner, st.sampled_from(INDICES)).map(lambda t: f"{t[0]}[{t[1]}]"))
    return st.one_of(st.recursive(atoms, extend, max_leaves=6), st.text(max_size=16))


VALUES = ["1,2", "0.5", "1,2;3,4", "1e999", "nan", "1,2,3", "-1,0", "x", "1,,2", ""]


def _state() -> tuple:
    return (list(warnings.filters), np.geterr(), gc.isenabled(), np.get_printoptions(),
            sys.getrecursionlimit())


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(expr=expressions(), a=st.sampled_from(VALUES), b=st.sampled_from(VALUES),
       order=st.integers(0, 2), flags=st.lists(st.sampled_from(["--simplify", "--explain",
                                                                  "--rich", "--wrt=a"]),
                                                 max_size=2, unique=True))
def test_fuzzed_command_lines_exit_0_1_or_2_without_a_traceback(capsys, expr, a, b, order,
                                                                flags):
    before = _state()
    code = main(["trace", expr, f"--var=a={a}", f"--var=b={b}", f"--order={order}", *flags])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (expr, code, err)
    assert "Traceback" not in err and "Traceback" not in out, (expr, err)
    if code:
        assert err.startswith(("simplegrad: error:", "usage:")), (expr, err)
    assert _state() == before
