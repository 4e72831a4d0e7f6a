"""Optimisers: SGD (momentum, Nesterov, weight decay), Adam and AdamW, in both habits.

Each optimiser states its update once, per parameter, as a rule computing with ``o`` (an Ops
when its inputs are Variables, ``VALUES`` on plain arrays), so the same text serves:

- the PyTorch habit: ``opt = SGD(model.parameters(), lr=0.1)``; after ``loss.backward()``,
  ``opt.step()`` assigns each parameter its new value from its ``.grad`` (parameters whose
  ``.grad`` is None are skipped, as PyTorch does) and ``opt.zero_grad()`` resets the grads;
- the JAX habit: ``state = opt.init(params)`` and ``params, state = opt.update(grads, state,
  params)`` for any pytree of arrays, returning new values and touching nothing. Given
  Variables it records the update, so an outer gradient flows through inner optimisation
  steps (MAML).

The updates follow PyTorch's definitions step for step (``torch.optim.SGD``, ``Adam``,
``AdamW`` with their default flags): the first momentum buffer is the gradient itself, Adam's
bias corrections divide the step size and the root of the second moment, AdamW decays the
parameter by ``1 - lr * weight_decay`` before the Adam step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .engine.params import Parameter
from .errors import ArgumentError, GraphError, ShapeError
from .nn.module import value_of
from .primitives import VALUES, PrimitiveMethods
from .pytree import tree_flatten, tree_unflatten
from .transforms.arguments import recording_ops

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class Optimizer:
    """The shared machinery: parameters for ``step``, pytree state for ``init``/``update``."""

    slots: tuple[str, ...] = ()

    def __init__(self, params: Iterable[Any] | None, lr: float):
        if not lr > 0:
            raise ArgumentError(f"{type(self).__name__}: lr must be positive, got {lr!r}")
        self.lr = float(lr)
        self.params = None if params is None else list(params)
        if self.params is not None:
            for p in self.params:
                if not isinstance(p, Parameter):
                    raise ArgumentError(
                        f"{type(self).__name__}: step() needs sg.Parameter objects (from "
                        f"module.parameters()), got a {type(p).__name__}; for arrays use "
                        "init() and update()")
        self._slots: list[dict | None] = [None] * len(self.params or ())

    # ------------------------------------------------------------ the rule, per parameter

    def rule(self, o: PrimitiveMethods, p: Any, g: Any, slot: dict, step: int) -> tuple[Any, dict]:
        """The new value of one parameter and its new slots, at step ``step`` (0 first)."""
        raise NotImplementedError

    def _empty_slot(self, p: Any) -> dict:
        return {name: np.zeros(np.shape(value_of(p))) for name in self.slots}

    # ------------------------------------------------------------ PyTorch habit

    def step(self) -> None:
        """Update every parameter that has a ``.grad`` in place (``p.assign``)."""
        if self.params is None:
            raise ArgumentError(f"{type(self).__name__}.step: this optimiser was made without "
                                "parameters; use update(grads, state, params)")
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = value_of(p.grad)
            slot = self._slots[i] or self._empty_slot(p)
            step = slot.pop("_step", 0)
            new, slot = self.rule(VALUES, value_of(p), g, slot, step)
            slot["_step"] = step + 1
            self._slots[i] = slot
            p.assign(np.asarray(new, dtype=p.dtype))

    def zero_grad(self) -> None:
        """Reset the gradients of the parameters (``p.grad = None``)."""
        for p in self.params or ():
            p.grad = None

    # ------------------------------------------------------------ JAX habit

    def init(self, params: Any) -> dict:
        """The optimiser state for a pytree of parameters: a step count and zero slots."""
        leaves, treedef = tree_flatten(params)
        return {"step": 0, "slots": tree_unflatten(treedef, [self._empty_slot(p)
                                                             for p in leaves])}

    def update(self, grads: Any, state: dict, params: Any) -> tuple[Any, dict]:
        """``(new_params, new_state)`` for gradients and parameters of one pytree structure."""
        p_leaves, p_def = tree_flatten(params)
        g_leaves, g_def = tree_flatten(grads)
        if g_def != p_def:
            raise ArgumentError(f"{type(self).__name__}.update: grads have structure {g_def} "
                                f"but params have {p_def}")
        if not isinstance(state, dict) or "step" not in state or "slots" not in state:
            raise ArgumentError(f"{type(self).__name__}.update: state must come from init() "
                                "or a previous update()")
        s_leaves = _slot_leaves(state["slots"], p_def)
        step = state["step"]
        new_p, new_s = [], []
        for p, g, slot in zip(p_leaves, g_leaves, s_leaves):
            if np.shape(value_of(g)) != np.shape(value_of(p)):
                raise ShapeError(f"{type(self).__name__}.update: a gradient has shape "
                                 f"{np.shape(value_of(g))} but its parameter has "
                                 f"{np.shape(value_of(p))}")
            xs = (p, g, *slot.values())
            o = recording_ops(f"{type(self).__name__}.update", xs)
            if o is None:
                o = VALUES
            elif any(getattr(x, "rec", o) is not o for x in xs):   # free beside bound: refused
                raise GraphError(f"{type(self).__name__}.update: a parameter, its gradient "
                                 "and its slots belong to different Ops")
            q, s = self.rule(o, p, g, dict(slot), step)
            new_p.append(q)
            new_s.append(s)
        return (tree_unflatten(p_def, new_p),
                {"step": step + 1, "slots": tree_unflatten(p_def, new_s)})


def _slot_leaves(slots: Any, p_def: Any) -> list[dict]:
    """The per-parameter slot dicts of a state, in the parameters' leaf order."""
    out: list[dict] = []
    stack = [(slots, p_def)]       # iterative, and no self-referencing closure (no cycle)
    while stack:
        node, d = stack.pop()
        if d.kind == "leaf":
            out.append(node)
        elif d.kind is dict:
            stack.extend(reversed([(node[k], c) for k, c in zip(d.meta, d.children)]))
        elif d.kind is not None:
            stack.extend(reversed(list(zip(node, d.children))))
    return out


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum, weight decay."""

    def __init__(self, params: Iterable[Any] | None = None, lr: float = 0.01,
                 momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ArgumentError("SGD: Nesterov momentum needs momentum > 0 and dampening 0")
        super().__init__(params, lr)
        self.momentum, self.dampening = float(momentum), float(dampening)
        self.weight_decay, self.nesterov = float(weight_decay), bool(nesterov)
        self.slots = ("momentum",) if momentum else ()

    def rule(self, o: PrimitiveMethods, p: Any, g: Any, slot: dict, step: int) -> tuple[Any, dict]:
        """p - lr * d, d the (Nesterov) momentum buffer or the decayed gradient."""
        if self.weight_decay:
            g = o.add(g, o.mul(p, self.weight_decay))
        if self.momentum:
            if step == 0:
                buf = g
            else:
                buf = o.add(o.mul(slot["momentum"], self.momentum),
                            o.mul(g, 1.0 - self.dampening))
            slot["momentum"] = buf
            g = o.add(g, o.mul(buf, self.momentum)) if self.nesterov else buf
        return o.sub(p, o.mul(g, self.lr)), slot


class Adam(Optimizer):
    """Adam (Kingma and Ba) with PyTorch's bias corrections; weight decay as an L2 gradient."""

    slots = ("m", "v")
    decoupled = False

    def __init__(self, params: Iterable[Any] | None = None, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ArgumentError(f"{type(self).__name__}: betas must lie in [0, 1), got {betas}")
        self.betas = (float(b1), float(b2))
        self.eps, self.weight_decay = float(eps), float(weight_decay)

    def rule(self, o: PrimitiveMethods, p: Any, g: Any, slot: dict, step: int) -> tuple[Any, dict]:
        """p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
        b1, b2 = self.betas
        t = step + 1
        if self.weight_decay:
            if self.decoupled:
                p = o.mul(p, 1.0 - self.lr * self.weight_decay)
            else:
                g = o.add(g, o.mul(p, self.weight_decay))
        m = o.add(o.mul(slot["m"], b1), o.mul(g, 1.0 - b1))
        v = o.add(o.mul(slot["v"], b2), o.mul(o.mul(g, g), 1.0 - b2))
        denom = o.add(o.div(o.sqrt(v), np.sqrt(1.0 - b2 ** t)), self.eps)
        step_size = self.lr / (1.0 - b1 ** t)
        return o.sub(p, o.mul(o.div(m, denom), step_size)), {"m": m, "v": v}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): p *= 1 - lr * weight_decay."""

    decoupled = True

    def __init__(self, params: Iterable[Any] | None = None, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(params, lr, betas, eps, weight_decay)
