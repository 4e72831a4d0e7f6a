"""Explanations of a pruned derivation name only what it prints (issue: comments quoted raw
tape entries that pruning merged or renamed, at higher order and in Hessians)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import main, seed_program
from simplegrad.engine.render import comments

NAME = re.compile(r"[A-Za-z_]\w*")


def _defined(text: str) -> set[str]:
    """The names a printed derivation defines: left-hand sides and block targets."""
    names = set()
    for line in text.splitlines():
        code = line.split("    # ", 1)[0]
        if " = " in code:
            names.add(code.split(" = ", 1)[0])
        elif code.endswith("-" * 14) and code.startswith("d"):
            names.add(code.split(" ", 1)[0][1:])      # dv3 ---: the target v3
    return names


def _stale(tape_names: set[str], text: str) -> list[str]:
    """The explained lines of ``text`` that mention a tape name the text does not print."""
    printed = _defined(text)
    bad = []
    for line in text.splitlines():
        if "    # " not in line:
            continue
        for token in NAME.findall(line.split("    # ", 1)[1]):
            name = token[1:] if token.startswith("d") and token[1:] in tape_names else token
            if name in tape_names and name not in printed:
                bad.append(line)
    return bad


def _tape_names(op: sg.Ops) -> set[str]:
    names = {v.name for v in op.tape.entries if v is not None}
    return names | {e.var.name for e in op.tape.events if hasattr(e, "var")}


CLI = [
    ["--var", "x=0.5", "--derivative", "3", "tanh(x)"],
    ["--var", "x=0.7", "--derivative", "3", "sqrt(x)*sin(x)"],
    ["--var", "x=0.7", "--derivative", "3", "x/(1+x**2)"],
    ["--var", "a=1,2,3", "--hessian", "log(sum(exp(a)))"],
    ["--var", "x=1", "--var", "y=2", "--hessian", "x**2*y+y**3"],
    ["--var", "a=1,2", "--var", "b=3,4", "sum((a + b) * b)"],
]


@pytest.mark.parametrize("args", CLI, ids=lambda a: a[-1])
def test_cli_explanations_name_only_printed_lines(args, capsys, monkeypatch):
    recorded = []
    original = sg.Ops.format_trace

    def spy(self, *a, **k):
        recorded.append(self)
        return original(self, *a, **k)

    monkeypatch.setattr(sg.Ops, "format_trace", spy)
    assert main(["trace", "--plain", "--explain", *args]) == 0
    out = capsys.readouterr().out
    assert "    # " in out
    assert _stale(_tape_names(recorded[-1]), out) == []


def _quadratic_hessian():
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    return sg.trace(sg.hessian(lambda x: 0.5 * (x * (A @ x)).sum()), np.array([0.3, -0.7]))


def _logsumexp_hessian():
    return sg.trace(sg.hessian(lambda a: a.exp().sum().log()), np.array([1.0, 2.0, 3.0]))


def _tanh3():
    op = sg.Ops()
    x = op.var(0.5, name="x")
    g = x.tanh()
    for _ in range(3):
        g = op.grad(g, x)
    return op


@pytest.mark.parametrize("make", [_quadratic_hessian, _logsumexp_hessian, _tanh3,
                                  lambda: seed_program(echo=False)[0]],
                         ids=["quadratic-form", "logsumexp", "tanh3", "seed"])
def test_explained_derivations_name_only_printed_lines(make):
    op = make()
    text = op.format_trace(explain=True, raw=False)
    assert _stale(_tape_names(op), text) == []
    # the explanations are of the lines printed, one per printed gradient line at most
    plain = op.format_trace(raw=False).splitlines()
    assert [line.split("    # ", 1)[0] for line in text.splitlines()] == plain


def test_tanh_third_derivative_names_the_printed_forward_lines():
    text = _tanh3().format_trace(explain=True, raw=False)
    assert "v18 = -v11    # d(v3 = 1 - v2)/dv2" in text.splitlines()
    assert "v19 = v18 * v0    # d(v2 = v0 * v0)/dv0" in text.splitlines()
    assert "v11 = v9 * 2.0    # accumulation of dv3/dv0" in text.splitlines()


def test_raw_explanations_are_unchanged():
    op = _tanh3()
    raw = op.format_trace(explain=True, raw=True).splitlines()
    assert "v18 = -v17    # d(v13 = 1 - v12)/dv12" in raw
    assert comments(op.tape) == comments(op.tape, None)
