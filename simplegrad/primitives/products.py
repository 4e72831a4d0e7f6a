"""Products: einsum and the products written with it; diagonal, tril and triu (cross: cross.py).

``einsum`` is the one contraction primitive. Its subscripts are stored explicit and without
ellipsis (``'...i,...i'`` on shapes (2, 3) and (3,) records ``'ai,i->a'``; subscripts.py parses
numpy's forms), so each rule reads the letters directly. The vjp of operand k is an einsum of
the cotangent with the other operands, ending at operand k's letters; a letter repeated in
operand k (``'ii->i'``) gets a fresh letter and a constant identity matrix joins the
contraction (the diagonal embedding), a letter found nowhere else gets a constant vector of
ones, and a letter that operand k broadcasts (size 1 against a larger size elsewhere) is summed
away and put back with reshape, and one that the others broadcast is expanded. The jvp is the
sum over operands of the same einsum with one operand replaced by its tangent.

Recorded as einsum (one entry each, or einsum and one reshape), since the einsum line reads
as the definition and costs what numpy's own call would: ``tensordot``, ``inner``, ``outer``,
``kron`` (einsum then reshape), and ``dot`` of arrays above 2-D (``dot`` of vectors and
matrices records ``matmul``, of a scalar ``mul``). Primitives of their own, because their
einsum would carry a constant tensor and hide what the line means: ``cross`` (cross.py),
``diagonal`` (vjp: ``scatter_add`` onto the diagonal), ``tril`` and ``triu`` (each its own
vjp). ``trace`` records ``diagonal`` then ``sum``; ``diag`` of a vector records the
``scatter_add`` that places it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import AxisError, ShapeError
from .core import (
    EACH_ALONE,
    JOINTLY,
    Case,
    Primitive,
    dtype_of,
    error,
    mapped,
    register,
    run,
    shape_of,
    shift_axis,
)
from .schema import AXIS, INT, SUBSCRIPTS, attrs, need
from .shape_rules import diagonal, einsum, triangle
from .subscripts import LETTERS, from_sublists, letter_sizes, parse_subscripts
from .taylor import linear, multilinear

if TYPE_CHECKING:
    from ..engine.variable import Variable
    from . import PrimitiveMethods

# ---------------------------------------------------------------- einsum


def _einsum(*xs, subscripts):
    return np.einsum(subscripts, *xs, optimize=len(xs) > 2)


def _einsum_vjp(o: PrimitiveMethods, g, out, k, *xs, subscripts):
    lhs, target = subscripts.split("->")
    ins = lhs.split(",")
    shapes = [shape_of(x) for x in xs]
    sizes = letter_sizes(ins, shapes)
    mine, shape = ins[k], shapes[k]
    others = [target] + [t for j, t in enumerate(ins) if j != k]
    ops = [g] + [x for j, x in enumerate(xs) if j != k]
    dtype = dtype_of(g) or np.float64
    fresh = iter(c for c in LETTERS if c not in subscripts)
    letters, seen, kept = [], set(), []
    for c, n in zip(mine, shape):
        if n == 1 and sizes[c] != 1:        # broadcast by operand k: summed, then reshaped
            continue
        if c in seen:                       # repeated in operand k: embed on the diagonal
            r = next(fresh)
            others.append(c + r)
            ops.append(np.eye(n, dtype=dtype))
            letters.append(r)
        else:
            seen.add(c)
            letters.append(c)
        kept.append(n)
    present = set("".join(others))
    for c in seen - present:                # summed only in operand k: spread with ones
        others.append(c)
        ops.append(np.ones(sizes[c], dtype=dtype))
    d = o.einsum(",".join(others) + "->" + "".join(letters), *ops)
    if shape_of(d) != tuple(kept):          # the others broadcast a letter of operand k
        d = o.expand(d, tuple(kept))
    return d if tuple(kept) == shape else o.reshape(d, shape)


def _einsum_jvp(o: PrimitiveMethods, ts, out, *xs, subscripts):
    acc = None
    for k, t in enumerate(ts):
        if t is not None:
            term = o.einsum(subscripts, *xs[:k], t, *xs[k + 1:])
            acc = term if acc is None else o.add(acc, term)
    return acc


def _einsum_fmt(args, attrs, render):
    return f"einsum({attrs['subscripts']!r}, {', '.join(args)})"


EINSUM = register(Primitive(
    "einsum", _einsum, [_einsum_vjp], _einsum_jvp, _einsum_fmt,
    [Case(((2, 3), (3, 4)), {"subscripts": "ij,jk->ik"}),
     Case(((3, 3),), {"subscripts": "ii->i"}), Case(((3, 3),), {"subscripts": "ii->"}),
     Case(((2, 3),), {"subscripts": "ij->"}), Case(((2, 3),), {"subscripts": "ij->ji"}),
     Case(((3,), (2,)), {"subscripts": "i,j->ij"}),
     Case(((3, 3), (3,)), {"subscripts": "ii,i->i"}),
     Case(((2, 2, 3), (3,), (2,)), {"subscripts": "iij,j,k->ik"}),
     Case(((2, 1, 3), (4, 3)), {"subscripts": "ABi,Bi->AB"}),
     Case(((2, 1), (3,)), {"subscripts": "ij,j->"}),
     Case(((2, 2, 2),), {"subscripts": "iii->i"})], linear=EACH_ALONE,
    variadic=True, batch=lambda o, xs, batched, subscripts: _batch_einsum(o, xs, batched,
                                                                          subscripts),
    taylor=multilinear("einsum"),
    schema=attrs(shape_rule=einsum, subscripts=need(SUBSCRIPTS)), saves=("inputs",)))


def _batch_einsum(o: PrimitiveMethods, xs, batched, subscripts):
    """The same contraction with a fresh letter for the batch axis, kept in the output."""
    z = next(c for c in LETTERS if c not in subscripts)
    lhs, target = subscripts.split("->")
    terms = [z + t if b else t for t, b in zip(lhs.split(","), batched)]
    return run(o, "einsum", xs, {"subscripts": ",".join(terms) + "->" + z + target})

# ---------------------------------------------------------------- diagonal, tril, triu


def _diagonal(x, offset=0, axis1=0, axis2=1):
    return np.diagonal(x, offset=offset, axis1=axis1, axis2=axis2)


def diagonal_index(n1: int, n2: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the ``offset`` diagonal of an n1 x n2 matrix."""
    k = max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))
    rows = np.arange(k) + max(-offset, 0)
    return rows, rows + offset


def _diagonal_vjp(o: PrimitiveMethods, g, out, x, offset=0, axis1=0, axis2=1):
    shape = shape_of(x)
    rest = [i for i in range(len(shape)) if i not in (axis1, axis2)]
    rows, cols = diagonal_index(shape[axis1], shape[axis2], offset)
    moved = tuple(shape[i] for i in rest) + (shape[axis1], shape[axis2])
    d = o.scatter_add([g], [(slice(None),) * len(rest) + (rows, cols)], moved)
    perm = rest + [axis1, axis2]
    return d if perm == sorted(perm) else o.transpose(d, tuple(int(i) for i in np.argsort(perm)))


def _diagonal_fmt(args, attrs, render):
    shown = [f"{k}={attrs[k]}" for k, default in (("offset", 0), ("axis1", 0), ("axis2", 1))
             if attrs.get(k, default) != default]
    return f"{args[0]}.diagonal({', '.join(shown)})"


DIAGONAL = register(Primitive(
    "diagonal", _diagonal, [_diagonal_vjp],
    lambda o, ts, out, x, offset=0, axis1=0, axis2=1:
        o.diagonal(ts[0], offset=offset, axis1=axis1, axis2=axis2),
    _diagonal_fmt,
    [Case(((3, 3),)), Case(((3, 4),), {"offset": 1}), Case(((4, 3),), {"offset": -2}),
     Case(((2, 3, 3),), {"axis1": 1, "axis2": 2}), Case(((3, 2, 4),), {"axis1": 2, "axis2": 0})],
     linear=JOINTLY,
    batch=lambda o, xs, batched, offset=0, axis1=0, axis2=1: run(o, "diagonal", xs, {
        "offset": offset, "axis1": shift_axis(axis1, "diagonal", xs[0]),
        "axis2": shift_axis(axis2, "diagonal", xs[0])}),
    taylor=linear("diagonal"),
    schema=attrs(shape_rule=diagonal, offset=INT, axis1=AXIS, axis2=AXIS), saves=()))


def _triangle(name: str, forward, **facts: Any) -> Primitive:
    def fmt(args, attrs, render):
        return f"{name}({args[0]}" + (f", k={attrs['k']})" if attrs.get("k", 0) else ")")
    return register(Primitive(
        name, forward,
        [lambda o, g, out, x, k=0: getattr(o, name)(g, k=k)],
        lambda o, ts, out, x, k=0: getattr(o, name)(ts[0], k=k), fmt,
        [Case(((3, 3),)), Case(((3, 4),), {"k": 1}), Case(((2, 3, 3),), {"k": -1})], **facts,
        mask=lambda o, m, i, out, x, k=0: m, batch=mapped(name), taylor=linear(name),
        schema=attrs(shape_rule=triangle, k=INT), saves=()))


def _tril(x, k=0):
    return np.tril(x, k=k)


def _triu(x, k=0):
    return np.triu(x, k=k)


TRIL = _triangle("tril", _tril, linear=JOINTLY)
TRIU = _triangle("triu", _triu, linear=JOINTLY)

# ---------------------------------------------------------------- Ops methods


class ProductOps:
    """The products as methods of an Ops (numpy's names and signatures)."""

    def einsum(self, subscripts: str, *operands: Any, name: str | None = None) -> Variable:
        """numpy's einsum: explicit or implicit output, repeated letters, '...', any arity."""
        if not isinstance(subscripts, str):
            subscripts, operands = from_sublists((subscripts, *operands))
        shapes = [shape_of(x) for x in operands]
        try:
            ins, out = parse_subscripts(subscripts, shapes)
        except ValueError as e:
            raise error("einsum", operands, str(e), ShapeError) from None
        return self.apply(EINSUM, operands, {"subscripts": ",".join(ins) + "->" + out}, name)

    def tensordot(self, x: Any, y: Any, axes: Any = 2, name: str | None = None) -> Variable:
        """Sum of products over ``axes`` (an int: last of x with first of y; or two lists)."""
        nx, ny = len(shape_of(x)), len(shape_of(y))
        if isinstance(axes, (int, np.integer)):
            if not 0 <= axes <= min(nx, ny):
                raise error("tensordot", (x, y), f"axes={axes} is out of range", AxisError)
            ax, ay = list(range(nx - axes, nx)), list(range(axes))
        else:
            try:
                ax, ay = ([a] if isinstance(a, (int, np.integer)) else list(a) for a in axes)
                ax = [int(a) % nx for a in ax]
                ay = [int(a) % ny for a in ay]
            except (TypeError, ValueError, ZeroDivisionError):
                raise error("tensordot", (x, y), f"bad axes {axes!r}", AxisError) from None
            if len(ax) != len(ay):
                raise error("tensordot", (x, y), "axes must pair up", AxisError)
        if any(shape_of(x)[a] != shape_of(y)[b] for a, b in zip(ax, ay)):
            raise error("tensordot", (x, y), f"summed axes {ax} of x and {ay} of y differ "
                              "in size", ShapeError)
        sx, sy = LETTERS[:nx], list(LETTERS[nx:nx + ny])
        for a, b in zip(ax, ay):
            sy[b] = sx[a]
        sy = "".join(sy)
        out = "".join(c for i, c in enumerate(sx) if i not in ax) + "".join(
            c for i, c in enumerate(sy) if i not in ay)
        return self.einsum(f"{sx},{sy}->{out}", x, y, name=name)

    def dot(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """numpy's dot: mul for a scalar, matmul up to 2-D, else a sum over x's last axis and
        y's second-to-last."""
        nx, ny = len(shape_of(x)), len(shape_of(y))
        if nx == 0 or ny == 0:
            return self.mul(x, y, name=name)
        if nx <= 2 and ny <= 2:
            return self.matmul(x, y, name=name)
        sx, sy = LETTERS[:nx], list(LETTERS[nx:nx + ny])
        sy[-2 if ny > 1 else -1] = sx[-1]       # x's last axis meets y's second-to-last
        sy = "".join(sy)
        return self.einsum(f"{sx},{sy}->{sx[:-1]}{sy.replace(sx[-1], '')}", x, y, name=name)

    def inner(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """Sum of products over the last axes of x and y."""
        nx, ny = len(shape_of(x)), len(shape_of(y))
        if nx == 0 or ny == 0:
            return self.mul(x, y, name=name)
        sx, sy = LETTERS[:nx - 1], LETTERS[nx:nx + ny - 1]
        return self.einsum(f"{sx}z,{sy}z->{sx}{sy}", x, y, name=name)

    def outer(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """The outer product of x and y, each flattened first."""
        x, y = (v if len(shape_of(v)) == 1 else self.reshape(v, (-1,)) for v in (x, y))
        return self.einsum("i,j->ij", x, y, name=name)

    def kron(self, x: Any, y: Any, name: str | None = None) -> Variable:
        """The Kronecker product: blocks x[i, j] * y (einsum, then reshape)."""
        n = max(len(shape_of(x)), len(shape_of(y)))
        x, y = (v if len(shape_of(v)) == n else self.reshape(v, (1,) * (n - len(shape_of(v)))
                                                             + shape_of(v)) for v in (x, y))
        sx, sy = LETTERS[:n], LETTERS[26:26 + n]
        shape = tuple(a * b for a, b in zip(shape_of(x), shape_of(y)))
        blocks = self.einsum(f"{sx},{sy}->{''.join(a + b for a, b in zip(sx, sy))}", x, y)
        return self.reshape(blocks, shape, name=name)

    def diagonal(self, x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1,
                 name: str | None = None) -> Variable:
        """The ``offset`` diagonal of the (axis1, axis2) matrices of x, as its last axis."""
        a1, a2 = _two_axes(self, "diagonal", x, axis1, axis2)
        attrs = {"offset": int(offset), "axis1": a1, "axis2": a2}
        return self.apply(DIAGONAL, (x,), attrs, name)

    def trace(self, x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1,
              name: str | None = None) -> Variable:
        """Sum of the ``offset`` diagonal (records diagonal, then sum)."""
        d = self.diagonal(x, offset=offset, axis1=axis1, axis2=axis2)
        return self.sum(d, axis=-1, name=name)

    def diag(self, x: Any, k: int = 0, name: str | None = None) -> Variable:
        """The k-th diagonal of a matrix, or a square matrix with vector x on its k-th one."""
        shape = shape_of(x)
        if len(shape) == 2:
            return self.diagonal(x, offset=k, name=name)
        if len(shape) != 1:
            raise error("diag", (x,), "needs a vector or a matrix", ShapeError)
        n = shape[0] + abs(int(k))
        rows, cols = diagonal_index(n, n, int(k))
        return self.scatter_add([x], [(rows, cols)], (n, n), name=name)

    def tril(self, x: Any, k: int = 0, name: str | None = None) -> Variable:
        """x with entries above the k-th diagonal set to 0 (last two axes)."""
        _matrices(self, "tril", x)
        return self.apply(TRIL, (x,), {"k": int(k)}, name)

    def triu(self, x: Any, k: int = 0, name: str | None = None) -> Variable:
        """x with entries below the k-th diagonal set to 0 (last two axes)."""
        _matrices(self, "triu", x)
        return self.apply(TRIU, (x,), {"k": int(k)}, name)


def _matrices(ops: PrimitiveMethods, op: str, x: Any) -> None:
    if len(shape_of(x)) < 2:
        raise error(op, (x,), "needs at least 2 dimensions", ShapeError)


def _two_axes(ops: PrimitiveMethods, op: str, x: Any, axis1: int, axis2: int) -> tuple[int, int]:
    nd = len(shape_of(x))
    if nd < 2 or not (-nd <= axis1 < nd and -nd <= axis2 < nd) or axis1 % nd == axis2 % nd:
        raise error(op, (x,), f"axis1={axis1}, axis2={axis2} must be two different axes "
                         f"of a {nd}-d array", AxisError)
    return axis1 % nd, axis2 % nd


# ---------------------------------------------------------------- Variable methods

class ProductMethods:
    """Variable methods of the products (numpy's ndarray names)."""

    __slots__ = ()

    def dot(self, other: Any) -> Variable:
        """numpy's dot of self and other."""
        return self.rec.dot(self, other)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Variable:
        """Sum of the ``offset`` diagonal."""
        return self.rec.trace(self, offset=offset, axis1=axis1, axis2=axis2)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Variable:
        """The ``offset`` diagonal of the (axis1, axis2) matrices, as the last axis."""
        return self.rec.diagonal(self, offset=offset, axis1=axis1, axis2=axis2)

