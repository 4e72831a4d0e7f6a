"""What the decompositions (eigh, svd, qr) share: one primitive with several parts.

A decomposition with several outputs is ONE primitive whose ``part`` attribute picks the
output an entry holds, so each output is an ordinary array entry that prints as the Python a
reader would write (``v2 = eigh(v1).eigenvalues``, ``v3 = eigh(v1).eigenvectors``) and has its
own vjp and jvp. ``op.eigh(a)`` records both entries from one decomposition (the forwards share
it while the call lasts). Rules are written with primitives only (matmul, solve, ``swap_last``,
constant masks), so every order works; matrices are the last two axes, leading axes a batch.

Conventions (documented in docs/using.md):
- ``eigh`` works on (a + a^T) / 2, as ``cholesky`` does; eigenvalues ascend.
- Signs are fixed in the forward: each eigenvector (column of V), each left singular vector
  (column of U, with the matching row of Vh) has its largest-magnitude entry positive, and
  ``qr``'s R has a non-negative diagonal. So the outputs are smooth functions of the input
  wherever the decomposition is (finite differences agree), not numpy's arbitrary signs.
- Derivatives of eigenvectors need distinct eigenvalues, of singular vectors distinct nonzero
  singular values: a rule that meets (numerically) repeated ones raises ``sg.LinAlgError`` when
  the derivative is taken. This check refuses; it never changes the recorded program, which
  replayed at such an input gives inf or nan. Eigenvalues and singular values alone
  differentiate anywhere (at a repeated value the result is one valid choice).
- ``qr`` (tall or wide) needs the first min(m, n) columns independent; a wide matrix [X | Y]
  is differentiated through the square QR of X and R's right block Q^T Y.
- numpy's functions on Variables (``np.linalg.qr``, ``np.linalg.svd``, ``np.linalg.eigh``)
  return numpy's own signs: their entries carry ``signs="numpy"`` (printed
  ``np.linalg.qr(A).Q``), whose forward is numpy's result on the value. Such an output is
  F * D, F the sign-fixed part and D a +-1 pattern (one sign per vector: a column of Q, U
  or V, a row of R or Vh), constant except where numpy's own signs jump; the rules record F
  and D = sign(sum(F * out)) per vector and are F's rules times D (no gradient flows
  through ``sign``), so every order works and a replayed program recomputes numpy's signs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import ArgumentError, LinAlgError
from ..complex import is_complex
from ..core import REGISTRY, Primitive, shape_of, value_of
from .matrices import as_column, as_row

if TYPE_CHECKING:
    from .. import PrimitiveMethods

# ---------------------------------------------------------------- shared decompositions

_SHARED = threading.local()


@contextmanager
def shared_decompositions() -> Iterator[None]:
    """Within the block, forwards of one decomposition on the same array compute it once."""
    outer = getattr(_SHARED, "memo", None)
    if outer is None:
        _SHARED.memo = {}
    try:
        yield
    finally:
        if outer is None:
            _SHARED.memo = None


def decompose(kind: str, compute: Any, a: np.ndarray) -> tuple:
    """compute(a), computed once per ``kind`` and array inside ``shared_decompositions``."""
    memo = getattr(_SHARED, "memo", None)
    if memo is None:
        return compute(a)
    hit = memo.get((kind, id(a)))
    if hit is not None and hit[0] is a:     # the memo holds a, so its id is not reused
        return hit[1]
    result = compute(a)
    memo[(kind, id(a))] = (a, result)
    return result


def column_signs(u: np.ndarray) -> np.ndarray:
    """Per column of u, the sign (+1 or -1) that makes its largest-magnitude entry positive (for
    a complex u, the unit phase that makes it real and positive)."""
    if u.shape[-2] == 0:        # columns of no entries (a 0 x 0 matrix's): nothing to sign
        return np.ones(u.shape[:-2] + (1, u.shape[-1]), u.dtype)
    i = np.argmax(np.abs(u), axis=-2)[..., None, :]
    top = np.take_along_axis(u, i, axis=-2)
    if u.dtype.kind == "c":     # the unit phase that makes that entry real and positive
        size = np.abs(top)
        return np.where(size == 0, 1, np.conj(top) / np.where(size == 0, 1, size)).astype(u.dtype)
    s = np.sign(top)
    return np.where(s == 0, 1.0, s).astype(u.dtype)

# ---------------------------------------------------------------- rule pieces


def inverse_gaps(o: PrimitiveMethods, lam: Any, a: Any, fn: str, what: str) -> Any:
    """F with F[i, j] = 1 / (lam[j] - lam[i]) off the diagonal and 0 on it (recorded).

    Raises LinAlgError when two values of ``lam`` coincide to working precision.
    """
    shape = shape_of(lam)
    n = shape[-1]
    diff = o.sub(as_row(o, lam), as_column(o, lam))
    values = np.asarray(value_of(lam))
    gaps = np.abs(np.asarray(value_of(diff)))[..., ~np.eye(n, dtype=bool)]
    scale = np.max(np.abs(values), axis=-1, keepdims=True) if n else 0.0
    tol = 10 * n * np.finfo(values.dtype).eps * scale
    if gaps.size and np.any(gaps <= tol):
        name = getattr(a, "name", "the matrix")
        raise LinAlgError(f"{fn}: the derivative of the {what} needs distinct values, but "
                          f"{name} has repeated ones ({np.round(values, 6).tolist()}); "
                          "functions of the values alone differentiate at any matrix")
    eye = np.eye(n, dtype=values.dtype)
    return o.mul(o.div(1.0, o.add(diff, eye)), 1.0 - eye)

# ---------------------------------------------------------------- recording the parts


def _names(name: Any, parts: Sequence[str]) -> list:
    """One name per output: None, or a sequence of names (one per output)."""
    if name is None:
        return [None] * len(parts)
    if isinstance(name, str) or len(name) != len(parts):
        raise ArgumentError(f"name= of a decomposition is one name per output "
                            f"({', '.join(parts)}), got {name!r}")
    return list(name)


def record_parts(ops: PrimitiveMethods, prim: Primitive, a: Any, parts: Sequence[str],
                 name: Any, attrs: dict | None = None) -> list:
    """One entry per part of ``prim`` on a, from one decomposition; ``name``: one per part;
    ``attrs``: added to each part's (``signs="numpy"``)."""
    names = _names(name, parts)
    with shared_decompositions():
        return [ops.apply(prim, (a,), {"part": p, **(attrs or {})}, n)
                for p, n in zip(parts, names)]

# ---------------------------------------------------------------- numpy's own signs

NUMPY_SIGNS = {"signs": "numpy"}      # the attribute of an entry holding numpy's signs
# per part with signs: the axis of one vector (a column: -2, a row: -1)
_VECTOR_AXIS = {"Q": -2, "R": -1, "U": -2, "Vh": -1, "eigenvectors": -2}


def with_numpy_signs(name: str, vjp: Any, jvp: Any) -> tuple:
    """The vjp and jvp rules of a decomposition whose entries may hold numpy's own signs.

    ``vjp``/``jvp`` are the sign-fixed rules ``rule(o, g_or_ts, out, a, part)`` of the
    registered primitive ``name``. An entry with ``signs`` set is out = F * D: the returned
    rules record F (the same part without ``signs``) and D, and apply F's vjp to g * D, or
    multiply F's tangent by D.
    """
    def fixed_and_flips(o: PrimitiveMethods, out: Any, a: Any, part: str) -> tuple:
        axis = _VECTOR_AXIS.get(part)
        if axis is None:                # values: no signs, the same as the fixed part's
            return out, None
        f = o.apply(REGISTRY[name], (a,), {"part": part})
        if is_complex(out):         # the unit phase of each column (row) against f's
            return f, o.sum(o.mul(o.conj(f), out), axis=axis, keepdims=True)
        return f, o.sign(o.sum(o.mul(f, out), axis=axis, keepdims=True))

    def signed_vjp(o: PrimitiveMethods, g: Any, out: Any, a: Any, part: str,
                   **attrs: Any) -> Any:
        if not attrs.get("signs"):
            return vjp(o, g, out, a, part)
        with shared_decompositions():
            f, d = fixed_and_flips(o, out, a, part)
            return vjp(o, g if d is None else o.mul(g, d), f, a, part)

    def signed_jvp(o: PrimitiveMethods, ts: Any, out: Any, a: Any, part: str,
                   **attrs: Any) -> Any:
        if not attrs.get("signs"):
            return jvp(o, ts, out, a, part)
        with shared_decompositions():
            f, d = fixed_and_flips(o, out, a, part)
            t = jvp(o, ts, f, a, part)
        return t if d is None else o.mul(t, d)

    return signed_vjp, signed_jvp


def decomposition_text(fn: str) -> Any:
    """The print rule: ``qr(A).Q``; ``np.linalg.eigh(A, UPLO='U').eigenvectors`` for numpy's."""
    def fmt(args: Sequence[str], attrs: dict, render: Any) -> str:
        if not attrs.get("signs"):
            return f"{fn}({args[0]}).{attrs['part']}"
        extra = "".join(f", {k}={v!r}" for k, v in attrs.items() if k not in ("part", "signs"))
        return f"np.linalg.{fn}({args[0]}{extra}).{attrs['part']}"
    return fmt
