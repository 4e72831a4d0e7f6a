"""Functions of functions: grad, value_and_grad, vjp, jvp, jacobian, hessian, hvp, derivative,
vmap, linear_transpose, Taylor mode, custom rules and checkpointing, all recording on the tape
of the transform around them."""

from .arguments import ArgNums, Result
from .checkpoint import checkpoint
from .custom import custom_jvp, custom_vjp
from .forward import derivative, jvp
from .jacobians import hessian, hvp, jacfwd, jacobian, jacrev
from .jit import jit
from .linearize import linearize
from .ravel import ravel_pytree
from .reverse import grad, value_and_grad, vjp
from .taylor import taylor, taylor_derivative
from .tracing import trace
from .transpose import linear_transpose
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacobian", "jacfwd", "jacrev", "hessian",
           "hvp", "derivative", "trace", "vmap", "taylor", "taylor_derivative", "custom_vjp",
           "custom_jvp", "linearize", "linear_transpose", "ravel_pytree", "checkpoint", "jit",
           "ArgNums", "Result"]
