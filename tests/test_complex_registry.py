"""The registry walk at complex samples: every record that takes complex values
(``TAKES_COMPLEX``), each of its cases with its inputs made complex, and the primitives made
for complex values (``COMPLEX_PRIMITIVES``: conj and the Fourier transforms, on their own
cases), checked at orders 1 and 2 (reverse and forward), in forward mode and for the jvp/vjp
pairing, against the checker's complex central differences (both real directions; JAX's
convention)."""

from __future__ import annotations

import numpy as np
import pytest
from test_primitives import KINDS, applying, case_id, samplers

import simplegrad as sg
from simplegrad.primitives.complex import COMPLEX_PRIMITIVES, REAL_ONLY, TAKES_COMPLEX


def _complex_args(prim: sg.Primitive, case: sg.Case, rng: np.random.Generator) -> list:
    """The case's samples, each float input given an imaginary part of half its own law
    (conditions stay real: they are read as x > 0; the primitives made for complex values
    sample their own cases as they are)."""
    out = []
    for i, (draw, shape) in enumerate(zip(samplers(prim, case), case.shapes)):
        a = np.asarray(draw(rng, shape))
        if a.dtype.kind == "f" and i not in case.conditions and prim.name not in COMPLEX_PRIMITIVES:
            a = a + 0.5j * np.asarray(draw(rng, shape))
        out.append(np.asarray(a, dtype=np.complex128 if a.dtype.kind == "c" else np.float64))
    return out


def _params() -> list:
    params = []
    prims = [sg.REGISTRY[name] for name in TAKES_COMPLEX] + list(COMPLEX_PRIMITIVES.values())
    for prim in prims:
        name = prim.name
        for case in prim.cases:
            for kind in [*KINDS, "jvp_vjp"]:
                params.append(pytest.param(prim, case, kind,
                                           id=f"{name}-{case_id(case)}-complex-{kind}"))
    return params


@pytest.mark.parametrize(("prim", "case", "kind"), _params())
def test_complex_derivatives(prim: sg.Primitive, case: sg.Case, kind: str,
                             rng: np.random.Generator) -> None:
    args = _complex_args(prim, case, rng)
    f = applying(prim, case)
    if kind == "jvp_vjp":
        sg.check_jvp_vjp_consistency(f, args, rng)
    else:
        tol = max(prim.tol, 1e-5)
        sg.check_grads(f, args, atol=tol, rtol=tol, rng=rng, **KINDS[kind])


def test_the_lists_name_records():
    assert set(TAKES_COMPLEX) <= set(sg.REGISTRY) and set(REAL_ONLY) <= set(sg.REGISTRY)
    assert not set(TAKES_COMPLEX) & set(REAL_ONLY)
    assert not set(COMPLEX_PRIMITIVES) & set(sg.REGISTRY)
    for name, prim in COMPLEX_PRIMITIVES.items():
        assert prim.name == name and prim.cases and callable(prim.jvp)
        assert callable(getattr(sg.Ops, name)), name


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
