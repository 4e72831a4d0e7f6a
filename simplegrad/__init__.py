"""simplegrad: reverse-mode autodiff on numpy in which gradients are recorded programs."""

from .errors import (
    ArgumentError,
    AxisError,
    DTypeError,
    GradientCheckError,
    GraphError,
    NotDifferentiableError,
    OutOfBoundsError,
    ShapeError,
    SimplegradError,
)
from .primitives import REGISTRY, Case, Primitive
from .tape import Ops, Tape
from .variable import Variable

__version__ = "0.1.0"

__all__ = [
    "Ops", "Variable", "Tape", "Primitive", "Case", "REGISTRY",
    "SimplegradError", "ShapeError", "AxisError", "GraphError", "DTypeError", "ArgumentError",
    "OutOfBoundsError", "NotDifferentiableError", "GradientCheckError",
]
