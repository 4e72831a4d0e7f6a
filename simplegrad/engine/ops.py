"""Ops: the object a user holds, which hands every call to its Recorder (recorder.py).

Variables hold the recorder, never the Ops, so nothing in the graph points back at the Ops:
when the user lets go of it, the recorder learns so (``Recorder.orphan``) and stops holding its
entries, and a dropped tape is freed by reference counting alone (no cyclic garbage collector),
while every Variable still alive keeps working (``(sg.Ops().var(1.0) * 2).backward()``).
"""

from __future__ import annotations

import weakref
from types import MethodType
from typing import Any

from .recorder import Recorder


class _Kind(type):
    """``isinstance(x, Ops)`` holds for an Ops and for the recorder behind one (``x.ops`` is
    the recorder once no Ops holds it)."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return type.__instancecheck__(cls, obj) or isinstance(obj, Recorder)

    def __getattr__(cls, name: str) -> Any:     # Ops.grad, hasattr(Ops, "sum"): the methods
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(Recorder, name)


class Ops(metaclass=_Kind):
    """One tape and one v-counter: every primitive called on it records one entry.

    ``borrow=True`` records the caller's float arrays (leaves and constants) as read-only views,
    not copies: for an Ops that lives no longer than the call that made it. ``keep_trace=False``
    holds the entries weakly and keeps no events: the graph is freed by reference counting when
    its last Variable goes; there is then no complete trace to print. ``simplify=True`` records
    with the rules of ``sg.simplify`` (shared subexpressions, identities removed, sweeps pruned).

    While you hold an Ops its tape keeps every entry, for the trace. Once nothing holds it, the
    tape keeps only what live Variables reach (its trace can no longer be printed whole, and a
    ``.grad`` keeps its value, not its history), so a fresh ``sg.Ops()`` per step needs no
    ``release()`` and no garbage collector.
    """

    __slots__ = ("_rec", "__dict__", "__weakref__")

    def __init__(self, echo: bool = False, simplify: bool = False, keep_trace: bool = True,
                 borrow: bool = False):
        rec = Recorder(echo=echo, simplify=simplify, keep_trace=keep_trace, borrow=borrow)
        object.__setattr__(self, "_rec", rec)
        rec.face = weakref.ref(self, _Orphaned(weakref.ref(rec)))

    @property
    def recorder(self) -> Recorder:
        """The recorder behind this Ops (what its Variables hold as ``.rec``)."""
        return self._rec

    def __getattr__(self, name: str) -> Any:
        if name == "_rec" or name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._rec, name)
        if type(value) is MethodType:       # a primitive, bound to the recorder once: later
            self.__dict__[name] = value     # calls find it here and cost what a call costs
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._rec, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._rec, name)

    def __dir__(self) -> list[str]:
        return sorted(set(dir(type(self._rec))) | {"recorder"})

    def __repr__(self) -> str:
        return repr(self._rec)

    def __enter__(self) -> Ops:
        return self

    def __exit__(self, *exc: object) -> None:
        self._rec.release()


def _forwarder(name: str, method: Any) -> Any:
    """``Ops.<name>``: the recorder's method, called with the Ops held for the whole call (a
    trace read from a temporary, ``sg.trace(f, x).format_trace()``, is still whole)."""
    def forward(self: Ops, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._rec, name)(*args, **kwargs)
    forward.__name__ = name
    forward.__qualname__ = f"Ops.{name}"
    forward.__doc__ = method.__doc__
    forward.__wrapped__ = method        # (inspect.signature shows the recorder's)
    return forward


for _name, _member in list(vars(Recorder).items()):     # the primitives come by __getattr__
    if callable(_member) and not _name.startswith("_") and _name not in ("orphan", "within"):
        setattr(Ops, _name, _forwarder(_name, _member))


def recorder_of(ops: Any) -> Any:
    """The recorder behind ``ops`` (an Ops), or ``ops`` itself (a recorder, FREE)."""
    return ops._rec if type(ops) is Ops else ops


class _Orphaned:
    """Told when an Ops dies: its recorder, if alive and not held by a newer Ops, is orphaned.

    Holds the recorder weakly, so the recorder -> weak reference -> this -> recorder path
    is no cycle."""

    __slots__ = ("rec",)

    def __init__(self, rec: weakref.ref) -> None:
        self.rec = rec

    def __call__(self, face: weakref.ref) -> None:
        rec = self.rec()
        if rec is not None and rec.face is face:
            rec.face = None
            rec.orphan()
