"""numpy functions on Variables: ``np.sum(x, axis=1)`` records the matching primitive.

numpy hands a call of one of its functions with a Variable among the arguments to
``Variable.__array_function__`` (NEP 18). The call is recorded on the Ops of its Variable
arguments through the table built here:

- generated: every registered primitive, and every other public method of the primitive
  families (``PrimitiveMethods``: not the tape's own methods such as ``op.var``), whose name
  is a numpy function (``np.<name>`` or ``np.linalg.<name>``; ufuncs aside, they reach
  ``__array_ufunc__``, see ``ufuncs()``) calls the Ops method of that name, with numpy's
  arguments mapped by name (numpy's first argument ``a`` becomes the method's ``x``). An
  argument the method lacks is accepted only at numpy's default;
- numpy's own fallback: a numpy function named like a ``Variable`` method calls that method
  on its first argument, the other arguments by name (``np.var(x, ddof=1)`` is
  ``x.var(ddof=1)``), as numpy does for objects that are not arrays;
- explicit: numpy functions whose name or signature differs (``np.broadcast_to`` is
  ``expand``, ``np.linalg.slogdet`` returns (sign, logabsdet), ``np.linalg.norm`` takes
  ``ord``, ...), and a few compositions of primitives (``np.dot`` and ``np.outer`` until a
  family defines a method of that name).

A numpy function with no entry raises ``sg.ArgumentError`` naming it: numpy's own code would
either drop the Variable from the tape or fail with a generic TypeError.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .errors import ArgumentError
from .primitives.core import REGISTRY, shape_of, value_of

Handler = Callable[..., Any]   # handler(ops, *args, **kwargs) with numpy's signature

# np.linalg functions of the array API whose semantics differ from np.<name> of the same name
ARRAY_API = frozenset({"cross", "diagonal", "matmul", "matrix_transpose", "outer", "tensordot",
                        "trace", "vecdot", "vector_norm", "matrix_norm", "svdvals"})
# arguments that change nothing about the result at these values
_NEUTRAL = {"out": None, "dtype": None, "where": True, "casting": "same_kind", "subok": False,
            "order": "C", "copy": None, "device": None}


class NumpyFunctions:
    """Variable mixin: numpy functions called on Variables record the matching primitive."""

    __slots__ = ()

    def __array_function__(self, func: Callable, types: tuple, args: tuple,
                           kwargs: dict) -> Any:
        if not all(issubclass(t, (NumpyFunctions, np.ndarray)) for t in types):
            return NotImplemented       # another library's array: let it answer
        handler = table().get(func)
        if handler is None:
            raise ArgumentError(f"{qualname(func)} has no simplegrad rule for Variables "
                                f"({_names(args, kwargs)}); see \"numpy functions that record\" "
                                "in the README, or use .value for the plain (unrecorded) value")
        return handler(_ops_of(args, kwargs), *args, **kwargs)


# ---------------------------------------------------------------- the table

_CACHE: dict[str, Any] = {"size": -1, "table": {}, "ufuncs": {}}


def table() -> dict[Callable, Handler]:
    """numpy function -> handler, from the registry (same names) and the explicit entries."""
    _refresh()
    return _CACHE["table"]


def ufuncs() -> dict[np.ufunc, str]:
    """numpy ufunc -> Ops method, generated like the function table (for __array_ufunc__).

    ``np.equal`` and ``np.not_equal`` are left out: ``==`` and ``!=`` stay identity.
    """
    _refresh()
    return _CACHE["ufuncs"]


def _refresh() -> None:
    if _CACHE["size"] != len(REGISTRY):     # primitives registered since: rebuild
        _CACHE["table"] = _build()
        _CACHE["ufuncs"] = _build_ufuncs()
        _CACHE["size"] = len(REGISTRY)


def covered() -> list[str]:
    """The numpy functions that record on Variables, as sorted qualified names (np.linalg.x)."""
    return sorted(qualname(f) for f in table())


def readme_list(width: int = 96) -> str:
    """The covered functions as the README shows them: backticked names, wrapped."""
    lines, line = [], ""
    for name in covered():
        word = f"`{name}`"
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join(lines + [line])


def qualname(func: Callable) -> str:
    """``np.sum``, ``np.linalg.solve``, ``np.fft.fft``: how a reader writes the function."""
    module = getattr(func, "__module__", None) or "numpy"
    if module == "numpy" or module.startswith("numpy."):
        module = "np" + module[len("numpy"):]
    return f"{module}.{getattr(func, '__name__', repr(func))}"


def _build() -> dict[Callable, Handler]:
    out: dict[Callable, Handler] = {}
    names = _method_names()
    for name in names:
        for space in (np, np.linalg):
            fn = getattr(space, name, None)
            if fn is None or isinstance(fn, np.ufunc) or not callable(fn):
                continue
            if space is np.linalg and name in ARRAY_API or fn in out:
                continue                    # a primitive's own name comes first
            out[fn] = _method(fn, name)
    for fn, method in _RENAMED.items():
        if method in names:
            out[fn] = _method(fn, method)
    for fn, handler in _FALLBACKS.items():
        if fn.__name__ not in names:
            out[fn] = _checked(fn, handler)
    for fn, handler in _EXPLICIT.items():
        out[fn] = _checked(fn, handler)
    from .variable import Variable
    for name in dir(Variable):          # numpy's own fallback: np.f(x, ...) calls x.f(...)
        fn = getattr(np, name, None)
        if name.startswith("_") or fn is None or fn in out or isinstance(fn, np.ufunc) or \
                not callable(fn) or not callable(getattr(Variable, name)):
            continue
        out[fn] = _variable_method(fn, name)
    return out


def _method_names() -> list[str]:
    """The registered primitives and the other public methods of the primitive families."""
    from .primitives import PrimitiveMethods
    names = [n for n in REGISTRY if callable(getattr(PrimitiveMethods, n, None))]
    names += sorted(n for n in dir(PrimitiveMethods) if not n.startswith("_") and n != "apply"
                    and n not in REGISTRY and callable(getattr(PrimitiveMethods, n)))
    return names


def _build_ufuncs() -> dict[np.ufunc, str]:
    out = {}
    for name in _method_names():
        fn = getattr(np, name, None)
        if isinstance(fn, np.ufunc) and name not in ("equal", "not_equal"):
            out.setdefault(fn, name)
    for fn, name in _UFUNC_ALIASES.items():
        if name in REGISTRY:
            out[fn] = name
    return out


# ---------------------------------------------------------------- generated entries


def _method(func: Callable, name: str) -> Handler:
    """A handler calling the Ops method ``name`` with func's arguments mapped by name."""
    from .primitives import PrimitiveMethods
    method = getattr(PrimitiveMethods, name)
    msig = inspect.signature(method)
    mparams = [p for p in msig.parameters.values() if p.name not in ("self", "name")]
    mnames = [p.name for p in mparams]
    nsig = inspect.signature(func)
    nparams = list(nsig.parameters.values())
    nnames = {p.name for p in nparams}
    rename = {}
    for i, p in enumerate(nparams):
        if p.name in mnames:
            rename[p.name] = p.name
        elif i < len(mparams) and mparams[i].name not in nnames and p.kind is not p.VAR_KEYWORD:
            rename[p.name] = mparams[i].name
    shown = f"op.{name}({', '.join(mnames)})"

    def handler(ops: Any, *args: Any, **kwargs: Any) -> Any:
        bound = _bind(func, nsig, args, kwargs)
        call_args: list = []
        call_kwargs: dict = {}
        for pname, value in bound.arguments.items():
            p = nsig.parameters[pname]
            if p.kind is p.VAR_POSITIONAL:
                call_args.extend(value)
                continue
            items = value.items() if p.kind is p.VAR_KEYWORD else [(pname, value)]
            for key, v in items:
                target = rename.get(key)
                if target is not None and p.kind is not p.VAR_KEYWORD:
                    call_kwargs[target] = v
                elif not _neutral(key, v, p.default):
                    raise ArgumentError(f"{qualname(func)}: {key}={_short(v)} is not supported "
                                        f"on Variables ({_names(args, kwargs)}); it records "
                                        f"as {shown}")
        try:
            msig.bind(ops, *call_args, **call_kwargs)
        except TypeError as e:
            raise ArgumentError(f"{qualname(func)} on Variables ({_names(args, kwargs)}) records "
                                f"as {shown}: {e}") from None
        return method(ops, *call_args, **call_kwargs)

    return handler


def _variable_method(func: Callable, name: str) -> Handler:
    """A handler calling the Variable method ``name`` on func's first argument, the rest by
    name (what numpy does for an object that is not an ndarray: ``np.var(x)`` is ``x.var()``)."""
    nsig = inspect.signature(func)
    first = next(iter(nsig.parameters))

    def handler(ops: Any, *args: Any, **kwargs: Any) -> Any:
        bound = _bind(func, nsig, args, kwargs)
        arguments = dict(bound.arguments)
        x = arguments.pop(first)
        if not isinstance(x, NumpyFunctions):
            raise ArgumentError(f"{qualname(func)} records on Variables only when its first "
                                f"argument is one, as {first}.{name}(...) "
                                f"({_names(args, kwargs)})")
        kw: dict = {}
        for key, value in arguments.items():
            if nsig.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
                kw.update(value)
            else:
                kw[key] = value
        method = getattr(x, name)
        try:
            inspect.signature(method).bind(**kw)
        except TypeError as e:
            raise ArgumentError(f"{qualname(func)} on Variables ({_names(args, kwargs)}) records "
                                f"as {x.name}.{name}(...): {e}") from None
        return method(**kw)

    return handler


def _checked(func: Callable, handler: Handler) -> Handler:
    """An explicit handler whose arguments are checked against its own signature first."""
    sig = inspect.signature(handler)

    def checked(ops: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            sig.bind(ops, *args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{qualname(func)} on Variables ({_names(args, kwargs)}): {e} "
                                f"(supported: {_signature_text(sig)})") from None
        return handler(ops, *args, **kwargs)

    return checked


def _bind(func: Callable, sig: inspect.Signature, args: tuple, kwargs: dict):
    try:
        return sig.bind(*args, **kwargs)
    except TypeError as e:
        raise ArgumentError(f"{qualname(func)}: {e}") from None


def _neutral(key: str, value: Any, default: Any) -> bool:
    if value is default:
        return True
    simple = (bool, int, float, str, type(None))
    if type(value) in simple and type(default) is type(value) and value == default:
        return True
    if key == "optimize":            # einsum's contraction order: the same result
        return True
    return key in _NEUTRAL and type(value) in simple and value == _NEUTRAL[key]


def _signature_text(sig: inspect.Signature) -> str:
    return ", ".join(str(p) for p in list(sig.parameters.values())[1:])

# ---------------------------------------------------------------- explicit entries


class SlogdetResult(NamedTuple):
    """numpy's (sign, logabsdet): the sign is a constant, logabsdet is recorded."""

    sign: Any
    logabsdet: Any


def _slogdet(ops, a):
    return SlogdetResult(np.linalg.slogdet(value_of(a)).sign, ops.slogdet(a))


def _norm(ops, x, ord=None, axis=None, keepdims=False):  # noqa: A002 - numpy's name
    nd = len(shape_of(x)) if axis is None else (1 if isinstance(axis, (int, np.integer))
                                                 else len(axis))
    if not (ord is None or ord == 2 and nd == 1 or ord == "fro" and nd == 2):
        raise ArgumentError(f"np.linalg.norm: ord={ord!r} is not supported on Variables "
                            f"({_names((x,), {})}); the 2-norm of vectors and the Frobenius "
                            "norm of matrices record (ord=None, 2 or 'fro')")
    return ops.norm(x, axis=axis, keepdims=keepdims)


def _vector_norm(ops, x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    if ord != 2:
        raise ArgumentError(f"np.linalg.vector_norm: ord={ord!r} is not supported on Variables "
                            f"({_names((x,), {})}); ord=2 records")
    return ops.norm(x, axis=axis, keepdims=keepdims)


def _matrix_norm(ops, x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    if ord != "fro":
        raise ArgumentError(f"np.linalg.matrix_norm: ord={ord!r} is not supported on Variables "
                            f"({_names((x,), {})}); ord='fro' records")
    return ops.norm(x, axis=(-2, -1), keepdims=keepdims)


def _swap_last(ops, x):
    nd = len(shape_of(x))
    if nd < 2:
        raise ArgumentError(f"np.linalg.matrix_transpose needs at least 2 axes "
                            f"({_names((x,), {})})")
    return ops.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matrix_transpose(ops, x, /):
    return _swap_last(ops, x)


def _multi_dot(ops, arrays, *, out=None):
    if out is not None or len(arrays) < 2:
        raise ArgumentError("np.linalg.multi_dot on Variables takes two or more arrays and no out=")
    result = arrays[0]
    for a in arrays[1:]:
        result = ops.matmul(result, a)
    return result


def _vecdot(ops, x1, x2, /, *, axis=-1):
    return ops.sum(ops.mul(x1, x2), axis=axis)


def _polyval(ops, p, x):
    """Horner's rule: p[0] x^(n-1) + ... + p[n-1], recorded (p may be a Variable too)."""
    if not isinstance(p, NumpyFunctions):
        p = np.asarray(p, dtype=float)
    if len(shape_of(p)) != 1 or shape_of(p)[0] == 0:
        raise ArgumentError(f"np.polyval: p must be a non-empty 1-D array on Variables "
                            f"({_names((p, x), {})})")
    n = shape_of(p)[0]
    if n == 1:
        return ops.add(ops.mul(x, 0.0), p[0])
    result = ops.add(ops.mul(x, p[0]), p[1])
    for k in range(2, n):
        result = ops.add(ops.mul(result, x), p[k])
    return result


def _like(fill: float) -> Handler:
    def like(ops, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        return np.full(shape_of(a) if shape is None else shape, fill,
                       dtype=getattr(a, "dtype", np.float64) if dtype is None else dtype)
    return like


def _shape(ops, a):
    return shape_of(a)


def _ndim(ops, a):
    return len(shape_of(a))


def _size(ops, a, axis=None):
    s = shape_of(a)
    return int(np.prod(s)) if axis is None else s[axis]


def _dot(ops, a, b, out=None):
    if out is not None:
        raise ArgumentError(f"np.dot: out= is not supported on Variables ({_names((a, b), {})})")
    na, nb = len(shape_of(a)), len(shape_of(b))
    if na == 0 or nb == 0:
        return ops.mul(a, b)
    if na > 2 or nb > 2:
        raise ArgumentError(f"np.dot of arrays with more than 2 axes does not record "
                            f"({_names((a, b), {})}); use np.matmul or np.einsum")
    return ops.matmul(a, b)


def _outer(ops, a, b, out=None):
    if out is not None:
        raise ArgumentError(f"np.outer: out= is not supported on Variables ({_names((a, b), {})})")
    return ops.mul(ops.reshape(a, (-1, 1)), ops.reshape(b, (1, -1)))


_RENAMED: dict[Callable, str] = {
    np.broadcast_to: "expand", np.amax: "max", np.amin: "min", np.linalg.matmul: "matmul",
    np.linalg.eigvalsh: "eigvalsh", np.linalg.svdvals: "svdvals",
}
_EXPLICIT: dict[Callable, Handler] = {
    np.linalg.slogdet: _slogdet, np.linalg.norm: _norm, np.linalg.vector_norm: _vector_norm,
    np.linalg.matrix_norm: _matrix_norm, np.linalg.matrix_transpose: _matrix_transpose,
    np.linalg.multi_dot: _multi_dot, np.linalg.vecdot: _vecdot, np.polyval: _polyval,
    np.zeros_like: _like(0.0), np.ones_like: _like(1.0), np.shape: _shape, np.ndim: _ndim,
    np.size: _size,
}
# numpy's names of ufuncs whose primitive is named differently
_UFUNC_ALIASES = {np.subtract: "sub", np.multiply: "mul", np.true_divide: "div",
                  np.negative: "neg", np.power: "pow", np.absolute: "abs"}
# compositions used until a primitive family defines a method of the same name
_FALLBACKS: dict[Callable, Handler] = {np.dot: _dot, np.outer: _outer}

# ---------------------------------------------------------------- helpers


def _variables(args: Any, found: list) -> list:
    if isinstance(args, NumpyFunctions):
        found.append(args)
    elif isinstance(args, (list, tuple)):
        for a in args:
            _variables(a, found)
    elif isinstance(args, dict):
        for a in args.values():
            _variables(a, found)
    return found


def _ops_of(args: tuple, kwargs: dict) -> Any:
    return _variables([args, kwargs], [])[0].ops


def _names(args: Any, kwargs: dict) -> str:
    vs = _variables([args, kwargs], [])
    return ", ".join(f"{v.name} with shape {v.shape}" for v in vs) or "no Variables"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
