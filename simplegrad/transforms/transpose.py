"""``sg.linear_transpose``: the adjoint of a linear function, as a recorded program
(``jax.linear_transpose``).

JAX derives reverse mode from forward mode: ``linearize`` records the jvp at the primals as a
linear program of the tangents, and transposing that program gives the vjp. Here ``f_lin`` runs
once on fresh leaves standing for its inputs; they hold the primals (zeros of their shapes and
dtypes for Variables and shape-and-dtype objects), though only shapes and dtypes matter, as in
JAX. Every entry between those leaves and the output must be linear in the operands computed
from them (linearity.py checks it structurally and names the entry at fault). The transpose is
then the reverse sweep of those entries: a linear entry's vjp rule in its moving input is its
transpose (``t * c`` pulls ``u`` back to ``u * c``, ``t @ W`` to ``u @ W.T``, ``t.sum()`` to
``u.expand(...)``), so the sweep records the adjoint as a program of the output cotangent.

At top level the adjoint is extracted as a ``Program`` (``.program``; the constants ``f_lin``
closes over are its constants) and the Ops is released: calling the transpose evaluates that
program on arrays, or records it on the Ops of Variable cotangents (inside ``grad`` or
``vmap``). Nested (Variable primals, or another transform around the call), ``f_lin`` is
recorded on the caller's Ops and each call is a sweep recorded there, so what ``f_lin`` closes
over stays differentiable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine.ops import Ops
from ..engine.params import FREE
from ..engine.variable import Variable
from ..errors import ArgumentError, DTypeError, ShapeError
from ..program.core import Program, extract
from ..pytree import TreeDef, tree_flatten, tree_unflatten
from .arguments import (
    check_callable,
    context,
    flat,
    leaf_shape,
    leaves_like,
    outputs,
    own,
    recording_ops,
    regroup,
    results,
    run_paused,
)
from .arguments import primals as leaves_of
from .custom import _undone_on_failure
from .linearity import check_linear
from .reverse import _pulled
from .tracing import _param_names

NAME = "linear_transpose"


def linear_transpose(f_lin: Callable, *primals: Any, reduce_axes: tuple = ()) -> LinearTranspose:
    """The transpose of the linear function ``f_lin``: a function of a cotangent of its output
    that returns the tuple of cotangents of its inputs, one per primal (of which only the
    shapes, dtypes and structure are read)."""
    check_callable(NAME, f_lin)
    if not primals:
        raise ArgumentError(f"{NAME}: give at least one primal: linear_transpose(f_lin, "
                            "*primals) (arrays, or objects with .shape and .dtype)")
    if not isinstance(reduce_axes, (tuple, list)) or len(reduce_axes):
        raise ArgumentError(f"{NAME}: reduce_axes={reduce_axes!r} names mapped axes, which "
                            "simplegrad does not have; leave it ()")
    stand_ins = []      # what the leaves standing for f_lin's inputs hold (see _stand_in)
    for i, p in enumerate(primals):
        leaves, treedef = tree_flatten(p)
        stand_ins.append(tree_unflatten(treedef, [_stand_in(i, k, a)
                                                  for k, a in enumerate(leaves)]))
    # its program outlives the call; not simplified while recording, as linearize's: the
    # transpose of linearize(f) is then the vjp's pullback entry for entry (docs/transforms.md)
    ops, nested = context(NAME, primals, borrow=False, simplify=False)
    if nested is None:
        return run_paused(ops, lambda *a: linear_transpose(f_lin, *a), stand_ins)
    with own(ops, nested), _undone_on_failure(ops):
        call, trees = leaves_of(ops, stand_ins, range(len(stand_ins)))
        for name, (_, leaves) in zip(_param_names(f_lin, len(trees)) if not nested else (),
                                     trees):    # (on our own tape: messages read as f_lin)
            if name is not None and len(leaves) == 1 and type(leaves[0]) is Variable:
                leaves[0].name = name
        xs = flat(trees)
        ys, out_def = outputs(NAME, ops, f_lin(*call))
        check_linear(NAME, xs, ys)
        transpose = LinearTranspose(ops, nested, xs, trees, ys, out_def)
        if not nested:
            transpose.program        # noqa: B018 (extracted now: the Ops is released next)
            transpose.ops = transpose._xs = transpose._ys = None
    return transpose


class LinearTranspose:
    """The transpose of a linear function: call it on a cotangent of the function's output;
    ``.program`` is the adjoint as a recorded ``Program`` of that cotangent."""

    def __init__(self, ops: Ops, nested: bool, xs: list[Variable], trees: list,
                 ys: list[Variable], out_def: TreeDef) -> None:
        self.ops, self._nested, self._xs, self._trees = ops, nested, xs, trees
        self._ys, self._out_def = ys, out_def
        self._dtypes = [x.dtype for x in xs]
        self._specs = [(tuple(y.shape), y.dtype) for y in ys]
        self._program: Program | None = None

    def __repr__(self) -> str:
        shapes = ", ".join(str(s) for s, _ in self._specs)
        return (f"<linear_transpose: cotangent {shapes} -> {len(self._trees)} input "
                f"cotangent(s)>")

    @property
    def program(self) -> Program:
        """The adjoint as a Program of the output cotangent (inputs ``u``, or ``u0``, ``u1``,
        ... for several output leaves), one output per input leaf."""
        if self._program is None:
            ops, ys = self.ops, self._ys
            names = ["u"] if len(ys) == 1 else [f"u{k}" for k in range(len(ys))]
            us = [ops.var(np.zeros(s, d), name=n) for (s, d), n in zip(self._specs, names)]
            self._program = extract(us, self._pulled(us))
        return self._program

    def __call__(self, u: Any) -> tuple:
        """The cotangents of ``f_lin``'s inputs (a tuple, one per primal, each of its
        primal's structure) for ``u``, a cotangent of its output (of the output's structure)."""
        us = leaves_like(NAME, "the cotangent", "f_lin's output", self._out_def, u)
        for k, (uk, (shape, out_dtype)) in enumerate(zip(us, self._specs)):
            if tuple(leaf_shape(uk)) != shape:
                raise ShapeError(f"{NAME}: cotangent leaf {k} has shape {leaf_shape(uk)} but "
                                 f"f_lin's output leaf {k} has shape {shape}")
            dtype = uk.dtype if isinstance(uk, Variable) else np.asarray(uk).dtype
            complex_out = np.dtype(out_dtype).kind == "c"
            if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer) or
                    complex_out and np.issubdtype(dtype, np.complexfloating)):
                raise DTypeError(f"{NAME}: cotangent leaf {k} has dtype {dtype}; give "
                                 f"{'real or complex' if complex_out else 'real'} numbers")
        where = recording_ops(NAME, us)
        if self._nested and where in (None, self.ops, FREE):
            return regroup(self._trees, self._pulled(us))
        if where is None:
            got = self.program(*[np.asarray(uk, dtype=d) for uk, (_, d) in
                                 zip(us, self._specs)])
            return regroup(self._trees, results(False, got))
        return regroup(self._trees, self.program.record(where, *us))

    def _pulled(self, us: list) -> list:
        """The input cotangents for ``us``, recorded on the Ops f_lin ran on, each of its
        primal's dtype (as JAX's)."""
        ops = self.ops
        _, gs = _pulled(ops, self._ys, us, self._xs, True)
        return [g if g.dtype == d else ops.cast(g, d) for g, d in zip(gs, self._dtypes)]


def _stand_in(i: int, k: int, a: Any) -> np.ndarray:
    """The value of the leaf standing for leaf ``k`` of primal ``i``: an array or number as it
    is (so a nonlinear f_lin fails where its author expects, not at zeros); zeros of the shape
    and dtype of a Variable (one example's under vmap: a tangent, not the primal, which may be
    batched) or of any object with ``.shape`` and ``.dtype``. Only floating and complex dtypes
    can be transposed (a complex one in JAX's convention: the transpose, no conjugate)."""
    if isinstance(a, Variable):
        value = np.zeros(leaf_shape(a), a.dtype)
    elif isinstance(a, (np.ndarray, np.generic, int, float, complex)):
        value = np.asarray(a)
    elif hasattr(a, "shape") and hasattr(a, "dtype"):
        value = np.zeros(tuple(a.shape), np.dtype(a.dtype))
    else:
        raise ArgumentError(f"{NAME}: leaf {k} of primal {i} is a {type(a).__name__}; give "
                            "arrays, numbers or objects with .shape and .dtype")
    if not np.issubdtype(value.dtype, np.inexact):
        raise DTypeError(f"{NAME}: leaf {k} of primal {i} has dtype {value.dtype}; only "
                         "floating and complex dtypes can be transposed (the cotangents take "
                         "the primals' dtypes)")
    return value
