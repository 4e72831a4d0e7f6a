"""Module: parameters, buffers and children registered by attribute, in both habits.

PyTorch habit: a module holds ``sg.Parameter`` objects (Variables bound to no Ops that live
across steps); ``loss.backward()`` fills their ``.grad`` and an optimiser assigns new values.
JAX habit: ``module.params()`` is a dict of plain arrays and ``module.apply(params, x)`` (or
``functional_call(module, params, x)``) runs the forward with those values in place of the
module's own, so ``sg.value_and_grad(loss)(params, batch)`` differentiates with respect to
them. A forward runs on Variables of any Ops and, given only plain arrays (``apply`` with
arrays, or ``predict``), on plain arrays: ``ops_of`` picks the one Ops of the Variables
(parameters join it; the transforms' answer, ``transforms.arguments.recording_ops``), or
``VALUES``, which records nothing. ``module(x)`` with a plain ``x`` records on the implicit
Ops of its parameters, freed by reference counting when the step's last reference goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ..engine.batching import Batched, wrap
from ..engine.params import Parameter
from ..engine.variable import Variable
from ..errors import ArgumentError, ShapeError
from ..primitives import VALUES, PrimitiveMethods
from ..transforms.arguments import recording_ops

__all__ = ["Module", "functional_call", "ops_of", "value_of"]


def ops_of(*xs: Any) -> PrimitiveMethods:
    """What to compute with: the Ops recording the Variables among ``xs``, else ``VALUES``."""
    ops = recording_ops("ops_of", xs)
    return VALUES if ops is None else ops


def value_of(x: Any) -> np.ndarray:
    """The numpy value of a Variable, or the array itself."""
    return getattr(x, "raw", x)


def shape_of(x: Any) -> tuple:
    """The shape a function sees: one example's under vmap (never the stack's), else x's own."""
    shape = getattr(x, "shape", None)
    return np.shape(x) if shape is None else tuple(shape)


def batched(*xs: Any) -> bool:
    """True when one of ``xs`` stands for an example of a batch (inside ``sg.vmap``)."""
    return any(isinstance(x, Batched) for x in xs)


def per_example(o: PrimitiveMethods, x: Any, draw: Callable[[tuple], np.ndarray]) -> Any:
    """``draw(shape)``, a constant, for x; under vmap one draw for every example of x, as a
    batched value of x's levels (examples differ, as a loop over them would draw)."""
    levels = []
    while isinstance(x, Batched):
        levels.append(x.level)
        x = x.inner
    if not levels:
        return draw(shape_of(x))
    value = o.leaf(draw(np.shape(value_of(x))), None, False)   # the stack: each example's own
    for level in reversed(levels):
        value = wrap(value, level)
    return value


def _new_parameter(value: Any, name: str) -> Parameter:
    """A trainable parameter holding a float copy of ``value``."""
    arr = np.array(value_of(value))
    return Parameter(arr if arr.dtype.kind == "f" else arr.astype(np.float64), name=name)


class Module:
    """A layer or model: parameters, buffers and child modules registered by attribute."""

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    # ------------------------------------------------------------ registration

    def __setattr__(self, name: str, value: Any) -> None:
        if "_modules" not in self.__dict__:
            raise ArgumentError(f"{type(self).__name__}: call super().__init__() before "
                                "assigning attributes")
        if name in self._parameters and not isinstance(value, Parameter):
            raise ArgumentError(f"{type(self).__name__}.{name} is a parameter: give it a new "
                                f"value with .assign(array) (or register_parameter), not a "
                                f"{type(value).__name__}")
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        if isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Parameter):
            self._parameters[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def register_parameter(self, name: str, value: Any) -> Any:
        """Add a trainable parameter holding a copy of ``value``; returns it."""
        self.__dict__.pop(name, None)
        self._parameters[name] = _new_parameter(value, name)
        return self._parameters[name]

    def register_buffer(self, name: str, value: Any) -> None:
        """Add state that is saved but not trained (BatchNorm's running statistics)."""
        self.__dict__.pop(name, None)
        self._buffers[name] = np.array(value, dtype=np.float64)

    # ------------------------------------------------------------ traversal

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every descendant with its dotted name ('' for this one)."""
        stack = [(prefix, self)]
        while stack:
            name, m = stack.pop()
            yield name, m
            children = [(f"{name}.{k}" if name else k, c) for k, c in m._modules.items()]
            stack.extend(reversed(children))

    def named_parameters(self) -> Iterator[tuple[str, Any]]:
        """Every parameter with its dotted name (``"0.weight"``), in registration order."""
        for name, m in self.named_modules():
            for k, p in m._parameters.items():
                yield (f"{name}.{k}" if name else k), p

    def parameters(self) -> list[Any]:
        """Every parameter, in the order of ``named_parameters``."""
        return [p for _, p in self.named_parameters()]

    def named_buffers(self) -> Iterator[tuple[str, np.ndarray]]:
        """Every buffer with its dotted name."""
        for name, m in self.named_modules():
            for k, b in m._buffers.items():
                yield (f"{name}.{k}" if name else k), b

    def children(self) -> list[Module]:
        """The direct child modules."""
        return list(self._modules.values())

    # ------------------------------------------------------------ modes and gradients

    def train(self, mode: bool = True) -> Module:
        """Training mode (BatchNorm uses batch statistics, Dropout drops) for all modules."""
        for _, m in self.named_modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Evaluation mode: running statistics, no dropout."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Forget the accumulated gradients (``p.grad = None`` for every parameter)."""
        for p in self.parameters():
            if isinstance(p, Variable):
                p.grad = None

    # ------------------------------------------------------------ state as numpy arrays

    def params(self) -> dict[str, np.ndarray]:
        """The parameters' current values as a flat dict of fresh arrays (the JAX habit)."""
        return {k: np.array(value_of(p)) for k, p in self.named_parameters()}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters and buffers as fresh numpy arrays, keyed by dotted name."""
        state = self.params()
        state.update((k, np.array(b)) for k, b in self.named_buffers())
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Set parameters and buffers from arrays keyed by dotted name (all must be present)."""
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = sorted(set(own) - set(state))
        extra = sorted(set(state) - set(own))
        if missing or extra:
            raise ArgumentError(f"load_state_dict: missing keys {missing}, unexpected keys "
                                f"{extra}")
        for key, value in state.items():
            arr = np.asarray(value_of(value))
            if arr.shape != np.shape(value_of(own[key])):
                raise ShapeError(f"load_state_dict: {key} has shape {arr.shape}, the module's "
                                 f"has shape {np.shape(value_of(own[key]))}")
        for key, value in state.items():
            owner, leaf = self._owner(key)
            if leaf in owner._buffers:
                owner._buffers[leaf] = np.array(value_of(value), dtype=np.float64)
            else:
                _assign(owner, leaf, np.asarray(value_of(value)))

    def _owner(self, key: str) -> tuple[Module, str]:
        """The module holding the dotted ``key`` and the key's last part."""
        *path, leaf = key.split(".")
        m = self
        for part in path:
            if part not in m._modules:
                raise ArgumentError(f"{type(self).__name__} has no submodule {part!r} "
                                    f"(in {key!r})")
            m = m._modules[part]
        if leaf not in m._parameters and leaf not in m._buffers:
            raise ArgumentError(f"{type(self).__name__} has no parameter or buffer {key!r}")
        return m, leaf

    # ------------------------------------------------------------ running

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        """The forward on the parameters' current values as plain arrays: nothing recorded.

        ``model(x)`` records (its parameters are Variables), which training needs; this is
        the forward for evaluation, on plain arrays in and out.
        """
        return functional_call(self, {k: value_of(p) for k, p in self.named_parameters()},
                               *args, **kwargs)

    def apply(self, params: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        """The forward with ``params`` (dotted name -> array or Variable) in place of its own."""
        return functional_call(self, params, *args, **kwargs)

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({k}): " + repr(m).replace("\n", "\n  ")
                        for k, m in self._modules.items())
        return f"{type(self).__name__}({self.extra_repr()}{inner}{chr(10) if inner else ''})"

    def extra_repr(self) -> str:
        """What the layer's repr shows between its parentheses."""
        return ""


def _assign(owner: Module, leaf: str, value: np.ndarray) -> None:
    p = owner._parameters[leaf]
    p.assign(np.array(value, dtype=p.dtype))


def _shape(x: Any) -> tuple:
    """``np.shape(x)``, read from ``x.shape`` where that is a tuple (for a Variable, numpy's
    dispatch to the same answer costs five times more)."""
    shape = getattr(x, "shape", None)
    return shape if type(shape) is tuple else np.shape(x)


def _swap(module: Module, params: Mapping[str, Any]) -> list:
    """Put ``params`` in place of the module's own; returns what ``_restore`` puts back."""
    saved: list = []
    try:
        for key, value in params.items():
            owner, leaf = module._owner(key)
            own = owner._parameters
            if leaf not in own:
                raise ArgumentError(f"functional_call: {key!r} is a buffer, not a parameter")
            old = own[leaf]
            if _shape(value) != _shape(old):
                raise ShapeError(f"functional_call: {key} has shape {np.shape(value)}"
                                 f", the module's has shape {np.shape(value_of(old))}")
            saved.append((own, leaf, old))
            own[leaf] = value
    except BaseException:
        _restore(saved)
        raise
    return saved


def _restore(saved: list) -> None:
    for own, leaf, old in reversed(saved):
        own[leaf] = old


def functional_call(module: Module, params: Mapping[str, Any], *args: Any,
                    **kwargs: Any) -> Any:
    """``module(*args)`` with ``params`` (dotted name -> array or Variable) in place of its own.

    The module's parameters are restored afterwards, even if the forward raises; keys it
    does not name keep the module's values. This is the form for ``sg.grad`` and MAML.
    """
    if not isinstance(params, Mapping):
        raise ArgumentError(f"functional_call: params must be a dict of dotted names, got "
                            f"{type(params).__name__}")
    saved = _swap(module, params)      # (not a context manager: one fewer frame per call)
    try:
        return module(*args, **kwargs)
    finally:
        _restore(saved)

