"""The primitive families and their registry; each primitive is declared once, in its family."""

from .core import REGISTRY, Case, Primitive, register
from .elementwise import ElementwiseOps
from .linalg import LinalgOps
from .reduce import ReduceOps
from .shape import ShapeOps

__all__ = ["REGISTRY", "Case", "Primitive", "register", "ElementwiseOps", "LinalgOps",
           "ReduceOps", "ShapeOps"]
