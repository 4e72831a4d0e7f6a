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
- explicit (numpy_entries.py): numpy functions whose name or signature differs
  (``np.broadcast_to`` is ``expand``, ``np.linalg.slogdet`` returns (sign, logabsdet),
  ``np.linalg.norm`` takes ``ord``, the array API's ``np.linalg.trace`` works on the last two
  axes, ...) and a few compositions of primitives (``np.polyval``, ``np.linalg.multi_dot``).

A numpy function with no entry raises ``sg.ArgumentError`` naming it: numpy's own code would
either drop the Variable from the tape or fail with a generic TypeError.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ArgumentError
from . import numpy_arrays, numpy_signal, numpy_statistics
from .alternatives import NEAREST, instead
from .core import REGISTRY
from .methods import PrimitiveMethods
from .numpy_entries import EXPLICIT, RENAMED, UFUNC_ALIASES, Handler, describe

# np.linalg functions of the array API whose semantics differ from np.<name> of the same name
ARRAY_API = frozenset({"cross", "diagonal", "matmul", "matrix_transpose", "outer", "tensordot",
                        "trace", "vecdot", "vector_norm", "matrix_norm", "svdvals"})
# np.linalg functions that share a name with an Ops method of another meaning (op.cond is a
# branch, np.linalg.cond a matrix's condition number): no entry
ELSEWHERE = frozenset({"cond"})
# scipy.special's ufuncs that record the primitive of the same name, when SciPy is loaded
SCIPY_SPECIAL = {"erf": "erf", "erfc": "erfc", "erfinv": "erfinv", "betainc": "betainc",
                 "gammaln": "gammaln", "digamma": "digamma", "psi": "digamma"}
# arguments that change nothing about the result at these values
_NEUTRAL = {"out": None, "dtype": None, "where": True, "casting": "same_kind", "subok": False,
            "order": "C", "copy": None, "device": None}


class NumpyFunctions:
    """Variable mixin: numpy functions called on Variables record the matching primitive."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # the array class itself (the engine's Variable: numpy hands it the ufuncs), whose
        # methods numpy's own fallback calls; its subclasses inherit the table
        if "__array_ufunc__" in vars(cls) and _CACHE["array"] is None:
            _CACHE["array"], _CACHE["size"] = cls, -1

    def __array_function__(self, func: Callable, types: tuple, args: tuple,
                           kwargs: dict) -> Any:
        query = _QUERIES.get(func)
        if query is not None and not kwargs and len(args) == 1:
            return query(args[0].shape)     # np.shape(x): asked every step by layers
        if not all(issubclass(t, (NumpyFunctions, np.ndarray)) for t in types):
            return NotImplemented       # another library's array: let it answer
        handler = table().get(func)
        if handler is None:
            raise ArgumentError(f"{qualname(func)} has no simplegrad rule for Variables "
                                f"({describe(args, kwargs)}){instead(func.__name__)}")
        return handler(self.rec, *args, **kwargs)      # self: one of the Variable arguments


# ---------------------------------------------------------------- what records instead


def ufunc_refusal(ufunc: np.ufunc, method: str, kwargs: dict, name: str) -> str:
    """Why numpy's ``ufunc`` (``.method``, ``kwargs``) does not record on ``name``; what does."""
    called = ufunc.__name__ + ("" if method == "__call__" else f".{method}")
    given = f" with {', '.join(kwargs)}" if kwargs else ""
    if method == "__call__" and "out" in kwargs:
        tail = (f"; what records instead: y = np.{ufunc.__name__}(...) without out= (a recorded "
                "value is never written into)")
    else:
        tail = instead(called if called in NEAREST else f"scipy.special.{ufunc.__name__}"
                       if _from_scipy(ufunc) else called)
    return f"numpy's {called}{given} has no simplegrad rule for {name}{tail}"


def array_refusal(name: str, dtype: Any) -> str:
    """Why ``name`` does not convert to a numpy array (np.asarray, np.array([...]), a library
    converting its argument), and what records instead."""
    if dtype is not None and np.dtype(dtype).kind in "biu":
        return f"{name} is a Variable: an array of dtype {np.dtype(dtype)} of it{instead('index')}"
    caller = _foreign_caller()
    if caller is not None:
        return (f"{caller} converts {name} to a numpy array, which drops it from the tape"
                f"{instead(caller)}")
    return (f"{name} is a Variable: a numpy array made from it would drop it from the tape"
            f"{instead('array')} (print or log {name}.item() or {name}.value)")


def _foreign_caller(depth: int = 16) -> str | None:
    """The public name of the nearest calling function that NEAREST knows (a library function
    such as scipy.special.logsumexp, which converts its argument with np.asarray)."""
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        module = frame.f_globals.get("__name__", "")
        public = ".".join(p for p in module.split(".") if not p.startswith("_"))
        name = f"{public}.{frame.f_code.co_name}"
        if name in NEAREST:
            return name
        frame = frame.f_back
    return None


def _from_scipy(ufunc: Any) -> bool:
    special = sys.modules.get("scipy.special")
    return special is not None and getattr(special, ufunc.__name__, None) is ufunc


# ---------------------------------------------------------------- the table

# np.shape, np.ndim, np.size of one Variable: answered before the table (no argument binding)
_QUERIES: dict[Callable, Callable[[tuple], Any]] = {
    np.shape: lambda s: s, np.ndim: len, np.size: math.prod}

_CACHE: dict[str, Any] = {"size": -1, "table": {}, "ufuncs": {}, "array": None}


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
    """The covered functions as docs/numpy.md shows them: backticked names, wrapped."""
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
        for space in (np, np.linalg, np.fft):
            fn = getattr(space, name, None)
            if fn is None or isinstance(fn, np.ufunc) or not callable(fn):
                continue
            if space is np.linalg and (name in ARRAY_API or name in ELSEWHERE) or fn in out:
                continue                    # a primitive's own name comes first
            out[fn] = _method(fn, name)
    for fn, method in RENAMED.items():
        if method in names:
            out[fn] = _method(fn, method)
    for entries in (EXPLICIT, numpy_arrays.ENTRIES, numpy_signal.ENTRIES,
                    numpy_statistics.ENTRIES):
        for fn, handler in entries.items():
            out[fn] = _checked(fn, handler)
    array = _CACHE["array"]     # numpy's own fallback: np.f(x, ...) calls x.f(...)
    for name in dir(array) if array is not None else ():
        fn = getattr(np, name, None)
        if name.startswith("_") or fn is None or fn in out or isinstance(fn, np.ufunc) or \
                not callable(fn) or not callable(getattr(array, name)):
            continue
        out[fn] = _variable_method(fn, name)
    return out


def _method_names() -> list[str]:
    """The registered primitives and the other public methods of the primitive families."""
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
    for fn, name in UFUNC_ALIASES.items():
        if name in REGISTRY:
            out[fn] = name
    return UfuncTable(out)


class UfuncTable(dict):
    """numpy's ufuncs -> Ops method; ``get`` also answers for scipy.special's ufuncs named in
    SCIPY_SPECIAL, found by identity in the loaded module (SciPy is never imported here)."""

    def get(self, ufunc: Any, default: Any = None) -> Any:
        """The Ops method recording ``ufunc``, else ``default``."""
        name = dict.get(self, ufunc)
        if name is not None:
            return name
        special = sys.modules.get("scipy.special")
        name = getattr(ufunc, "__name__", None)
        if special is not None and name in SCIPY_SPECIAL and getattr(special, name, None) is ufunc:
            return SCIPY_SPECIAL[name]
        return default


# ---------------------------------------------------------------- generated entries


def _method(func: Callable, name: str) -> Handler:
    """A handler calling the Ops method ``name`` with func's arguments mapped by name."""
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
    # the common call (leading positional arguments, keywords the method takes) skips binding
    positional = []
    for p in nparams:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) or p.name not in rename:
            break
        positional.append(rename[p.name])
    keywords = {k: v for k, v in rename.items()
                if nsig.parameters[k].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                               inspect.Parameter.KEYWORD_ONLY)}
    required = {p.name for p in mparams if p.default is p.empty and p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    def handler(ops: PrimitiveMethods, *args: Any, **kwargs: Any) -> Any:
        if len(args) <= len(positional) and all(k in keywords for k in kwargs):
            call = dict(zip(positional, args))
            for k, v in kwargs.items():
                call[keywords[k]] = v
            if len(call) == len(args) + len(kwargs) and required.issubset(call):
                return method(ops, **call)
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
                                        f"on Variables ({describe(args, kwargs)}); it records "
                                        f"as {shown}")
        try:
            msig.bind(ops, *call_args, **call_kwargs)
        except TypeError as e:
            raise ArgumentError(f"{qualname(func)} on Variables ({describe(args, kwargs)}) records "
                                f"as {shown}: {e}") from None
        return method(ops, *call_args, **call_kwargs)

    return handler


def _variable_method(func: Callable, name: str) -> Handler:
    """A handler calling the Variable method ``name`` on func's first argument, the rest by
    name (what numpy does for an object that is not an ndarray: ``np.var(x)`` is ``x.var()``)."""
    nsig = inspect.signature(func)
    first = next(iter(nsig.parameters))

    def handler(ops: PrimitiveMethods, *args: Any, **kwargs: Any) -> Any:
        bound = _bind(func, nsig, args, kwargs)
        arguments = dict(bound.arguments)
        x = arguments.pop(first)
        if not isinstance(x, NumpyFunctions):
            raise ArgumentError(f"{qualname(func)} records on Variables only when its first "
                                f"argument is one, as {first}.{name}(...) "
                                f"({describe(args, kwargs)})")
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
            raise ArgumentError(f"{qualname(func)} on Variables ({describe(args, kwargs)}) records "
                                f"as {x.name}.{name}(...): {e}") from None
        return method(**kw)

    return handler


def _checked(func: Callable, handler: Handler) -> Handler:
    """An explicit handler whose arguments, when the call fails with a TypeError, are checked
    against its own signature (a call that does not bind has run nothing)."""
    sig = inspect.signature(handler)

    def checked(ops: PrimitiveMethods, *args: Any, **kwargs: Any) -> Any:
        try:
            return handler(ops, *args, **kwargs)
        except TypeError:
            try:
                sig.bind(ops, *args, **kwargs)
            except TypeError as e:
                raise ArgumentError(f"{qualname(func)} on Variables ({describe(args, kwargs)}): "
                                    f"{e} (supported: {_signature_text(sig)})") from None
            raise

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

# ---------------------------------------------------------------- helpers


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
