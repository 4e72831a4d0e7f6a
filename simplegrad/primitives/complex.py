"""Complex values: the conjugate (the one primitive that is not holomorphic and not a cast),
and real, imag and angle composed from it, ``cast`` and ``arctan2``.

Rules follow JAX's convention. A cotangent ``g`` of a complex value ``z`` pairs with a
tangent ``t`` as ``Re(sum(g * t))`` (no conjugate), so the vjp of a holomorphic function is
``g * f'(z)``, the same formula as on reals: every real rule written as ``g`` times a
derivative holds for complex values unchanged. Only functions of ``z`` and ``conj(z)`` need
their own: ``conj`` (its vjp is ``conj(g)``), ``real`` (a cast to the real dtype, which keeps
the real part; its vjp casts back), ``imag`` (``real(-1j z)``) and ``abs`` (piecewise.py:
``g * conj(sign(z))``). The reverse sweep casts a complex cotangent reaching a real input to
that input's dtype (its real part), as the forward sweep does a tangent.

On real values each of these is what numpy gives, recorded as before: ``conj`` and ``real``
are the value itself (nothing is recorded), ``imag`` zeros.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DTypeError
from .core import JOINTLY, Case, SymPyForm, dtype_of, uniform
from .elementwise import elementwise
from .taylor import linear

if TYPE_CHECKING:
    from ..engine.variable import Variable

# complex check cases: both parts drawn from (-2, 2)


def complex_sampler(lo: float = -2.0, hi: float = 2.0) -> Any:
    """A sampler of complex values whose real and imaginary parts are uniform in (lo, hi)."""
    real = uniform(lo, hi)

    def sample(rng: np.random.Generator, shape: tuple) -> np.ndarray:
        return real(rng, shape) + 1j * real(rng, shape)
    return sample


CONJ = elementwise("conj", np.conjugate, "{0}.conj()", (
    lambda o, g, out, x: o.conj(g),),
    linear=JOINTLY, taylor=linear("conj"), numpy="np.conj({0})",
    domain=complex_sampler(),
    sympy=SymPyForm(lambda sp, x: sp.conjugate(x), lambda sp, x: sp.conjugate(x)),
    cases=[Case(((3,),), {}), Case(((2, 3),), {})], saves=())
CONJ.batch = lambda o, xs, batched: o.apply(CONJ, (xs[0],))     # (pointwise: the stack's)


def is_complex(x: Any) -> bool:
    """Whether x (a Variable, entry, array or number) holds complex values."""
    d = dtype_of(x)
    return (d.kind == "c") if d is not None else isinstance(x, complex)


def real_dtype(d: np.dtype) -> np.dtype:
    """The real dtype of a complex one's parts (complex64 -> float32), a real one itself."""
    return np.empty(0, d).real.dtype


# ---------------------------------------------------------------- Ops methods


class ComplexOps:
    """conj, real, imag and angle as methods of an Ops, with numpy's names."""

    def conj(self, x: Any, name: str | None = None) -> Variable:
        """The complex conjugate; a real x itself."""
        return self.apply(CONJ, (x,), None, name) if is_complex(x) else x

    def conjugate(self, x: Any, name: str | None = None) -> Variable:
        """The complex conjugate (numpy's np.conjugate); a real x itself."""
        return self.conj(x, name)

    def real(self, x: Any, name: str | None = None) -> Variable:
        """The real part; a real x itself."""
        return self.cast(x, real_dtype(x.dtype), name) if is_complex(x) else x

    def imag(self, x: Any, name: str | None = None) -> Variable:
        """The imaginary part, ``real(-1j x)``; zeros for a real x (no gradient flows)."""
        if is_complex(x):
            return self.cast(self.mul(x, -1j), real_dtype(x.dtype), name)
        kind = dtype_of(x).kind
        if kind == "f":         # x < -inf holds nowhere, nan and inf included
            return self.cast(self.less(x, -np.inf), dtype_of(x))
        return self.less(x, x) if kind == "b" else self.mul(x, 0)

    def angle(self, x: Any, deg: bool = False, name: str | None = None) -> Variable:
        """The argument of each complex entry, ``arctan2(imag, real)`` (in degrees with
        ``deg``)."""
        a = self.arctan2(self.imag(x), self.real(x), name)
        return self.mul(a, 180 / np.pi) if deg else a


class ComplexVariable:
    """``x.real``, ``x.imag``, ``x.conj()`` and ``x.conjugate()`` on Variables."""

    __slots__ = ()

    @property
    def real(self) -> Variable:
        """The real part (a real Variable itself)."""
        return self.rec.real(self)

    @property
    def imag(self) -> Variable:
        """The imaginary part (zeros for a real Variable)."""
        return self.rec.imag(self)

    def conj(self) -> Variable:
        """The complex conjugate (a real Variable itself)."""
        return self.rec.conj(self)

    def conjugate(self) -> Variable:
        """The complex conjugate (a real Variable itself)."""
        return self.rec.conj(self)


# ---------------------------------------------------------------- primitives of real values only
#
# numpy orders complex numbers lexicographically (maximum, sort, comparisons) or drops their
# imaginary parts with a warning (erfinv); neither has a complex derivative. These records
# refuse complex inputs instead, naming themselves, in their Ops methods (numpy refuses floor,
# arctan2, ... itself, and Ops.apply reports that as a DTypeError too). qr, pinv and lstsq wait
# for their complex rules (eigh and svd have theirs: linalg/eigh.py, linalg/svd.py).
REAL_ONLY = ("maximum", "minimum", "fmax", "fmin", "clip", "relu", "max", "min", "cummax",
             "cummin", "sign", "sigmoid", "round", "less", "less_equal", "greater",
             "greater_equal", "argmax", "argmin", "argsort", "cumargmax", "cumargmin", "erfinv",
             "polygamma", "betainc", "variance", "std", "norm", "qr",
             "pinv", "lstsq")


def _refusing(name: str, method: Any) -> Any:
    """The Ops method ``method``, raising DTypeError naming ``name`` for a complex input (the
    record's forward stays numpy's own: backends read it)."""
    @functools.wraps(method)
    def real_only(self: Any, *xs: Any, **attrs: Any) -> Any:
        for x in (*xs, *attrs.values()) if attrs else xs:
            if type(x) is complex or getattr(getattr(x, "dtype", None), "kind", None) == "c":
                raise DTypeError(f"{name} takes real values only, not complex ones; apply it "
                                 "to np.real(z), np.imag(z) or np.abs(z)")
        return method(self, *xs, **attrs)
    return real_only


def refuse_complex(methods: type) -> None:
    """Make the Ops methods of REAL_ONLY refuse complex inputs."""
    for name in REAL_ONLY:
        setattr(methods, name, _refusing(name, getattr(methods, name)))


# ---------------------------------------------------------------- which records take complex
#
# The records whose rules hold for complex values as written (holomorphic functions, linear
# maps, shape and index operations, the records made for complex values, and those with no
# derivative), checked at complex samples by the registry walk (tests/test_complex_registry.py;
# conj and the Fourier transforms sample complex values in their own cases, so the walk of
# tests/test_primitives.py covers them too; rfft takes real values: numpy refuses complex ones).
TAKES_COMPLEX = (
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "sin", "cos", "tan",
    "tanh", "sinh", "cosh", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh",
    "log1p", "expm1", "log2", "log10", "exp2", "square", "reciprocal", "abs", "cast",
    "take_along_axis", "scatter_add_along_axis", "flip", "roll", "pad", "repeat", "tile",
    "cross", "expand", "reshape", "transpose", "concatenate", "stack", "getitem",
    "scatter_add", "at_set", "at_add", "where", "sum", "mean", "prod", "cumsum", "cumprod",
    "einsum", "diagonal", "tril", "triu", "matmul", "matrix_power", "solve", "inv", "det",
    "slogdet", "cholesky", "logsumexp", "softmax", "log_softmax", "conv", "conj", "fft", "ifft",
    "irfft", "fftn", "ifftn", "eigh", "svd",
    "equal", "not_equal", "logical_and", "logical_or", "logical_not", "isfinite", "isnan",
    "isinf", "any", "all", "stop_gradient")

# Of those, the records whose complex outputs are fixed only up to a unit phase per column or
# pair (eigenvectors, singular vectors: linalg/eigh.py and linalg/svd.py state the gauge their
# derivatives take); the walk checks them through |out|^2, which the phases leave unchanged.
PHASE_GAUGED = ("eigh", "svd")
