"""Explaining a trace: what each gradient entry differentiates, one block alone, named
gradients, derivative orders, and where a nan or inf first appears."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program
from simplegrad.engine.explain import blocks, orders


def test_explained_seed_trace_names_the_forward_entry_and_input_of_each_line():
    op, _, _ = seed_program(echo=False)
    text = op.format_trace(explain=True).splitlines()
    assert text[5:10] == [
        "dL0 --------------",
        "v3 = v2.expand([4])    # d(L0 = v1.sum())/dv1",
        "v4 = v3 * b    # d(v1 = v0 * b)/dv0",
        "v5 = v3 * v0    # d(v1 = v0 * b)/db",
        "v6 = v5 + v4    # accumulation of dL0/db",
    ]
    assert "v24 = v23.sum()    # d(v3 = v2.expand([4]))/dv2" in text
    assert "v18 = v17 + v14    # accumulation of dL1/dv4" in text
    # forward lines and the grad map carry no comment
    assert "v0 = a + b" in text and "dL0_db = v6" in text
    # without explain the text is the seed's, exactly
    assert all("#" not in line for line in op.format_trace().splitlines())


def test_explained_jvp_lines_name_the_entry_they_push_through():
    op = sg.Ops()
    x = op.var(2.0, name="x")
    y = op.mul(x.sin(), x, name="y")
    op.jvp(y, x, 1.0)
    lines = op.format_trace(explain=True, block=-1).splitlines()
    assert lines[0] == "jvp y wrt x --------------"
    assert any(line.endswith("# jvp of (v0 = x.sin())") for line in lines)
    assert any(line.endswith("# jvp of (y = v0 * x)") for line in lines)


def test_newest_block_alone():
    op, _, _ = seed_program(echo=False)
    newest = op.format_trace(block=-1).splitlines()
    assert newest[0] == "dL1 --------------" and newest[-1] == "-" * 18
    assert newest[1] == "v11 = v10.expand([4])" and "dL1_da = v20" in newest
    assert op.format_trace(block=0).splitlines()[0] == "dL0 --------------"
    assert len(op.format_trace(block=0).splitlines()) == 11


def test_named_gradients_name_the_next_order_header():
    # f = x^3: f' = 3x^2 (named dfdx), and the order-2 block is headed by its name
    op = sg.Ops()
    x = op.var(2.0, name="x")
    dfdx = op.grad(x * x * x, x, name="dfdx")
    assert dfdx.name == "dfdx" and "dfdx = " in op.format_trace()
    d2 = op.grad(dfdx, x)
    assert op.format_trace(block=-1).splitlines()[0] == "ddfdx --------------"
    assert d2.value == pytest.approx(12.0)
    op2 = sg.Ops()
    a, b = op2.var(1.0, name="a"), op2.var(2.0, name="b")
    da, db = op2.grad(a * b, [a, b], name=["da", "db"])
    assert (da.name, db.name) == ("da", "db")
    db.name = "grad_b"          # a named gradient is an alias line: the sweep's entry keeps v3
    assert "dv0_db = v3" in op2.format_trace() and "grad_b = v3" in op2.format_trace()
    before = len(op2.tape)
    with pytest.raises(sg.ArgumentError, match="needs 2 identifier"):
        op2.grad(op2.tape[-1], [a, b], name=["only_one"])
    assert len(op2.tape) == before          # refused before anything was recorded
    with pytest.raises(sg.ArgumentError, match="identifier"):
        da.name = "not a name"


def test_blocks_and_orders_follow_the_derivative_order():
    op, a, _ = seed_program(echo=False)
    found = blocks(op.tape)
    assert [(b.title, b.order, b.size) for b in found] == [("dL0", 1, 4), ("dL1", 2, 15)]
    ords = orders(op.tape)
    by_name = {v.name: k for v, k in ords.items()}
    assert by_name["v0"] == 0 and by_name["L0"] == 0 and by_name["v4"] == 1
    assert by_name["L1"] == 1 and by_name["v25"] == 2 and by_name["a"] == 0


def test_find_nonfinite_locates_a_planted_log_zero_in_the_order_two_block():
    # dx = y holds a 0; L1 = sum(log(dx)); d L1 / dy divides by dx: inf in the order-2 block
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        op = sg.Ops()
        x = op.var([1.0, 2.0], name="x")
        y = op.var([0.0, 3.0], name="y")
        dx = op.grad(op.sum(x * y, name="L0"), x, name="dx")
        g = op.grad(op.sum(dx.log(), name="L1"), y)
    report = op.find_nonfinite(g)
    assert report is not None and report.kind == "inf"
    assert report.line.endswith(" / dx") and report.order == 2 and report.block == "dL1"
    assert report.differentiates.startswith("d(") and report.differentiates.endswith(
        "dx.log())/ddx")
    assert "gradient block dL1 (order 2)" in str(report)
    # the forward value log(0) = -inf is its own first non-finite entry
    forward = op.find_nonfinite(next(v for v in op.tape if v.prim.name == "log"))
    assert forward.kind == "inf" and forward.order == 1 and forward.block is None
    assert op.find_nonfinite(x * 2.0) is None


def test_find_nonfinite_reports_a_nan_leaf():
    op = sg.Ops()
    x = op.var([np.nan, 1.0], name="x")
    report = op.find_nonfinite(x.exp().sum())
    assert report.entry is x.node and report.kind == "nan" and report.line.startswith("x = [")
