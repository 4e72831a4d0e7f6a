"""The two objects rules compute with: every primitive as a method of ``o``.

Rules call primitives as methods of ``o``: the recording ``Ops`` (engine/ops.py) or a
``ValueOps``, which runs the same methods on plain numpy values and records nothing.
Both share ``PrimitiveMethods``: every family's methods, plus ``apply``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .binary import BinaryOps
from .complex import ComplexOps
from .conv import ConvOps
from .core import REGISTRY, Primitive
from .cross import CrossOps
from .elementwise import ElementwiseOps
from .fft import FFTOps
from .gamma_functions import GammaOps
from .gather import GatherOps
from .indexing import IndexingOps
from .layout import LayoutOps
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
from .loops import LoopOps
from .moments import MomentOps
from .piecewise import PiecewiseOps
from .products import ProductOps
from .rearrange import RearrangeOps
from .reduce import ReduceOps
from .running import RunningOps
from .scans import ScanOps
from .shape import ShapeOps
from .special_functions import SpecialFunctionOps
from .unary import UnaryOps
from .updates import UpdateOps


class PrimitiveMethods(ElementwiseOps, PiecewiseOps, LogicOps, ReduceOps, ShapeOps, IndexingOps,
                       MatmulOps, SolveOps, DeterminantOps, CholeskyOps, NormOps, ProductOps,
                       LayoutOps, RearrangeOps, GatherOps, UnaryOps, BinaryOps, ScanOps,
                       MomentOps, EighOps, SVDOps, QROps, PseudoInverseOps, MatrixPowerOps,
                       SpecialFunctionOps, RunningOps, CrossOps, GammaOps, UpdateOps, ComplexOps,
                       FFTOps, ConvOps, LoopOps):
    """Every primitive as a method; subclasses say what ``apply`` (the generic form) does."""

    #: whether the methods take and give plain numpy values (``ValueOps``): helpers with a
    #: value-only fast path (series.py) may then compute with numpy's operators directly
    plain_values = False

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """Run ``prim`` on ``inputs`` with ``attrs`` (the generic form of every method)."""
        raise NotImplementedError


class ValueOps(PrimitiveMethods):
    """The same primitive methods run on plain numpy values: nothing is recorded."""

    plain_values = True

    def apply(self, prim: Primitive, inputs: Sequence[Any], attrs: dict | None = None,
              name: str | None = None) -> Any:
        """The value of ``prim`` on plain values (nothing is recorded)."""
        return prim.forward(*inputs, **attrs) if attrs else prim.forward(*inputs)


for _prim in REGISTRY.values():
    if _prim.plain:     # skip the method and apply layers when only values are wanted
        setattr(ValueOps, _prim.name, staticmethod(_prim.forward))

VALUES = ValueOps()
