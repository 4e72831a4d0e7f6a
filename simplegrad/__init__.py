"""simplegrad: reverse-mode autodiff on numpy in which gradients are recorded programs.

The applications (``sg.nn``, ``sg.optim``, ``sg.map_chunks``) and the program tools few
sessions use (loading, comparing, closed forms, sparse derivatives, ``odeint``) are imported
on first use (``__getattr__``), so that ``import simplegrad`` costs only the core.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .checks import check_grads, check_jvp_vjp_consistency
from .engine.ops import Ops
from .engine.params import Parameter
from .engine.steps import Step, step
from .engine.tape import Tape
from .engine.variable import Entry, Variable
from .errors import (
    ArgumentError,
    AxisError,
    ConversionWarning,
    DisconnectedWarning,
    DTypeError,
    FormatError,
    GradientCheckError,
    GraphError,
    LinAlgError,
    MaterializeError,
    MissingToolError,
    NotDifferentiableError,
    OutOfBoundsError,
    ReplayError,
    ShapeError,
    SimplegradError,
    TapeGrowthWarning,
)
from .estimators import divergence, hutchinson_trace, hutchpp_trace
from .primitives import REGISTRY, Case, Primitive
from .primitives.conv import conv
from .primitives.reduce import logsumexp
from .primitives.unary import stop_gradient
from .program.accumulation import jacobian_cost
from .program.compile import (
    compile as compile,  # sg.compile; kept out of __all__ (shadows a builtin)
)
from .program.core import Program
from .program.simplify import simplify
from .pytree import (
    TreeDef,
    register_pytree_node,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_structure,
    tree_unflatten,
)
from .transforms.checkpoint import checkpoint
from .transforms.custom import custom_jvp, custom_vjp
from .transforms.forward import derivative, jvp
from .transforms.implicit import custom_root, fixed_point
from .transforms.jacobians import hessian, hvp, jacfwd, jacobian, jacrev
from .transforms.jit import jit
from .transforms.linearize import linearize
from .transforms.loops import cond, fori_loop, scan, switch, while_loop
from .transforms.operators import laplacian
from .transforms.ravel import ravel_pytree
from .transforms.reverse import elementwise_grad, grad, value_and_grad, vjp
from .transforms.taylor import taylor, taylor_derivative
from .transforms.tracing import trace
from .transforms.transpose import linear_transpose
from .transforms.vmap import vmap

__version__ = "0.1.0"

if TYPE_CHECKING:    # (static readers, the API reference among them: where the lazy names live)
    from . import nn, optim
    from .distributed import map_chunks
    from .program.compare import Diff, diff
    from .program.load import load_program
    from .program.symbolic import check_closed_form
    from .transforms.odeint import odeint
    from .transforms.sparse import (
        color,
        hessian_sparsity,
        jacobian_sparsity,
        sparse_hessian,
        sparse_jacobian,
        spy,
    )

# the names imported on first use: name -> (module, attribute; None for the module itself)
_LAZY = {
    "nn": (".nn", None), "optim": (".optim", None),
    "map_chunks": (".distributed", "map_chunks"),
    "Diff": (".program.compare", "Diff"), "diff": (".program.compare", "diff"),
    "load_program": (".program.load", "load_program"),
    "check_closed_form": (".program.symbolic", "check_closed_form"),
    "odeint": (".transforms.odeint", "odeint"),
    **{name: (".transforms.sparse", name) for name in (
        "color", "hessian_sparsity", "jacobian_sparsity", "sparse_hessian", "sparse_jacobian",
        "spy")},
}


def __getattr__(name: str) -> Any:
    """A name of ``_LAZY``, imported now and kept as an attribute of the package."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'simplegrad' has no attribute {name!r}")
    module = importlib.import_module(where[0], __name__)
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Ops", "Entry", "Variable", "Tape", "Parameter", "Primitive", "Case", "REGISTRY",
    "SimplegradError", "ShapeError", "AxisError", "GraphError", "DTypeError", "ArgumentError",
    "LinAlgError", "ReplayError",
    "OutOfBoundsError", "NotDifferentiableError", "GradientCheckError", "TapeGrowthWarning",
    "DisconnectedWarning", "ConversionWarning",
    "check_grads", "check_jvp_vjp_consistency",
    "hutchinson_trace", "hutchpp_trace", "divergence",
    "grad", "value_and_grad", "vjp", "jvp", "jacobian", "jacfwd", "jacrev", "hessian", "hvp",
    "derivative", "trace", "elementwise_grad", "logsumexp", "stop_gradient",
    "custom_vjp", "custom_jvp", "checkpoint", "Program", "simplify", "taylor", "taylor_derivative",
    "TreeDef", "tree_flatten", "tree_unflatten", "tree_map", "tree_leaves", "tree_structure",
    "register_pytree_node", "ravel_pytree", "linearize", "linear_transpose",
    "FormatError", "MissingToolError", "MaterializeError", "load_program", "jacobian_cost", "vmap",
    "map_chunks", "jit", "nn", "optim",
    "step", "Step", "diff", "Diff", "check_closed_form",
    "jacobian_sparsity", "hessian_sparsity", "color", "sparse_jacobian", "sparse_hessian", "spy",
    "scan", "fori_loop", "while_loop", "cond", "switch", "odeint", "laplacian",
    "custom_root", "fixed_point", "conv",
]
