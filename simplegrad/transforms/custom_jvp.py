"""``sg.custom_jvp``: a function recorded as one entry whose derivative is the user's tangent
rule (``jax.custom_jvp``).

``f = sg.custom_jvp(fn)`` then ``f.defjvp(rule)`` with ``rule(primals, tangents) ->
(primal_out, tangent_out)`` (with ``nondiff_argnums``: ``rule(*nondiff, primals, tangents)``),
primals and tangents being tuples of the differentiated arguments in the call's structures.
Forward mode (``jvp``, ``jacfwd``, ``hessian``'s forward pass, ``derivative``) runs the rule.
Reverse mode transposes it: the rule is linear in its tangents, so the cotangent of input i
for the output cotangent ``g`` is the gradient in fresh tangents ``t`` (zeros) of
``<rule(primals, t)[1], g>``, recorded (one reverse sweep of the tangent program the rule
records) so that it is a function of ``g`` and the primals and differentiates again, at every
order. A rule that is not linear in its tangents gives a wrong gradient, as in JAX.

Pytree arguments and outputs, the recording Ops, closures and vmap (one entry per example)
are as for ``custom_vjp`` (custom.py, custom_trees.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.recorder import Recorder
from ..errors import ArgumentError, NotDifferentiableError
from ..primitives import PrimitiveMethods
from ..primitives.core import shape_of, value_of
from .custom import CustomFunction, wrap_values
from .custom_trees import nondiff_positions, user_tangent


class CustomJVP(CustomFunction):
    """A function whose derivative is a user tangent rule (``.defjvp``)."""

    def __init__(self, fn: Callable, nondiff_argnums: tuple[int, ...] = ()):
        super().__init__(fn, getattr(fn, "__name__", "custom"))
        self._nondiff = nondiff_positions(self._label, nondiff_argnums)
        self._rule: Callable | None = None

    def defjvp(self, rule: Callable) -> Callable:
        """Attach the tangent rule ``rule(primals, tangents) -> (primal_out, tangent_out)``
        (usable as a decorator); returns ``rule``."""
        if not callable(rule):
            raise ArgumentError(f"{self._label}.defjvp: expected a function, got "
                                f"{type(rule).__name__}")
        self._rule = rule
        return rule

    def _checked_rule(self) -> Callable:
        if self._rule is None:
            raise NotDifferentiableError(f"{self._label}: no tangent rule; attach one with "
                                         f"@{self._label}.defjvp")
        return self._rule

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        if all(t is None for t in ts):
            return None
        return user_tangent(self._label, self._checked_rule(), o, ts, out, inputs, attrs)

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        rule = self._checked_rule()
        recording = isinstance(o, Ops)
        r = o if recording else Recorder(borrow=True)
        try:
            if recording:
                xs, gv, ov = list(inputs), g, out
            else:
                xs = wrap_values(r, inputs, attrs["_vars"])
                gv, ov = r.unrecorded(g), r.unrecorded(out)
            wrt = attrs["_wrt"]
            ts = [r.var(np.zeros(shape_of(x), _float(x))) if i in wrt else None
                  for i, x in enumerate(inputs)]
            t_out = user_tangent(self._label, rule, r, ts, ov, tuple(xs), attrs)
            cts: list = [None] * len(inputs)
            moving = [t for t in ts if t is not None]
            if not moving:
                return cts
            pairing = r.sum(r.mul(t_out, gv))
            gs = r.grad(pairing, moving, create_graph=recording)
            for i, t, c in zip(wrt, moving, gs):
                t.grad = None
                cts[i] = c if recording else np.asarray(value_of(c))
            return cts
        finally:
            if not recording:
                r.release()


def _float(x: Any) -> np.dtype:
    dtype = np.asarray(value_of(x)).dtype
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def custom_jvp(fn: Callable | None = None, nondiff_argnums: tuple[int, ...] = ()) -> Any:
    """``fn`` as one recorded operation whose derivative is the tangent rule given to
    ``.defjvp`` (forward mode directly, reverse mode by its transpose); without ``fn``, the
    decorator with those options."""
    if fn is None:
        return lambda f: CustomJVP(f, nondiff_argnums)
    return CustomJVP(fn, nondiff_argnums)
