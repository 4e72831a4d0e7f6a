"""The primitive families, their registry, and the two objects rules compute with.

Rules call primitives as methods of ``o``: the recording ``Ops`` (engine/ops.py) or a
``ValueOps``, which runs the same methods on plain numpy values and records nothing.
Both share ``PrimitiveMethods`` (methods.py): every primitive as a method, plus ``apply``.
``VariableMethods`` is what the families add to ``Variable``.
"""

from __future__ import annotations

from .binary import BinaryVariable
from .complex import ComplexVariable, refuse_complex
from .core import HELD, REGISTRY, Case, Primitive, register
from .gamma_functions import GammaVariable
from .gather import GatherMethods
from .layout import LayoutMethods
from .methods import VALUES, PrimitiveMethods, ValueOps
from .moments import MomentVariable
from .numpy_api import NumpyFunctions
from .numpy_arrays import ArrayVariable
from .products import ProductMethods
from .rearrange import RearrangeMethods
from .running import RunningVariable
from .scans import ScanVariable
from .sparsity_rules import attach_rules
from .special_functions import SpecialFunctionVariable
from .unary import UnaryVariable
from .updates import UpdateMethods

__all__ = ["HELD", "REGISTRY", "Case", "Primitive", "register", "PrimitiveMethods", "ValueOps",
           "VALUES", "VariableMethods"]


class VariableMethods(ProductMethods, LayoutMethods, RearrangeMethods, GatherMethods,
                      UnaryVariable, BinaryVariable, ScanVariable, MomentVariable,
                      SpecialFunctionVariable, RunningVariable, ArrayVariable, GammaVariable,
                      NumpyFunctions, UpdateMethods, ComplexVariable):
    """Methods that primitive families add to ``Variable`` (``x.cumsum()``, ...).

    A family keeps its Variable methods in a mixin with ``__slots__ = ()`` beside its records
    and lists it among these bases; each method calls ``self.rec.<name>(self, ...)``.
    """

    __slots__ = ()


attach_rules()      # every record now exists: each gets its index-dependency rule
refuse_complex(PrimitiveMethods)
