"""The registry walk at complex samples: every record that takes complex values
(``TAKES_COMPLEX``: conj and the Fourier transforms on their own complex cases), each of its
cases with its inputs made complex, checked at orders 1 and 2 (reverse and forward), in forward
mode and for the jvp/vjp pairing, against the checker's complex central differences (both real
directions; JAX's convention); a record with no derivative has exact zeros, and the records of
``PHASE_GAUGED`` are checked through |out|^2 (the phases of their vectors are a gauge).
Every registered record either takes complex values here or refuses them with DTypeError
naming itself."""

from __future__ import annotations

import numpy as np
import pytest
from test_primitives import KINDS, _check_no_derivative, applying, case_id, samplers

import simplegrad as sg
from simplegrad.primitives.complex import PHASE_GAUGED, REAL_ONLY, TAKES_COMPLEX


def _complex_args(prim: sg.Primitive, case: sg.Case, rng: np.random.Generator) -> list:
    """The case's samples, each float input given an imaginary part of half its own law
    (conditions stay real: they are read as x > 0; the primitives made for complex values
    sample their own cases as they are)."""
    out = []
    for i, (draw, shape) in enumerate(zip(samplers(prim, case), case.shapes)):
        a = np.asarray(draw(rng, shape))
        if a.dtype.kind == "f" and i not in case.conditions:
            a = a + 0.5j * np.asarray(draw(rng, shape))
        out.append(np.asarray(a, dtype=np.complex128 if a.dtype.kind == "c" else np.float64))
    return out


def _params() -> list:
    params = []
    for prim in (sg.REGISTRY[name] for name in TAKES_COMPLEX):
        name = prim.name
        for k, case in enumerate(prim.cases):
            # every kind on each primitive's first case in the default run; the other cases
            # (broadcasting, axes, the shapes the real battery covers too) in the slow step
            marks = () if k == 0 else (pytest.mark.slow,)
            for kind in [*KINDS, "jvp_vjp"]:
                params.append(pytest.param(prim, case, kind, marks=marks,
                                           id=f"{name}-{case_id(case)}-complex-{kind}"))
    return params


@pytest.mark.parametrize(("prim", "case", "kind"), _params())
def test_complex_derivatives(prim: sg.Primitive, case: sg.Case, kind: str,
                             rng: np.random.Generator) -> None:
    args = _complex_args(prim, case, rng)
    f = applying(prim, case)
    if prim.name in PHASE_GAUGED:
        f = (lambda g: lambda *xs: abs(g(*xs)) ** 2)(f)
    if kind == "jvp_vjp":
        sg.check_jvp_vjp_consistency(f, args, rng)
    elif not prim.differentiable:
        _check_no_derivative(f, args, kind, rng)
    else:
        tol = max(prim.tol, 1e-5)
        sg.check_grads(f, args, atol=tol, rtol=tol, rng=rng, **KINDS[kind])


def test_the_lists_name_records():
    assert set(TAKES_COMPLEX) <= set(sg.REGISTRY) and set(REAL_ONLY) <= set(sg.REGISTRY)
    assert not set(TAKES_COMPLEX) & set(REAL_ONLY) and set(PHASE_GAUGED) <= set(TAKES_COMPLEX)


# (a loop's plumbing moves packed values of whatever dtype its carries have: no refusal due)
PLUMBING = {"loop_part", "loop_placed", "loop_astype"}


@pytest.mark.parametrize("name", sorted(set(sg.REGISTRY) - set(TAKES_COMPLEX) - PLUMBING))
def test_every_other_record_refuses_complex_naming_itself(name, rng):
    """A record outside TAKES_COMPLEX refuses a complex input of its first case with
    DTypeError naming itself (its Ops method, or numpy's refusal as Ops.apply reports it)."""
    prim = sg.REGISTRY[name]
    case = prim.cases[0]
    args = _complex_args(prim, case, rng)
    if not any(np.iscomplexobj(a) for a in args):
        args = [a + 0.5j if i not in case.conditions else a for i, a in enumerate(args)]
    op = sg.Ops()
    xs = [op.var(a) for a in args]
    with pytest.raises(sg.DTypeError, match=rf"^{name}"):
        if hasattr(sg.Ops, name) and name in REAL_ONLY:
            getattr(op, name)(*xs, **case.attrs)
        else:
            applying(prim, case)(*xs)


@pytest.mark.parametrize("name", REAL_ONLY)
def test_real_only_methods_refuse_complex(name, rng):
    prim = sg.REGISTRY[name]
    case = prim.cases[0]
    args = _complex_args(prim, case, rng)
    if not any(np.iscomplexobj(a) for a in args):
        args = [a + 0.5j for a in args]
    op = sg.Ops()
    with pytest.raises(sg.DTypeError, match=f"{name} takes real values only"):
        getattr(op, name)(*[op.var(a) for a in args], **case.attrs)
