"""simplegrad: reverse-mode autodiff on numpy in which gradients are recorded programs."""

from .accumulation import jacobian_cost
from .batching import vmap
from .checkpoint import checkpoint
from .checks import check_grads, check_jvp_vjp_consistency
from .compiler import compile as compile  # sg.compile; kept out of __all__ (shadows a builtin)
from .custom import custom_vjp
from .errors import (
    ArgumentError,
    AxisError,
    DTypeError,
    FormatError,
    GradientCheckError,
    GraphError,
    LinAlgError,
    MissingToolError,
    NotDifferentiableError,
    OutOfBoundsError,
    ShapeError,
    SimplegradError,
    TapeGrowthWarning,
)
from .estimators import divergence, hutchinson_trace, hutchpp_trace
from .params import Parameter
from .primitives import REGISTRY, Case, Primitive
from .program import Program
from .pytree import TreeDef, tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten
from .serialize import load_program
from .simplifier import simplify
from .tape import Ops, Tape
from .taylor_mode import taylor, taylor_derivative
from .transforms import derivative, grad, hessian, hvp, jacobian, jvp, trace, value_and_grad, vjp
from .variable import Variable

__version__ = "0.1.0"

__all__ = [
    "Ops", "Variable", "Tape", "Parameter", "Primitive", "Case", "REGISTRY",
    "SimplegradError", "ShapeError", "AxisError", "GraphError", "DTypeError", "ArgumentError",
    "LinAlgError",
    "OutOfBoundsError", "NotDifferentiableError", "GradientCheckError", "TapeGrowthWarning",
    "check_grads", "check_jvp_vjp_consistency",
    "hutchinson_trace", "hutchpp_trace", "divergence",
    "grad", "value_and_grad", "vjp", "jvp", "jacobian", "hessian", "hvp", "derivative", "trace",
    "custom_vjp", "checkpoint", "Program", "simplify", "taylor", "taylor_derivative",
    "TreeDef", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "tree_structure",
    "FormatError", "MissingToolError", "load_program", "jacobian_cost", "vmap",
]
