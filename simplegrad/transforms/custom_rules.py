"""The rules of custom functions besides the user's forward: a user's jvp rule, the test that
decides whether forward mode may be derived from a vjp rule, and the entry standing for a
backward rule's numpy arrays; and the scratch Ops a forward records on.

``JVPRule(label, rule)`` holds ``rule(primals, tangents) -> (primal_out, tangent_out)``,
JAX's ``custom_jvp`` signature (``custom_vjp``'s ``.defjvp`` uses it; a ``custom_jvp`` can
too). Given ``o`` = the recording Ops, the rule runs on the entry's recorded Variables, so its
tangent is recorded and can be differentiated again; given ``o`` = VALUES it runs on
Variables of a scratch Ops and hands back an array. A tangent that is ``None`` (an input that
does not move) reaches the rule as zeros. A rule that returns numpy arrays works at first
order; differentiating its tangent again raises ``NotDifferentiableError``.

``linear_in_cotangent`` is the test: forward mode through a custom_vjp is the transpose of its
vjp rule, which is right only when the rule is linear in its cotangent ``g`` (gradient
clipping, ``g -> clip(g, -c, c)``, is not). It runs the rule on values at the entry's
primal point, at two fixed-seed random cotangents ``u1``, ``u2`` of the output's shape, and
checks additivity with homogeneity (``bwd(a u1 + b u2) = a bwd(u1) + b bwd(u2)``, a = 1.75,
b = -0.625) and homogeneity at scales 1e6 and 1e-6 (``bwd(s u1) = s bwd(u1)``; float16: 16
and 1/16), each to 1e-4 (float32: 3.5e-3, float16: 0.3) relative to the largest term
compared: a rule that is not linear misses by order one (a small shift ``g + c`` at the
1e-6 scale), and a linear one computed in lower precision (float32 inside a float64 rule)
still passes. Six rule calls, once per function (the caller caches the answer); a rule whose
values are not finite there is given the benefit of the doubt.

``FromResiduals(fwd, bwd)`` is JAX's ``defvjp(fwd, bwd)`` pair as one backward rule.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.recorder import Recorder
from ..engine.variable import Variable
from ..errors import ArgumentError, GraphError, NotDifferentiableError, ShapeError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive, shape_of, value_of

if TYPE_CHECKING:
    from .custom_trees import Packing
from .arguments import running

# ---------------------------------------------------------------- the forward's scratch Ops


class ForwardOps(Recorder):
    """The scratch Ops a custom function's forward records on: a Variable that requires grad
    read through a closure is refused (the rule gives gradients for the arguments only); one
    that does not is a constant."""

    def __init__(self) -> None:
        super().__init__(borrow=True)

    def join(self, prim: Primitive, inputs: tuple, x: Variable) -> Variable:
        """A closure's Variable that takes no gradient as a constant; refuse any other."""
        if x.requires_grad:
            kind = "a Parameter" if x.rec is FREE else "a Variable of another Ops"
            raise GraphError(f"{prim.name}: reads {x.name} ({kind}) through a closure, and the "
                             "rule gives it no gradient")
        return self.leaf(x.raw, None, False)

# ---------------------------------------------------------------- a sweep's cotangents


class Pending:
    """The cotangents of one entry while the sweep asks for them input by input.

    Weak (a recorded sweep): the cotangents are entries of the tape, which keeps them alive,
    and the key's ids are checked through weak references to g and the entry (its inputs are
    the entry's own). Strong (a value-only sweep): the arrays are held, for as long as the
    sweep's ValueOps lives.
    """

    __slots__ = ("held", "waiting", "key_objects", "weak")

    def __init__(self, cts: list, wrt: tuple, key_objects: tuple, weak: bool):
        self.weak = weak
        self.held = [weakref.ref(c) if weak and c is not None else c for c in cts]
        self.key_objects = tuple(map(weak_ref, key_objects[:2])) if weak else key_objects
        self.waiting = set(wrt)

    def cotangents(self) -> list | None:
        """The cotangents, or None when one of them or of the key's objects is gone."""
        if not self.weak:
            return self.held
        if any(r() is None for r in self.key_objects):
            return None
        cts = [None if r is None else r() for r in self.held]
        if any(c is None and r is not None for c, r in zip(cts, self.held)):
            return None
        return cts


def weak_ref(x: Any) -> Callable[[], Any]:
    """A weak reference to x; a number (which cannot have one, and is small) is held."""
    try:
        return weakref.ref(x)
    except TypeError:
        return lambda: x

# ---------------------------------------------------------------- a user's jvp rule


class JVPRule:
    """A forward-mode rule ``rule(primals, tangents) -> (primal_out, tangent_out)``."""

    def __init__(self, label: str, rule: Callable):
        if not callable(rule):
            raise ArgumentError(f"{label}.defjvp: expected a function, got "
                                f"{type(rule).__name__}")
        self.label = label
        self.rule = rule

    def tangent(self, o: PrimitiveMethods, ts: list, out: Any, inputs: tuple,
                positions: tuple, kw: dict) -> Any:
        """The tangent of the entry's output for the input tangents ``ts``."""
        recording = isinstance(o, Ops)
        r = o if recording else Recorder(borrow=True)
        try:
            primals = list(inputs)
            if not recording:       # values: Variables of the scratch Ops where they were
                for i in positions:
                    primals[i] = r.unrecorded(inputs[i])
            tangents = [np.zeros(shape_of(x), dtype=_dtype(x)) if t is None
                        else t if recording else r.unrecorded(t)
                        for x, t in zip(inputs, ts)]
            with running(r):
                got = self.rule(tuple(primals), tuple(tangents), **kw)
            t_out = self._checked(got, out)
            if not recording:
                return np.asarray(value_of(t_out))
            if isinstance(t_out, Variable) and t_out.rec is r:
                return t_out
            moving = tuple(t for t in (*ts, *inputs) if isinstance(t, Variable))
            return r.apply(_RAW_TANGENT, moving, {"value": np.asarray(value_of(t_out)),
                                                  "label": self.label}, None)
        finally:
            if not recording:
                r.release()

    def _checked(self, got: Any, out: Any) -> Any:
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise ArgumentError(f"{self.label}: the jvp rule must return a pair (primal_out, "
                                f"tangent_out), got {type(got).__name__}")
        t_out = got[1]
        if shape_of(t_out) != shape_of(out):
            raise ShapeError(f"{self.label}: the jvp rule gave a tangent of shape "
                             f"{shape_of(t_out)} for an output of shape {shape_of(out)}")
        return t_out


def _dtype(x: Any) -> np.dtype:
    dtype = np.asarray(value_of(x)).dtype
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _refuse(*args: Any, label: str, **attrs: Any) -> Any:
    raise NotDifferentiableError(
        f"{label}: its jvp rule returned numpy arrays instead of Variables, so its tangent "
        "cannot be differentiated again; write the rule with simplegrad operations on the "
        "primals and tangents")


_RAW_TANGENT = Primitive(
    "custom_jvp_raw", lambda *values, value, label: value, [_refuse], _refuse,
    lambda args, attrs, render: f"{attrs['label']}_jvp({', '.join(args)})", [], variadic=True)

# ---------------------------------------------------------------- is a vjp rule linear in g


def linear_in_cotangent(cotangents: Callable[[np.ndarray], list], out: Any) -> bool:
    """Whether ``cotangents(u)`` (one array or None per input) is linear in ``u`` (see the
    module docstring for the test and its tolerance)."""
    out = np.asarray(value_of(out))
    dtype = out.dtype if out.dtype.kind == "f" else np.dtype(np.float64)
    rng = np.random.default_rng(0)
    u1, u2 = (rng.standard_normal(out.shape).astype(dtype) for _ in range(2))
    c1, c2 = cotangents(u1), cotangents(u2)
    a, b = 1.75, -0.625
    big = min(1e6, float(np.finfo(dtype).max) ** 0.25)     # (float16: 16)
    cases = [(a * u1 + b * u2, [(a, c1), (b, c2)]), (big * u1, [(big, c1)]),
             (u1 / big, [(1 / big, c1)])]
    tol = max(1e-4, 10 * float(np.sqrt(np.finfo(dtype).eps)))
    for u, terms in cases:
        for k, got in enumerate(cotangents(u.astype(dtype))):
            parts = [s * np.asarray(c[k], dtype=np.float64) for s, c in terms
                     if c[k] is not None]
            want = sum(parts) if parts else 0.0
            scale = sum(float(np.max(np.abs(p), initial=0.0)) for p in parts)
            have = 0.0 if got is None else np.asarray(got, dtype=np.float64)
            diff = float(np.max(np.abs(have - want), initial=0.0))
            if diff > tol * scale:      # (nan compares False: the benefit of the doubt)
                return False
    return True

# ---------------------------------------------------------------- a backward made of raw arrays


def raw_backward(label: str) -> Primitive:
    """The primitive recording a cotangent that a vjp rule gave as an array (or computed from
    ``g.value``): right as a value, and differentiating it raises, naming the function."""

    def refuse(*args: Any, **attrs: Any) -> Any:
        if attrs.get("frozen"):
            raise NotDifferentiableError(
                f"{label}: its backward rule returned a cotangent for input "
                f"{attrs['position']} that does not depend on the cotangent g (computed from "
                "g.value, say), so its gradient cannot be differentiated again (grad of grad, "
                "or a jvp through it); write the backward with simplegrad operations on g itself")
        raise NotDifferentiableError(
            f"{label}: its backward rule returned numpy arrays instead of Variables, so its "
            "gradient cannot be differentiated again (grad of grad, or a jvp through it); "
            "write the backward with simplegrad operations on g, out and the inputs")

    def fmt(args: list[str], attrs: dict, render: Callable) -> str:
        return f"{label}_bwd({', '.join(args)})[{attrs['position']}]"
    return Primitive(f"{label}_bwd", _raw_forward, [refuse], refuse, fmt, [], variadic=True)


def _raw_forward(*values: Any, ct: np.ndarray, position: int, frozen: bool) -> np.ndarray:
    return ct


class FromResiduals:
    """JAX's pair as one rule: ``fwd(*args) -> (out, residuals)`` run again on the recorded
    arguments (so the residuals are recorded too and every order works), then
    ``bwd(*nondiff, residuals, g)`` giving one cotangent per differentiated argument."""

    def __init__(self, fwd: Callable, bwd: Callable):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, packing: Packing, g: Any, args: list, **attrs: Any) -> Any:
        """The cotangents of the call with arguments ``args`` for output cotangent g."""
        result = self.fwd(*args, **attrs)
        if not isinstance(result, tuple) or len(result) != 2:
            raise ArgumentError(f"{packing.label}: the fwd given to defvjp must return a pair "
                                f"(output, residuals), got {type(result).__name__}")
        return self.bwd(*packing.held(), result[1], g)
