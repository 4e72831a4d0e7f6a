"""The command line: the demo prints exactly the seed program's lines (grad-map lines as sets);
``simplegrad trace`` differentiates expressions (checked against the seed and closed forms),
refuses anything outside its whitelist, and exits 0 / 2 (usage) / 1 (math error)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from simplegrad.cli import main
from simplegrad.engine.render import format_value
from tests.test_trace import SEED_OUTPUT, comparable


def test_main_prints_the_seed_output(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert comparable(printed) == comparable(SEED_OUTPUT.splitlines())


def test_rich_mode_prints_the_same_lines(capsys: pytest.CaptureFixture) -> None:
    assert main(["--rich"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # the trace, then a table of the blocks by derivative order, then the gradients
    table = printed.index(next(line for line in printed if "derivative blocks" in line))
    trace = printed[:table] + printed[-2:]
    assert comparable(trace) == comparable(SEED_OUTPUT.splitlines())
    assert any("dL1" in line and " 2 " in line for line in printed[table:])


def test_python_dash_m_runs_the_demo() -> None:
    done = subprocess.run([sys.executable, "-m", "simplegrad"], capture_output=True, text=True,
                          check=True)
    assert comparable(done.stdout.splitlines()) == comparable(SEED_OUTPUT.splitlines())


# ---------------------------------------------------------------- simplegrad trace

SEED_VARS = ["--var", "a=0.4605,0.4061,0.9422,0.3946", "--var", "b=0.0850,0.3296,0.9888,0.6494"]


def _run(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_trace_order_2_of_the_seed_expression(capsys: pytest.CaptureFixture) -> None:
    code, out, err = _run(["trace", "sum((a + b) * b)", *SEED_VARS, "--wrt", "a,b",
                           "--order", "2", "--raw"], capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[-1] == "db = [ 2.6920,  4.9204, 13.6568,  8.0724]"
    assert lines[-2] == "da = [1.2610, 2.1306, 5.8396, 3.3868]"
    # the raw trace is the seed program's, and the gradients' names are alias lines
    assert lines[-4:-2] == ["da = v20", "db = v25"]
    assert comparable(lines[:-4] + lines[-2:]) == comparable(SEED_OUTPUT.splitlines())
    assert "L1 = v9.sum()" in lines and "v25 = v22 + v20" in lines


def test_trace_sums_a_non_scalar_expression_and_says_so(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = _run(["trace", "tanh(a) * 2", "--var", "a=0.5,-1", "--order", "1"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "# the expression has shape (2,): L0 is its sum"
    assert "L0 = v1.sum()" in lines
    want = 2 / np.cosh(np.array([0.5, -1.0])) ** 2
    assert lines[-1] == f"da = {format_value(want)}"


def test_trace_order_3_scalars_and_matrices(capsys: pytest.CaptureFixture) -> None:
    # L0 = x^3 (x = 1.5): dL0 = 3x^2; L1 = 9x^4, dL1 = 36x^3; L2 = 1296 x^6, dL2 = 7776 x^5
    code, out, _ = _run(["trace", "x ** 3", "--var", "x=1.5", "--order", "3"], capsys)
    assert code == 0 and out.splitlines()[-1] == f"dx = {format_value(7776 * 1.5 ** 5)}"
    code, out, _ = _run(["trace", "sum(a * a, axis=0)", "--var", "a=1,2;3,4", "--order", "2"],
                        capsys)
    assert code == 0 and out.splitlines()[-1] == "da = [[ 8.0000, 16.0000], [24.0000, 32.0000]]"


def test_trace_simplify_explain_rich(capsys: pytest.CaptureFixture) -> None:
    args = ["trace", "sum((a + b) * b)", *SEED_VARS, "--order", "2"]
    code, out, _ = _run([*args, "--simplify"], capsys)
    assert code == 0 and out.startswith("inputs: a, b\n") and "dL0 -----" not in out
    assert "outputs: " in out and out.splitlines()[-1].startswith("db = [ 2.6920")
    code, out, _ = _run([*args, "--explain", "--raw"], capsys)
    assert "v4 = v3 * b    # d(v1 = v0 * b)/dv0" in out
    code, out, _ = _run([*args, "--rich"], capsys)
    assert code == 0 and "derivative blocks by order" in out and "13.6568" in out


def test_trace_writes_dot_svg_and_saved_program(tmp_path, capsys: pytest.CaptureFixture):
    import shutil

    import simplegrad as sg
    args = ["trace", "sum((a + b) * b)", *SEED_VARS, "--order", "2",
            "--dot", str(tmp_path / "g.dot"), "--save", str(tmp_path / "g")]
    if shutil.which("dot"):
        args += ["--svg", str(tmp_path / "g.svg")]
    assert _run(args, capsys)[0] == 0
    assert (tmp_path / "g.dot").read_text().startswith("digraph program {")
    prog = sg.load_program(tmp_path / "g")
    got = prog(np.array([0.4605, 0.4061, 0.9422, 0.3946]), np.array([0.0850, 0.3296, 0.9888,
                                                                     0.6494]))
    assert format_value(got[1]) == "[ 2.6920,  4.9204, 13.6568,  8.0724]"
    if shutil.which("dot"):
        assert b"<svg" in (tmp_path / "g.svg").read_bytes()


@pytest.mark.parametrize(("expr", "message"), [
    ("__import__('os')", "__import__(...) is refused: only simplegrad primitives"),
    ("a.__class__", "attribute access (such as a.__class__) is not allowed"),
    ("[x for x in a]", "a comprehension is not allowed"),
    ("sum(x * x for x in a)", "a comprehension is not allowed"),
    ("(lambda: a)()", "a lambda is not allowed"),
    ("open('f')", "open(...) is refused"),
    ("a + c", "unknown name 'c': give it with --var c=..."),
    ("__builtins__", "the name __builtins__ is refused"),
    ("(1)[0]", "only a value computed from the variables can be indexed"),
    ("a[b]", "an index must be a literal"),
    ("sum(a, axis=b)", "sum's keyword axis must be a literal"),
    ("sum(a, **{})", "the keyword argument ** is not allowed"),
    ("a if a else b", "a conditional expression is not allowed"),
    ("a > b", "a comparison (call greater(a, b)) is not allowed"),
    ("'text'", "the constant 'text' is not a number"),
    ("a // b", "the operator FloorDiv is not allowed"),
    ("exp(a, b)", r"exp\(...\) takes at most 1 argument\(s\), got 2"),
    ("a +", "cannot parse the expression"),
    ("2 * 3", "the expression does not depend on any --var"),
])
def test_trace_refuses_expressions(expr: str, message: str, capsys) -> None:
    code, out, err = _run(["trace", expr, "--var", "a=1,2", "--var", "b=3,4"], capsys)
    assert code == 2 and out == ""
    assert err.startswith("simplegrad: error: ") and "Traceback" not in err
    assert message in err or re.search(message, err), err


@pytest.mark.parametrize(("args", "message"), [
    (["--var", "a=1,x"], "VALUES must be numbers"),
    (["--var", "1a=2"], "expected NAME=VALUES with NAME an identifier"),
    (["--var", "exp=2"], "the name of a primitive cannot be a variable"),
    (["--var", "a=1", "--wrt", "z"], "--wrt names 'z', which is not a --var"),
    (["--var", "a=1", "--order", "0"], "--order must be at least 1"),
])
def test_trace_usage_errors(args, message, capsys) -> None:
    code, _, err = _run(["trace", "a", *args], capsys)
    assert code == 2 and message in err


def test_exit_codes_for_math_errors_and_bad_options(capsys) -> None:
    code, _, err = _run(["trace", "a @ b", "--var", "a=1,2", "--var", "b=1,2,3"], capsys)
    assert code == 1 and "matmul: " in err and "(a with shape (2,), b with shape (3,))" in err
    code, out, err = _run(["trace", "log(a)", "--var", "a=-1"], capsys)
    assert code == 1 and "first nan: L0 = a.log(), in the forward pass" in err
    assert "da = -1.0000" in out            # the trace and values are printed first
    code, _, err = _run(["trace", "a", "--bogus"], capsys)
    assert code == 2 and "unrecognized arguments: --bogus" in err
    assert main(["--help"]) == 0
    assert "trace" in capsys.readouterr().out


def test_closed_pipe_is_quiet() -> None:
    for args in (["--rich"], [], ["trace", "tanh(a)", "--var", "a=1,2", "--order", "4"]):
        proc = subprocess.Popen([sys.executable, "-m", "simplegrad", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.readline()
        proc.stdout.close()                  # as `| head -1` does
        err = proc.stderr.read().decode()
        proc.stderr.close()
        assert proc.wait() == 0 and err == "", (args, err)
