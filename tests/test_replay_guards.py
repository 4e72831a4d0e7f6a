"""Replays that would take another branch raise: each Python decision on a recorded value is a
guard on the tape, which programs, compiled programs, saved programs and sg.jit check."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.program import Program

HERE = Path(__file__)


def line_of(marker: str) -> int:
    """The line of this file holding ``marker`` (a decision's comment)."""
    lines = HERE.read_text().splitlines()
    return next(k for k, text in enumerate(lines, 1) if marker in text and "line_of" not in text)


def doubled_until_ten(y):
    while y < 10:       # the loop's decision
        y = y * 2
    return y


def plain_doubled_until_ten(x: float) -> float:
    while x < 10:
        x *= 2
    return x


def record_loop(at: float) -> Program:
    op = sg.Ops()
    x = op.var(at, name="x")
    return op.program(x, doubled_until_ten(x))


def branch(u):
    return u.sin() if u.sum() > 0 else u.cos()      # the branch's decision


def record_branch() -> Program:
    op = sg.Ops()
    u = op.var([0.5, 0.25], name="u")
    return op.program(u, branch(u))


def test_the_while_loop_of_the_issue_raises_where_it_answered_96():
    prog = record_loop(1.5)             # 1.5, 3, 6, 12: three doublings
    assert prog(1.5) == 12.0 == plain_doubled_until_ten(1.5)
    assert prog(2.0) == 16.0 == plain_doubled_until_ten(2.0)     # three doublings too
    # at 12 the loop does not run: 12 is right; the recorded entries alone give 96
    assert plain_doubled_until_ten(12.0) == 12.0
    unguarded = Program(prog.inputs, prog.constants, prog.nodes, prog.outputs, single=True)
    assert unguarded(12.0) == 96.0
    with pytest.raises(sg.ReplayError) as e:
        prog(12.0)
    text = str(e.value)
    assert f"`y < 10` (at test_replay_guards.py:{line_of('the loop')})" in text
    assert "was True; at these inputs it is False" in text
    assert "record it again, or write the branch with where()" in text
    with pytest.raises(sg.ReplayError):     # four doublings where three were recorded
        prog(1.0)


def test_a_branch_replays_at_inputs_that_take_it_and_raises_at_the_others():
    prog = record_branch()
    np.testing.assert_allclose(prog(np.array([1.0, -0.5])), np.sin([1.0, -0.5]), rtol=1e-15)
    where = rf"u.sum\(\) > 0 else u.cos\(\)` \(at test_replay_guards.py:{line_of('the branch')}\)"
    with pytest.raises(sg.ReplayError, match=where + " was True; at these inputs it is False"):
        prog(np.array([-1.0, 0.5]))
    assert isinstance(sg.ReplayError("x"), ValueError)
    assert issubclass(sg.ReplayError, sg.SimplegradError)


def test_numbers_read_out_must_come_out_the_same():
    op = sg.Ops()
    x = op.var(2.0)
    k = int(x.item())                # a number read from the value: 2 turns below
    y = x
    for _ in range(k):
        y = y * x
    prog = op.program(x, y)
    assert prog(2.0) == 8.0
    assert [g.kind for g in prog.guards] == ["item"]
    with pytest.raises(sg.ReplayError, match=r"`k = int\(x.item\(\)\)` .* was 2.0; at these "
                                             r"inputs it is 3.0"):
        prog(3.0)                    # 3 ** 4 = 81 is right there; the program has x ** 3
    z = op.var(math.nan)
    w = z * 1.0
    w.item()
    nan_prog = op.program(z, w * 2.0)
    assert math.isnan(nan_prog(math.nan))      # nan read, nan again: the same decision


def test_decisions_on_plain_values_are_constants_not_guards():
    op = sg.Ops()
    u = op.var(0.5)
    w = u.sin() if u.value > 0 else u.cos()     # numpy decides: not on the tape
    prog = op.program(u, w)
    assert prog.guards == ()
    np.testing.assert_allclose(prog(-0.5), np.sin(-0.5), rtol=1e-15)


def test_decisions_on_values_the_inputs_do_not_compute_are_not_guards():
    op = sg.Ops()
    x = op.var(1.0)
    c = op.var(3.0)
    scale = 2.0 if c > 0 else -2.0       # about c, a constant of a program of x
    prog = op.program(x, x * scale)
    assert prog.guards == ()
    assert prog(5.0) == 10.0


def test_guards_survive_simplify_and_other_batch_sizes():
    op = sg.Ops()
    x = op.var(np.ones((3, 2)))
    s = x.sum()
    y = (x * 2.0).sum(axis=1) if s > 0 else (x * 3.0).sum(axis=1)
    prog = op.program(x, y)
    for p in (prog, sg.simplify(prog)):
        assert len(p.guards) == 1
        np.testing.assert_allclose(p(np.full((5, 2), 0.5)), np.full(5, 2.0), rtol=1e-15)
        with pytest.raises(sg.ReplayError):
            p(-np.ones((5, 2)))
    assert "guard: " in prog.format()


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_compiled_programs_check_the_guards(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    prog = record_branch()
    c = sg.compile(prog, backend=backend)
    assert "G0(" in c.source
    np.testing.assert_allclose(c(np.array([1.0, -0.5])), np.sin([1.0, -0.5]), rtol=1e-15)
    with pytest.raises(sg.ReplayError, match=f"test_replay_guards.py:{line_of('the branch')}"):
        c(np.array([-1.0, 0.5]))
    loop = sg.compile(record_loop(1.5), backend=backend)
    assert loop(np.array(2.0)) == 16.0
    with pytest.raises(sg.ReplayError, match="`y < 10`"):
        loop(np.array(12.0))


def test_saved_programs_keep_their_guards(tmp_path):
    prog = record_loop(1.5)
    json_path, _ = prog.save(tmp_path / "loop")
    assert '"guards"' in json_path.read_text()
    back = sg.load_program(tmp_path / "loop")
    assert back.guards == tuple(g._replace(file=Path(g.file).name) for g in prog.guards)
    assert back(2.0) == 16.0
    with pytest.raises(sg.ReplayError, match=rf"test_replay_guards.py:{line_of('the loop')}\)"):
        back(12.0)
    assert sg.compile(back)(np.array(2.0)) == 16.0
    op = sg.Ops()
    x = op.var(2.0)
    unguarded = op.program(x, x * 3.0)
    unguarded_json, _ = unguarded.save(tmp_path / "plain")
    assert '"guards"' not in unguarded_json.read_text()     # saved as before
    data = HERE.parent / "data"
    for old in sorted(data.glob("saved_*.json")):           # files of earlier versions load
        assert sg.load_program(old.with_suffix("")).guards == ()


def test_jit_records_again_where_a_guard_fails():
    calls = []

    def f(x):
        calls.append(1)
        if x.sum() > 0:
            return (x * x).sum()
        return -x.sum()

    g = sg.jit(f)
    assert g(np.array([1.0, 2.0])) == 5.0
    assert g(np.array([3.0, 1.0])) == 10.0          # the same branch: replayed
    assert g.recordings == 1 and len(calls) == 1
    assert g(np.array([-1.0, -2.0])) == 3.0         # the other: recorded again
    assert g.recordings == 2
    assert g(np.array([2.0, 2.0])) == 8.0           # both programs kept
    assert g(np.array([-3.0, 1.0])) == 2.0
    assert g.recordings == 2 and len(calls) == 2
    assert all(len(c.program.guards) == 1 for c in g.programs(np.array([1.0, 2.0])))


def test_jit_of_a_loop_and_of_constants_chosen_by_a_decision():
    g = sg.jit(doubled_until_ten)
    for x in (1.5, 2.0, 12.0, 0.3, 12.5, 1.5):
        assert g(np.array(x)) == plain_doubled_until_ten(x)
    assert g.recordings == 3          # three turns, none, five: one program each

    h = sg.jit(lambda x: 1.0 if x.sum() > 0 else 2.0)
    assert h(np.array([1.0])) == 1.0
    assert h(np.array([-1.0])) == 2.0
    assert h(np.array([4.0])) == 1.0
    assert h.recordings == 2
