"""Complex derivatives: which one a transform returns, and the checks JAX makes.

For a real ``L`` of ``z = x + iy``, with the Wirtinger derivatives
``dL/dz = (dL/dx - i dL/dy) / 2`` and ``dL/dz̄ = (dL/dx + i dL/dy) / 2``:

- ``convention="jax"`` (the default): ``grad`` returns ``dL/dx - i dL/dy = 2 dL/dz``, what
  ``jax.grad`` returns; a vjp pulls a cotangent ``u`` back to ``u J`` (no conjugate), so
  for a holomorphic ``f`` it is ``u f'(z)``.
- ``convention="torch"``: ``grad`` returns ``dL/dx + i dL/dy = 2 dL/dz̄``, what PyTorch's
  ``backward`` leaves in ``.grad`` (the conjugate of JAX's; minus it is the steepest
  descent direction); a vjp is ``conj(jax_vjp(conj(u)))``, PyTorch's ``autograd.grad`` with
  ``grad_outputs=u``.
- ``holomorphic=True`` (``grad``, ``jacobian``, ``hessian``): complex inputs and outputs, and
  the result is the complex derivative ``f'(z)`` (``df/dz``), as ``jax.grad(...,
  holomorphic=True)``.

For real inputs every convention gives the same real gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..errors import ArgumentError, DTypeError

Convention = Literal["jax", "torch"]
CONVENTIONS = ("jax", "torch")

def check_convention(fname: str, convention: Any) -> Convention:
    """``convention``, checked to be 'jax' or 'torch'."""
    if convention not in CONVENTIONS:
        raise ArgumentError(f"{fname}: convention must be 'jax' or 'torch', not {convention!r}")
    return convention


def is_complex(x: Any) -> bool:
    """Whether x (a Variable, array or number) holds complex values."""
    d = getattr(x, "dtype", None)
    return d.kind == "c" if d is not None else isinstance(x, complex)


def check_inputs(fname: str, xs: Sequence[Any], holomorphic: bool) -> None:
    """With ``holomorphic``, every differentiated input is complex (as JAX requires)."""
    if not holomorphic:
        return
    for x in xs:
        if not is_complex(x):
            raise DTypeError(f"{fname} with holomorphic=True needs complex inputs, got "
                             f"{np.dtype(getattr(x, 'dtype', type(x)))}")


def check_output(fname: str, y: Any, holomorphic: bool) -> None:
    """A complex output needs ``holomorphic=True``; with it, the output must be complex."""
    if holomorphic and not is_complex(y):
        raise DTypeError(f"{fname} with holomorphic=True needs a complex output, got "
                         f"{y.dtype}")
    if not holomorphic and is_complex(y):
        raise DTypeError(f"{fname}: f returned a complex value ({y.dtype}); pass "
                         "holomorphic=True for the complex derivative of a holomorphic f, or "
                         "differentiate a real function of it (np.abs(y) ** 2, np.real(y))")


def check_forward_inputs(fname: str, xs: Sequence[Any], holomorphic: bool) -> None:
    """Forward-mode Jacobians of complex inputs exist only for holomorphic functions (JAX's
    jacfwd and hessian refuse them too)."""
    if not holomorphic and any(is_complex(x) for x in xs):
        raise DTypeError(f"{fname}: complex inputs need holomorphic=True (for a real function "
                         "of z, differentiate in its real and imaginary parts: f(x + 1j * y))")


def conjugated(ops: Any, nested: bool, gs: list, convention: Convention) -> list:
    """The gradients in ``convention`` from JAX's: PyTorch's conjugate the complex ones
    (recorded on ``ops`` when ``nested``, else by np.conj, which records on a Variable's own)."""
    if convention == "jax":
        return gs
    if nested:
        return [ops.conj(g) if is_complex(g) else g for g in gs]
    return [np.conj(g) if is_complex(g) else g for g in gs]
