"""Custom gradients (``custom_vjp``) and the machinery it shares with ``checkpoint``.

Both turn a Python function into a ``Primitive`` made at run time and kept out
of ``REGISTRY``. Calling the function records ONE entry, printed as the call a
reader would write (``v7 = softplus(v3)``, ``v9 = checkpoint(block)(v3, W)``);
keyword arguments become the entry's attributes (constants, never
differentiated). The entry's rules use the vocabulary of ``primitives/core.py``:
given ``o`` = the recording Ops they run the user's code on the recorded
Variables, so whatever they compute is on the tape and can be differentiated
again; given ``o`` = VALUES they run the same code on Variables of a scratch Ops
and hand back arrays.

API choice: ``f = custom_vjp(forward)`` then ``f.defvjp(bwd)`` with ``bwd(g, out, *inputs,
**attrs)`` returning one cotangent per input (``None`` for "no gradient"): every built-in vjp
rule's signature minus ``o``. The tape keeps the inputs and the output, so there is no ``ctx``,
and one rule serves recorded and value-only sweeps. JAX's ``f.defvjp(fwd, bwd)`` works too
(``FromResiduals``: fwd runs again in the backward, recording its residuals). A ``bwd``
written with simplegrad operations works at every order; one that returns numpy arrays, or a
nonzero cotangent that does not depend on the Variable ``g`` (made from ``g.value``), works at
first order, and differentiating its result again raises
``NotDifferentiableError``. Forward mode uses ``f.defjvp(rule)`` when given (JAX's
custom_jvp signature, custom_rules.py); else it is derived from the vjp, ``J t`` being the
gradient with respect to a fresh ``u`` (of ones) of ``<bwd(u), t>``, which is right only
when ``bwd`` is linear in ``u``: that is tested once per function (``linear_in_cotangent``)
and a rule that is not (gradient clipping) makes forward mode raise, naming the function.

Which Ops records the call: ``recording_ops`` of the arguments (Parameters join it); with
Parameters only, or no Variable, the transform running around the call, else the implicit
Ops of Parameters. The forward and the rules run with their Ops around them (``running``),
so transforms inside them may close over the function's arguments. A Variable that requires
grad read through a closure of the forward (a Parameter, a Variable of the caller's Ops) is
refused, the rule giving it no gradient; one that takes none is a constant. A forward that
fails leaves the caller's tape as it was.

Pytree arguments and outputs (custom_trees.py): the entry's inputs are the leaves of the
arguments, a pytree output is raveled into its one output and sliced back, and the rule sees
the call's structures (``g`` and ``out`` as the output, one cotangent per argument, ``None``
for a whole argument or a leaf). ``nondiff_argnums`` (as JAX's) are kept off the inputs and
reach the rule first: ``bwd(*nondiff, g, out, *other_inputs)``.

``checkpoint`` (checkpoint.py) and ``custom_jvp`` (custom_jvp.py) are the other dynamic
primitives built on ``CustomFunction``.
"""

from __future__ import annotations

import copyreg
import functools
import sys
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.recorder import Recorder
from ..engine.tape import ancestors
from ..engine.variable import Variable
from ..errors import ArgumentError, GraphError, NotDifferentiableError, ShapeError
from ..primitives import PrimitiveMethods
from ..primitives.core import Primitive, shape_of, value_of
from ..pytree import tree_map
from .arguments import around, recording_ops, running
from .custom_rules import (
    ForwardOps,
    FromResiduals,
    JVPRule,
    Pending,
    linear_in_cotangent,
    raw_backward,
)
from .custom_trees import Packing, nondiff_positions, pack, user_tangent

# ---------------------------------------------------------------- shared machinery


class CustomFunction:
    """A function recorded as one entry of a dynamic primitive (CustomVJP, Checkpoint)."""

    def __init__(self, fn: Callable, label: str):
        if not callable(fn):
            raise ArgumentError(f"{label}: expected a function, got {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._label = label
        # cotangents of one entry, computed once and handed out input by input (see _vjp)
        self._memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._nondiff: tuple[int, ...] = ()     # argument positions never differentiated
        self.primitive = Primitive(label, self._forward, [self._vjp], self._jvp, self._fmt, [],
                                   variadic=True)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled by name where its module holds it, else by value without its memo."""
        found = functools.reduce(lambda o, part: getattr(o, part, None),
                                 self.__qualname__.split("."), sys.modules.get(self.__module__))
        if found is self and self.__module__ != "__main__":
            return self.__qualname__
        return copyreg.__newobj__, (type(self),), {**self.__dict__, "_memo": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _memo=weakref.WeakKeyDictionary())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Record one entry on the Ops of the Variable arguments (arrays in, arrays out)."""
        self._check_keywords(kwargs)
        leaves, packing = pack(self._label, args, self._nondiff)
        ops = self._ops(leaves)
        if ops is None:     # no Variable: compute the value on a throwaway Ops
            scratch = Recorder()
            # numbers beside an array stay constants; numbers alone are the 0-d arrays
            alone = all(_is_number(x) for x in leaves)
            with scratch.no_grad():
                leaves = [x if _is_number(x) and not alone else scratch.var(x) for x in leaves]
                if not leaves:      # nothing to record on: the forward itself
                    return packing.structured(self._forward(_vars=(), _pack=packing, **kwargs))
                out = self._record(scratch, leaves, kwargs, packing)
                return tree_map(lambda v: v.value if isinstance(v, Variable) else v, out)
        return self._record(ops, leaves, kwargs, packing)

    def _check_keywords(self, kwargs: dict) -> None:
        for k in kwargs:
            if k.startswith("_"):
                raise ArgumentError(f"{self._label}: keyword {k!r}: names starting with '_' "
                                    "are reserved")

    def _ops(self, args: tuple) -> Ops | None:
        """The Ops that records the call (``recording_ops``): a call on Parameters only, or on
        no Variable, records on the transform running around it, else on the implicit Ops."""
        ops = recording_ops(self._label, args)
        if ops is None or ops is FREE:
            return around() or (FREE.implicit() if ops is FREE else None)
        return ops

    def _record(self, ops: Ops, args: list, kwargs: dict, packing: Packing) -> Any:
        attrs = dict(kwargs)
        attrs["_vars"] = tuple(i for i, x in enumerate(args) if isinstance(x, Variable))
        attrs["_wrt"] = tuple(i for i, x in enumerate(args)
                              if isinstance(x, Variable) and x.requires_grad)
        attrs["_pack"] = packing
        with _undone_on_failure(ops):   # the forward may have recorded on a closure Variable
            y = ops.apply(self.primitive, args, attrs, None)
        if packing.out is None:     # an equal entry recorded before (Ops(simplify=True)) holds it
            packing = (getattr(y, "attrs", None) or {}).get("_pack", packing)
        return packing.structured(y)

    def __repr__(self) -> str:
        return f"<{self._label}>"

    # ------------------------------------------------------------ the primitive's rules

    def _forward(self, *values: Any, **attrs: Any) -> Any:
        # a scratch Ops that records (released after), around the function, so that the
        # transforms it calls can close over its arguments
        scratch = ForwardOps()
        try:
            packing = attrs["_pack"]
            with running(scratch):
                y = self._fn(*packing.call_arguments(wrap_values(scratch, values, attrs["_vars"])),
                             **user_attrs(attrs))
            return packing.output_value(y)
        except GraphError as e:
            raise GraphError(f"{self._label}: {e}. The function sees its arguments as "
                             "Variables of a scratch Ops: pass every Variable it reads as "
                             "an argument") from e
        finally:
            scratch.release()

    def _vjp(self, o: PrimitiveMethods, g: Any, out: Any, i: int, *inputs: Any,
             **attrs: Any) -> Any:
        # The sweep asks input by input; every cotangent of the entry is computed at the first
        # request and kept until the last one. Nothing may outlive the sweep (a sweep may stop
        # after some inputs: it raised, or an input stopped requiring grad), so the memo is
        # keyed weakly by ``o``: a value-only sweep's own ValueOps, which dies with the sweep,
        # holds the arrays; a recorded sweep's Ops gets only weak references to the cotangents,
        # which are entries of its tape (the tape holds them, not the memo).
        memo = self._memo.get(o)
        if memo is None:
            memo = self._memo[o] = {}
        recording = isinstance(o, Ops)
        key = (id(g), id(out), *map(id, inputs))
        entry = memo.get(key)
        cts = None if entry is None else entry.cotangents()
        if cts is None:         # first request (or a recorded cotangent no longer held)
            for k in [k for k, e in memo.items() if e.cotangents() is None]:
                del memo[k]     # left by a recorded sweep that stopped early: only weak refs
            cts = self._cotangents(o, g, out, inputs, attrs)
            entry = memo[key] = Pending(cts, attrs["_wrt"], (g, out, inputs), recording)
        entry.waiting.discard(i)
        if not entry.waiting:
            del memo[key]
            if not memo:
                del self._memo[o]
        return cts[i]

    def _fmt(self, args: list[str], attrs: dict, render: Callable) -> str:
        shown = args + [f"{k}={render(v, k)}" for k, v in attrs.items() if not k.startswith("_")]
        return f"{self._label}({', '.join(shown)})"

    def _as_array(self, y: Any) -> np.ndarray:
        if isinstance(y, (tuple, list)):
            raise ArgumentError(f"{self._label}: the function must return one array or Variable, "
                                f"got a {type(y).__name__}")
        v = value_of(y)
        return v if hasattr(v, "shape") else np.asarray(v)

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        raise NotImplementedError

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        raise NotImplementedError


@contextmanager
def _undone_on_failure(ops: Ops) -> Iterator[None]:
    """If the block raises, leave the tape, the trace and the v-counter as they were."""
    snap = ops.tape.snapshot()
    try:
        yield
    except BaseException:
        ops.tape.restore(snap)
        raise


def _depends_on(c: Variable, g: Variable) -> bool:
    """True when g is among c's recorded ancestors (walking only entries newer than g)."""
    return g in ancestors(c, g.position, leaves=True)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def user_attrs(attrs: dict) -> dict:
    """The attributes the user passed (keyword arguments), without the bookkeeping ones."""
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


def wrap_values(scratch: Ops, values: tuple, positions: tuple) -> list:
    """Values as unrecorded Variables of ``scratch`` at ``positions`` (where Variables were)."""
    args = list(values)
    for i in positions:
        args[i] = scratch.unrecorded(values[i])
    return args


# ---------------------------------------------------------------- custom_vjp


class CustomVJP(CustomFunction):
    """A function whose gradient is a user rule: ``bwd(*nondiff, g, out, *inputs, **attrs)``."""

    def __init__(self, fn: Callable, nondiff_argnums: tuple[int, ...] = ()):
        super().__init__(fn, getattr(fn, "__name__", "custom"))
        self._nondiff = nondiff_positions(self._label, nondiff_argnums)
        self._bwd: Callable | None = None
        self._jvp_rule: Callable | None = None
        self._linear: bool | None = None      # is the vjp rule linear in g (custom_rules.py)
        self._raw = raw_backward(self._label)

    def defvjp(self, bwd: Callable, jax_bwd: Callable | None = None) -> Callable:
        """Attach the backward rule ``bwd(*nondiff, g, out, *inputs)`` (usable as a
        decorator), or JAX's pair ``defvjp(fwd, bwd)``; returns the rule given last."""
        for rule in (bwd, jax_bwd):
            if rule is not None and not callable(rule):
                raise ArgumentError(f"{self._label}.defvjp: expected a function, got "
                                    f"{type(rule).__name__}")
        self._bwd = bwd if jax_bwd is None else FromResiduals(bwd, jax_bwd)
        self._linear = None
        return bwd if jax_bwd is None else jax_bwd

    def defjvp(self, rule: Callable) -> Callable:
        """Attach a forward-mode rule ``rule(primals, tangents) -> (primal_out, tangent_out)``
        (usable as a decorator); returns ``rule``."""
        JVPRule(self._label, rule)     # (checks it)
        self._jvp_rule = rule
        return rule

    def _cotangents(self, o: PrimitiveMethods, g: Any, out: Any, inputs: tuple,
                    attrs: dict) -> list:
        if isinstance(o, Ops):
            return self._call_bwd(o, g, out, inputs, attrs)
        return self._bwd_values(g, out, inputs, attrs)

    def _bwd_values(self, g: Any, out: Any, inputs: tuple, attrs: dict) -> list:
        """The rule's cotangents as arrays (None for none), run on a scratch Ops."""
        scratch = Recorder(borrow=True)
        try:
            cts = self._checked(self._run_bwd(scratch.unrecorded(g), scratch.unrecorded(out),
                                              wrap_values(scratch, inputs, attrs["_vars"]),
                                              attrs), inputs)
            return [None if c is None else np.asarray(value_of(c)) for c in cts]
        finally:
            scratch.release()

    def _run_bwd(self, g: Variable, out: Any, inputs: Any, attrs: dict) -> list:
        """The user's cotangents, one per flat input (the rule sees the call's structures)."""
        if self._bwd is None:
            raise NotDifferentiableError(f"{self._label}: no backward rule; attach one with "
                                         f"@{self._label}.defvjp")
        packing: Packing = attrs["_pack"]
        args = (*packing.held(), packing.structured(g), packing.structured(out),
                *packing.arguments(list(inputs)))
        if isinstance(self._bwd, FromResiduals):      # JAX's fwd sees every argument
            args = (packing, packing.structured(g), packing.call_arguments(list(inputs)))
        ops = getattr(g, "rec", None)
        if not isinstance(ops, Ops):
            return packing.cotangents(self._bwd(*args, **user_attrs(attrs)))
        with running(ops):      # transforms in the rule record on its Ops
            return packing.cotangents(self._bwd(*args, **user_attrs(attrs)))

    def _call_bwd(self, r: Ops, g: Variable, out: Variable, inputs: Any, attrs: dict) -> list:
        """The user's cotangents, recorded on ``r``; raw arrays go through the _bwd entry, and so
        does a nonzero recorded cotangent that does not depend on g (made from ``g.value``):
        right as a value but not as a function of g, so differentiating it again must raise."""
        if not isinstance(g, Variable):     # the constant seed of an Ops that simplifies
            g = r.leaf(np.asarray(g), None, False, "seed")     # (the rule gets a Variable)
        cts = self._checked(self._run_bwd(g, out, inputs, attrs), inputs)
        for i, c in enumerate(cts):
            if c is None:
                continue
            recorded = isinstance(c, Variable) and c.rec is r
            frozen = recorded and g.requires_grad and not _depends_on(c, g) and (
                np.any(c.raw != 0) or not np.any(g.raw != 0))
            if not recorded or frozen:
                cts[i] = r.apply(self._raw, (g, out, *inputs),
                                 {"ct": np.asarray(value_of(c)), "position": i,
                                  "frozen": frozen}, None)
        return cts

    def _checked(self, cts: Any, inputs: Any) -> list:
        n = len(inputs)
        if n == 1 and not isinstance(cts, (tuple, list)):
            cts = (cts,)
        if not isinstance(cts, (tuple, list)) or len(cts) != n:
            got = len(cts) if isinstance(cts, (tuple, list)) else type(cts).__name__
            raise ArgumentError(f"{self._label}: the backward rule must return {n} cotangent(s) "
                                f"(one per input, None for none), got {got}")
        for i, (c, x) in enumerate(zip(cts, inputs)):
            if c is not None and shape_of(c) != shape_of(x):
                raise ShapeError(f"{self._label}: the backward rule gave a cotangent of shape "
                                 f"{shape_of(c)} for input {i} of shape {shape_of(x)}")
        return list(cts)

    def _jvp(self, o: PrimitiveMethods, ts: list, out: Any, *inputs: Any, **attrs: Any) -> Any:
        # J t = d/du <bwd(u), t>, with u a fresh cotangent of ones (bwd is linear in u, so its
        # value does not matter, but a nonzero one shows a cotangent that ignores u)
        if all(t is None for t in ts):
            return None
        if self._jvp_rule is not None:
            return user_tangent(self._label, self._jvp_rule, o, ts, out, inputs, attrs)
        self._check_linear(out, inputs, attrs)
        if isinstance(o, Ops):
            return self._tangent(o, ts, out, inputs, attrs, True)
        r = Recorder()
        try:
            jt = self._tangent(r, ts, r.unrecorded(out), wrap_values(r, inputs, attrs["_vars"]),
                               attrs, False)
            return None if jt is None else jt.raw
        finally:
            r.release()

    def _tangent(self, r: Ops, ts: list, out: Variable, inputs: Any, attrs: dict,
                 create_graph: bool) -> Variable | None:
        u = r.leaf(np.ones(out.shape, dtype=out.dtype), None, True, "seed")
        pairing = None
        for c, t in zip(self._call_bwd(r, u, out, inputs, attrs), ts):
            if c is not None and t is not None:
                term = r.sum(r.mul(c, t))
                pairing = term if pairing is None else r.add(pairing, term)
        if pairing is None:
            return None
        jt = r.grad(pairing, u, create_graph=create_graph)
        u.grad = None
        return jt

    def _check_linear(self, out: Any, inputs: tuple, attrs: dict) -> None:
        """Raise unless the vjp rule is linear in g (tested once per function: custom_rules.py)."""
        if self._linear is None:
            values = tuple(value_of(x) for x in inputs)
            self._linear = linear_in_cotangent(
                lambda u: self._bwd_values(u, value_of(out), values, attrs), out)
        if not self._linear:
            raise NotDifferentiableError(
                f"{self._label}: its backward rule is not linear in the cotangent g, so forward "
                "mode (jvp, hessian, hvp, jacobian(mode='fwd')) cannot be derived from it; give "
                f"a forward rule with @{self._label}.defjvp, or use reverse mode")


def custom_vjp(fn: Callable | None = None, nondiff_argnums: tuple[int, ...] = ()) -> Any:
    """``fn`` as one recorded operation whose gradient is the rule given to ``.defvjp``
    (arguments at ``nondiff_argnums`` are never differentiated and reach the rule first);
    without ``fn``, the decorator with those options."""
    if fn is None:
        return lambda f: CustomVJP(f, nondiff_argnums)
    return CustomVJP(fn, nondiff_argnums)
