"""Every registered primitive, checked from its own metadata: registry x case x derivative kind.

Nothing here names an operation: a primitive added to ``sg.REGISTRY`` with its
cases is picked up as it is. Oracles are float64 central differences
(eps=1e-6) with the primitive's ``tol`` as both atol and rtol, and for the
jvp/vjp pairing <u, J v> == <J^T u, v> atol = rtol = 1e-8; a record that is not
differentiable has exact zero derivatives (no derivative passes it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.render import format_entry
from simplegrad.primitives.core import ANY

# what each kind checks: order1 = reverse mode; order2 = every mode at orders 1 and 2
# (rev of rev, fwd of rev, rev of fwd, fwd of fwd); jvp = forward mode
KINDS: dict[str, dict[str, Any]] = {
    "order1": {"order": 1, "modes": ("rev",)},
    "order2": {"order": 2, "modes": ("rev", "fwd")},
    "jvp": {"order": 1, "modes": ("fwd",)},
}


# ---------------------------------------------------------------- cases from the registry

def samplers(prim: sg.Primitive, case: sg.Case) -> tuple:
    """One sampler per input: the case's domain, else the primitive's, else ANY."""
    domain = case.domain if case.domain is not None else prim.domain
    return (ANY,) * len(case.shapes) if domain is None else tuple(domain)


def sample(prim: sg.Primitive, case: sg.Case, rng: np.random.Generator) -> list[np.ndarray]:
    """Float64 (or complex128) inputs for ``case``, each drawn from its sampler."""
    draws = [np.asarray(draw(rng, shape)) for draw, shape in zip(samplers(prim, case),
                                                                  case.shapes)]
    return [np.asarray(a, dtype=np.complex128 if np.iscomplexobj(a) else np.float64)
            for a in draws]


def applying(prim: sg.Primitive, case: sg.Case) -> Callable[..., sg.Variable]:
    """The function of Variables that records ``prim`` with the case's attributes."""
    def f(*xs: sg.Variable) -> sg.Variable:
        op = xs[0].ops
        args = [op.greater(x, 0) if i in case.conditions else x for i, x in enumerate(xs)]
        return op.apply(prim, args, case.attrs)
    return f


def apply_with(prim: sg.Primitive, case: sg.Case, xs: list, positions: Any) -> Callable:
    """``prim`` as a function of its inputs at ``positions``, the others held at the sample
    ``xs`` (a condition input as ``x > 0``)."""
    def f(*ts: sg.Variable) -> sg.Variable:
        given = dict(zip(positions, ts))
        args = [given.get(j, a > 0 if j in case.conditions else a) for j, a in enumerate(xs)]
        return ts[0].ops.apply(prim, args, case.attrs)
    return f


def real_view(f: Callable, args: list) -> tuple[Callable, list]:
    """``f`` as a function of real arrays, for the walks that compare real Jacobians: each
    complex argument given as its real and imaginary parts on a new last axis, and a complex
    output returned so (its Jacobian is f's in both real directions, each complex scalar a
    (real, imaginary) pair, as the linearised graph orders them). Real f and args unchanged."""
    made = [np.iscomplexobj(a) for a in args]
    parts = [np.stack([a.real, a.imag], axis=-1) if c else a for a, c in zip(args, made)]

    def g(*rs: Any) -> Any:
        op = next(r.ops for r in rs if isinstance(r, sg.Variable))
        zs = [(op.add(r[..., 0], op.mul(r[..., 1], 1j)) if isinstance(r, sg.Variable) else
               r[..., 0] + 1j * r[..., 1]) if c else r for r, c in zip(rs, made)]
        y = f(*zs)
        if isinstance(y, sg.Variable) and np.dtype(y.dtype).kind == "c":
            return op.stack([op.real(y), op.imag(y)], axis=-1)
        return y
    return g, parts


def _text(value: Any) -> str:
    if isinstance(value, slice):
        parts = [value.start, value.stop] + ([value.step] if value.step is not None else [])
        return ":".join("" if p is None else str(p) for p in parts)
    if value is Ellipsis:
        return "..."
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, np.ndarray):
        if value.dtype == bool:
            return "mask" + _text(value.shape)
        return str(value.tolist()).replace(" ", "")
    if isinstance(value, tuple):
        inner = ",".join(_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value).replace(" ", "")


def case_id(case: sg.Case) -> str:
    """Readable case id: shapes joined by x, then the label or the attributes that are set."""
    text = "x".join(_text(tuple(s)) for s in case.shapes)
    if case.label:
        return f"{text}-{case.label}"
    shown = [f"{k}={_text(v)}" for k, v in case.attrs.items() if v is not None and v is not False]
    return "-".join([text, *shown])


def _params() -> list:
    params = []
    for prim in sg.REGISTRY.values():
        for case in prim.cases:
            for kind in [*KINDS, "jvp_vjp"]:
                params.append(pytest.param(prim, case, kind,
                                           id=f"{prim.name}-{case_id(case)}-{kind}"))
    return params


# ---------------------------------------------------------------- the one derivative test

@pytest.mark.parametrize(("prim", "case", "kind"), _params())
def test_derivatives(prim: sg.Primitive, case: sg.Case, kind: str,
                     rng: np.random.Generator) -> None:
    args = sample(prim, case, rng)
    f = applying(prim, case)
    if kind == "jvp_vjp":
        sg.check_jvp_vjp_consistency(f, args, rng)
    elif not prim.differentiable:
        _check_no_derivative(f, args, kind, rng)
    else:
        sg.check_grads(f, args, atol=prim.tol, rtol=prim.tol, rng=rng, **KINDS[kind])


def _check_no_derivative(f: Callable, args: list, kind: str, rng: np.random.Generator) -> None:
    """A record that is not differentiable has no derivative by definition (stop_gradient's
    finite differences are the identity's): its entry needs no gradient, and the gradient of
    anything through it and its tangent are exact zeros."""
    op = sg.Ops()
    xs = [op.var(a) for a in args]
    out = f(*xs)
    assert not out.requires_grad
    if kind != "jvp":
        L = op.sum(op.mul(op.cast(out, np.float64), rng.standard_normal(out.shape)))
        for g in op.grad(L, xs):
            np.testing.assert_array_equal(g.value, 0.0)
    if kind != "order1":
        t = op.jvp(out, xs, [rng.standard_normal(a.shape) for a in args])
        np.testing.assert_array_equal(t.value, 0.0)


# ---------------------------------------------------------------- metadata

def test_registry_is_populated() -> None:
    assert len(sg.REGISTRY) > 0
    assert all(name == prim.name for name, prim in sg.REGISTRY.items())


@pytest.mark.parametrize("prim", list(sg.REGISTRY.values()), ids=list(sg.REGISTRY))
def test_metadata(prim: sg.Primitive, rng: np.random.Generator) -> None:
    assert prim.cases, f"{prim.name} has no check cases"
    assert callable(prim.jvp), f"{prim.name} has no jvp rule"
    method = getattr(sg.Ops, prim.name, None)
    assert callable(method), f"Ops has no method {prim.name!r}"
    assert prim.tol > 0, f"{prim.name}: tol must be positive"
    if prim.variadic:
        assert len(prim.vjp) == 1, f"{prim.name}: a variadic primitive has one shared vjp rule"
    assert all(r is None or callable(r) for r in prim.vjp), f"{prim.name}: a vjp is not callable"
    for case in prim.cases:
        where = f"{prim.name} case {case_id(case)}"
        assert isinstance(case, sg.Case), f"{where}: not a Case"
        assert isinstance(case.attrs, dict), f"{where}: attrs must be a dict"
        assert all(isinstance(s, tuple) for s in case.shapes), f"{where}: shapes must be tuples"
        if not prim.variadic:
            assert len(case.shapes) == len(prim.vjp), f"{where}: one shape per vjp rule"
        draws = samplers(prim, case)
        assert len(draws) == len(case.shapes), f"{where}: one sampler per input"
        args = sample(prim, case, rng)
        for a, s in zip(args, case.shapes):
            assert a.shape == s and np.all(np.isfinite(a)), f"{where}: bad sample {a!r}"
        # the print rule renders a recorded entry, and every entry of its derivatives
        op = sg.Ops()
        xs = [op.var(a) for a in args]
        out = applying(prim, case)(*xs)
        assert out.prim is prim
        line = format_entry(out)
        assert line.startswith(f"{out.name} = ") and len(line) > len(f"{out.name} = "), line
        s = op.sum(op.mul(out, np.ones(out.shape)))
        op.grad(op.sum(op.mul(op.grad(s, xs[0]), 2.0)), xs)
        op.jvp(out, xs, [np.ones(x.shape) for x in xs])
        text = op.format_trace()
        assert f"\n{line}\n" in f"\n{text}\n"    # (a loop's entry: its bodies' lines below)
