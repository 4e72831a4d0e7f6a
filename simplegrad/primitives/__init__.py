"""The primitive families, their registry, and the two objects rules compute with.

Rules call primitives as methods of ``o``: the recording ``Ops`` (simplegrad.tape) or a
``ValueOps``, which runs the same methods on plain numpy values and records nothing.
Both share ``PrimitiveMethods``: every primitive as a method, plus ``apply``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .binary import BinaryOps, BinaryVariable
from .core import REGISTRY, Case, Primitive, register
from .elementwise import ElementwiseOps
from .gather import GatherMethods, GatherOps
from .layout import LayoutMethods, LayoutOps
from .linalg.cholesky import CholeskyOps
from .linalg.determinants import DeterminantOps
from .linalg.eigh import EighOps
from .linalg.matmul import MatmulOps
from .linalg.matrix_power import MatrixPowerOps
from .linalg.norm import NormOps
from .linalg.pseudo import PseudoInverseOps
from .linalg.qr import QROps
from .linalg.solve import SolveOps
from .linalg.svd import SVDOps
from .logic import LogicOps
from .numpy_api import NumpyFunctions
from .products import ProductMethods, ProductOps
from .reduce import ReduceOps
from .scans import ScanOps, ScanVariable
from .shape import ShapeOps
from .special import SpecialOps, SpecialVariable

__all__ = ["REGISTRY", "Case", "Primitive", "register", "PrimitiveMethods", "ValueOps",
           "VALUES", "VariableMethods"]


class PrimitiveMethods(ElementwiseOps, LogicOps, ReduceOps, ShapeOps, MatmulOps, SolveOps,
                       DeterminantOps, CholeskyOps, NormOps, ProductOps, LayoutOps, GatherOps,
                       SpecialOps, BinaryOps, ScanOps, EighOps, SVDOps, QROps, PseudoInverseOps,
                       MatrixPowerOps):
    """Every primitive as a method; subclasses say what ``apply`` (the generic form) does."""

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """Run ``prim`` on ``inputs`` with ``attrs`` (the generic form of every method)."""
        raise NotImplementedError


class VariableMethods(ProductMethods, LayoutMethods, GatherMethods, SpecialVariable,
                      BinaryVariable, ScanVariable, NumpyFunctions):
    """Methods that primitive families add to ``Variable`` (``x.cumsum()``, ...).

    A family keeps its Variable methods in a mixin with ``__slots__ = ()`` beside its records
    and lists it among these bases; each method calls ``self.ops.<name>(self, ...)``.
    """

    __slots__ = ()


class ValueOps(PrimitiveMethods):
    """The same primitive methods run on plain numpy values: nothing is recorded."""

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """The value of ``prim`` on plain values (nothing is recorded)."""
        return prim.forward(*inputs, **attrs) if attrs else prim.forward(*inputs)


for _prim in REGISTRY.values():
    if _prim.plain:     # skip the method and apply layers when only values are wanted
        setattr(ValueOps, _prim.name, staticmethod(_prim.forward))

VALUES = ValueOps()
