"""Every registered primitive declares what its reverse-mode rules read (``Primitive.saves``).

For each primitive and check case, the entry is recorded on an ``Ops`` and every rule the
reverse sweeps run from it (each vjp rule, the masked vjp rules and the mask rule) is called
twice with the real operands and twice with the undeclared ones (the input entries not
saved, and the output unless saved) replaced by stand-ins that carry shape, dtype, ndim, size
and name and raise on any use of their value: once recording (``o`` the Ops, the entries'
values stand-ins), once values-only (``o`` a ``ValueOps``, the stand-ins arrays). The results
must be equal. Nothing here names an operation but the declared forms checked at the end.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.engine.variable import Entry, Variable
from simplegrad.primitives import HELD, REGISTRY, ValueOps
from simplegrad.primitives.core import normalize_saves
from tests.test_primitives import applying, case_id, sample

OUT = "out"


class UndeclaredReadError(AssertionError):
    """A rule read a value its primitive does not declare in ``saves``."""


class StandInReadError(Exception):
    """Raised by a stand-in when its value is used."""


# ---------------------------------------------------------------- stand-ins

class StandIn:
    """An array's shape, dtype, ndim and size and nothing else: any other use is logged in
    ``reads`` and raises."""

    __slots__ = ("shape", "dtype", "ndim", "size", "what", "reads")
    __array_priority__ = 10**6

    def __init__(self, like: np.ndarray, what: str, reads: list):
        self.shape, self.dtype, self.ndim, self.size = like.shape, like.dtype, like.ndim, like.size
        self.what = what
        self.reads = reads

    def _read(self, how: str) -> Any:
        self.reads.append(f"{self.what} ({how})")
        raise StandInReadError(f"a rule read the value of {self.what} ({how})")

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        return self._read("__array__")

    def __array_ufunc__(self, ufunc: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._read(f"numpy's {ufunc.__name__}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.shape:
            return self.shape
        if func is np.ndim:
            return self.ndim
        if func is np.size:
            axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
            return self.size if axis is None else self.shape[axis]
        return self._read(f"numpy's {func.__name__}")

    def __getattr__(self, name: str) -> Any:
        if hasattr(np.ndarray, name):       # .T, .astype, .item, .flags, ...: the value's
            return self._read(f".{name}")
        raise AttributeError(name)          # (what an array lacks: .prim, .raw)

    def __repr__(self) -> str:
        return f"<stand-in for {self.what}, shape {self.shape}, {self.dtype}>"

    __hash__ = object.__hash__


def _refuse(name: str) -> Callable:
    def method(self: StandIn, *args: Any, **kwargs: Any) -> Any:
        return self._read(name)
    method.__name__ = name
    return method


for _name in ["__float__", "__int__", "__index__", "__bool__", "__complex__", "__len__",
              "__iter__", "__getitem__", "__setitem__", "__contains__", "__neg__", "__pos__",
              "__abs__", "__invert__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
              "__ge__", "__format__", "__reduce__", "__copy__", "__deepcopy__"] + [
        f"__{r}{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
                                  "matmul", "and", "or", "xor", "lshift", "rshift", "divmod")
        for r in ("", "r", "i")]:
    setattr(StandIn, _name, _refuse(_name))


# ---------------------------------------------------------------- the rules of a recorded entry

def _rule_calls(prim: sg.Primitive, inputs: tuple, attrs: dict) -> list:
    """(label, call) for every rule the reverse sweeps run from an entry of ``prim`` with
    ``inputs``; a call takes (o, g, out, m, *operands)."""
    calls = []
    for i, x in enumerate(inputs):
        if type(x) is not Entry or not x.requires_grad:
            continue                # (the sweeps call no rule for it)
        if prim.variadic:
            calls.append((f"vjp of input {i}", lambda o, g, out, m, *xs, i=i:
                          prim.vjp[0](o, g, out, i, *xs, **attrs)))
        elif not prim.sparse_vjp and prim.vjp[i] is not None:
            calls.append((f"vjp of input {i}", lambda o, g, out, m, *xs, i=i:
                          prim.vjp[i](o, g, out, *xs, **attrs)))
        if prim.vjp_masked is not None and prim.vjp_masked[i] is not None:
            calls.append((f"masked vjp of input {i}", lambda o, g, out, m, *xs, i=i:
                          prim.vjp_masked[i](o, g, out, m, *xs, **attrs)))
        if prim.mask is not None:
            calls.append((f"mask of input {i}", lambda o, g, out, m, *xs, i=i:
                          prim.mask(o, m, i, out, *xs, **attrs)))
            if prim.mask_source:
                calls.append((f"mask of input {i} (no mask above)", lambda o, g, out, m, *xs,
                              i=i: prim.mask(o, None, i, out, *xs, **attrs)))
    return calls


def _value(r: Any) -> Any:
    """A rule's result as a plain value to compare (None and HELD as themselves)."""
    if r is None or r is HELD:
        return r
    v = r.raw if type(r) is Variable or type(r) is Entry else r
    if isinstance(v, StandIn):
        raise UndeclaredReadError(f"the rule returned {v.what} itself")
    return np.array(v)


def _same(a: Any, b: Any) -> bool:
    if a is None or a is HELD or b is None or b is HELD:
        return a is b
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def hidden_of(prim: sg.Primitive, n: int) -> set:
    """What ``prim``'s declaration lets an entry of ``n`` inputs drop: positions and OUT."""
    kept = range(n) if prim.saved_inputs is None else prim.saved_inputs
    return {i for i in range(n) if i not in kept} | (set() if prim.saves_out else {OUT})


def check_case(prim: sg.Primitive, case: sg.Case, rng: np.random.Generator,
               hidden: set | None = None) -> int:
    """``check_entry`` on an entry of ``prim`` recorded from the case's sampled inputs."""
    op = sg.Ops(keep_values=True)       # (every value kept: the real operands to compare)
    xs = [op.var(a) for a in sample(prim, case, rng)]
    out = applying(prim, case)(*xs)
    assert type(out) is Variable and out.prim is prim, f"{prim.name}: no entry recorded"
    return check_entry(op, out.node, rng, hidden, f"{prim.name} case {case_id(case)}")


def check_entry(rec: sg.Ops, out: Entry, rng: np.random.Generator, hidden: set | None = None,
                where: str | None = None) -> int:
    """Call every reverse rule of the recorded entry ``out`` with real operands and with the
    ``hidden`` ones (default: what its primitive's ``saves`` does not keep) as stand-ins;
    raise ``UndeclaredReadError`` when a stand-in is read or a result differs. Returns the
    number of rules called."""
    prim = out.prim
    inputs, attrs = out.inputs, out.attrs or {}
    where = where or f"{prim.name} entry {out.name}"
    if hidden is None:
        hidden = hidden_of(prim, len(inputs))
    calls = _rule_calls(prim, inputs, attrs)
    gv = rng.standard_normal(out.shape).astype(out.dtype)
    mv = rng.random(out.shape) < 0.5
    reads: list = []
    # an entry is dropped when none of its places is kept (x * x keeps x for either)
    kept = {id(x) for i, x in enumerate(inputs) if i not in hidden}
    hide = [(i, x) for i, x in enumerate(inputs)
            if i in hidden and type(x) is Entry and id(x) not in kept]
    if OUT in hidden:
        hide.append((OUT, out))
    hide_at = {id(v): i for i, v in hide}

    def stand_in(v: Entry) -> StandIn:
        what = "the output" if v is out else f"input {hide_at[id(v)]}"
        return StandIn(v.raw, f"{what} {v.name} of {prim.name}", reads)

    def run(label: str, call: Callable, mode: str, standing: bool) -> Any:
        if mode == "recorded":
            g, m = rec.leaf(gv, None, False, "seed"), rec.leaf(mv, None, False, "mask")
            saved = list({id(v): (v, v.raw) for _, v in hide}.values()) if standing else []
            for v, _ in saved:
                v.raw = stand_in(v)
            try:
                return _value(call(rec, g, out, m, *inputs))
            finally:
                for v, raw in saved:
                    v.raw = raw
        args = [x.raw if type(x) is Entry else x for x in inputs]
        outv = out.raw
        if standing:
            for i, v in hide:
                if i == OUT:
                    outv = stand_in(v)
                else:
                    args[i] = stand_in(v)
        return _value(call(ValueOps(), gv, outv, mv, *args))

    for label, call in calls:
        for mode in ("recorded", "values"):
            want = run(label, call, mode, False)
            try:
                got = run(label, call, mode, True)
            except StandInReadError as e:
                raise UndeclaredReadError(f"{where}: the {label} ({mode}) read a value its "
                                     f"saves={prim.saves} drops: {e}") from None
            if reads:
                raise UndeclaredReadError(f"{where}: the {label} ({mode}) read {reads[0]}, which "
                                     f"its saves={prim.saves} drops (the error was caught)")
            if not _same(want, got):
                raise UndeclaredReadError(f"{where}: the {label} ({mode}) gives another result "
                                     f"when what saves={prim.saves} drops is hidden")
    return len(calls)


# ---------------------------------------------------------------- the registry test

def _params() -> list:
    return [pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}")
            for prim in REGISTRY.values() for case in prim.cases]


@pytest.mark.parametrize(("prim", "case"), _params())
def test_rules_read_only_what_is_saved(prim: sg.Primitive, case: sg.Case,
                                       rng: np.random.Generator) -> None:
    check_case(prim, case, rng)


def _with_gradients(prim: sg.Primitive, case: sg.Case, rng: np.random.Generator) -> list:
    """The entries of a tape holding an entry of ``prim``, its gradient and the gradient of
    that (entries recorded by rules: recorded indices, constants among inputs, repeats)."""
    op = sg.Ops(keep_values=True)
    xs = [op.var(a) for a in sample(prim, case, rng)]
    out = applying(prim, case)(*xs)
    if prim.differentiable:
        s = op.sum(op.mul(out, rng.standard_normal(out.shape)))
        g = op.grad(s, xs[0])
        op.grad(op.sum(op.mul(g, rng.standard_normal(g.shape))), xs)
    return [(op, v) for v in op.tape.entries if v.prim is not None]


@pytest.mark.parametrize("prim", list(REGISTRY.values()), ids=list(REGISTRY))
def test_entries_rules_record(prim: sg.Primitive, rng: np.random.Generator) -> None:
    # every entry of the second-order program, whatever its primitive: the entries the rules
    # record reach forms the check cases do not (take_along_axis of recorded indices)
    for case in prim.cases:
        for rec, entry in _with_gradients(prim, case, rng):
            check_entry(rec, entry, rng, where=f"{entry.prim.name} entry {entry.name} in the "
                        f"gradients of {prim.name} case {case_id(case)}")


# functions of x (shape (4,)) and y (shape (3, 4)) whose entries hold what the check cases do
# not: recorded integer indices, constant operands, one Variable in two places, rules below a
# where's mask
PROGRAMS = {
    "sort": lambda op, x, y: op.sort(y, axis=1),
    "take": lambda op, x, y: op.take(y, op.argmax(x), axis=1),
    "item at an argmax": lambda op, x, y: y[1, op.argmax(x)],
    "dynamic slice": lambda op, x, y: y[:, op.argmin(x[:3]):op.argmin(x[:3]) + 2],
    "square": lambda op, x, y: op.mul(x, x),
    "constants": lambda op, x, y: op.add(op.pow(x, 3.0), op.pow(2.0, x)) + op.div(1.0, y),
    "bounds": lambda op, x, y: op.clip(y, None, 0.5) + op.clip(x, -0.5, None),
    "under a mask": lambda op, x, y: op.where(op.greater(x, 0), op.sqrt(op.abs(x)), 0.0),
    "recorded parameters": lambda op, x, y: op.betainc(
        op.var(np.full(4, 1.5), requires_grad=False), 2.0, op.sigmoid(x)),
    "constant operand": lambda op, x, y: op.einsum("ij,j,jk->ik", y, x, np.ones((4, 2))),
    "mask through shapes": lambda op, x, y: op.sum(op.where(op.greater(y, 0), op.log(
        op.reshape(op.expand(op.abs(x), (3, 4)), (4, 3)).T), y), axis=0),
}


def _program_entries(program: str, rng: np.random.Generator) -> list:
    """The entries of ``program``, its gradient and the gradient of that."""
    op = sg.Ops(keep_values=True)
    x, y = op.var(rng.uniform(-2, 2, 4)), op.var(rng.uniform(-2, 2, (3, 4)))
    out = PROGRAMS[program](op, x, y)
    g = op.grad(op.sum(op.mul(out, rng.standard_normal(out.shape))), [x, y])
    op.grad(op.sum(op.mul(g[0], g[0])) + op.sum(op.mul(g[1], g[1])), [x, y])
    return [(op, v) for v in op.tape.entries if v.prim is not None]


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_entries_of_programs(program: str, rng: np.random.Generator) -> None:
    entries = _program_entries(program, rng)
    assert sum(check_entry(rec, v, rng, where=f"{v.prim.name} entry {v.name} of {program}")
               for rec, v in entries) > 0


@functools.cache
def _entries_by_primitive() -> dict:
    found: dict = {}
    for program in PROGRAMS:
        for rec, v in _program_entries(program, np.random.default_rng(0)):
            found.setdefault(v.prim.name, []).append((rec, v))
    return found


def _reads(prim: sg.Primitive, item: int | str) -> bool:
    """Whether some rule of ``prim`` reads ``item`` (an input position or OUT) in one of its
    check cases, or else in an entry of the programs above."""
    rng = np.random.default_rng(0)
    n = 1 if item == OUT else item + 1
    tries = [lambda c=c: check_case(prim, c, rng, {item})
             for c in prim.cases if len(c.shapes) >= n]
    tries += [lambda rec=rec, v=v: check_entry(rec, v, rng, {item})
              for rec, v in _entries_by_primitive().get(prim.name, []) if len(v.inputs) >= n]
    for attempt in tries:
        try:
            attempt()
        except UndeclaredReadError:
            return True
    return False


@pytest.mark.parametrize("prim", list(REGISTRY.values()), ids=list(REGISTRY))
def test_declarations_are_the_smallest(prim: sg.Primitive) -> None:
    # each value declared is read by some rule somewhere: hidden alone, a check fails (so a
    # primitive left at the default, which keeps everything, fails unless it reads it all)
    n = max(len(c.shapes) for c in prim.cases)
    items = list(range(n)) if prim.saved_inputs is None else list(prim.saved_inputs)
    for item in items + ([OUT] if prim.saves_out else []):
        what = "the output" if item == OUT else f"input {item}"
        assert _reads(prim, item), (f"{prim.name} declares saves={prim.saves}, but no rule "
                                    f"reads {what} in its check cases or the programs")


def test_a_wrong_declaration_fails(monkeypatch: pytest.MonkeyPatch,
                                   rng: np.random.Generator) -> None:
    mul = REGISTRY["mul"]
    case = mul.cases[1]
    assert check_case(mul, case, rng) > 0
    monkeypatch.setattr(mul, "saved_inputs", ())
    with pytest.raises(UndeclaredReadError, match="input 1 v1 of mul"):
        check_case(mul, case, rng)
    monkeypatch.setattr(mul, "saved_inputs", (0,))     # x * y: dx reads y, dy reads x
    with pytest.raises(UndeclaredReadError, match="input 1"):
        check_case(mul, case, rng)
    tanh = REGISTRY["tanh"]
    monkeypatch.setattr(tanh, "saves_out", False)
    with pytest.raises(UndeclaredReadError, match="the output"):
        check_case(tanh, tanh.cases[1], rng)


def test_a_caught_read_fails(rng: np.random.Generator) -> None:
    # a rule that swallows the stand-in's error and answers something else is caught too
    def sneaky(o, g, out, x):
        try:
            return o.mul(g, x)
        except Exception:
            return g
    prim = sg.Primitive("sneaky_identity", lambda x: x, [sneaky], None, "{0}",
                        [sg.Case(((3,),))], saves=())
    with pytest.raises(UndeclaredReadError, match="error was caught"):
        check_case(prim, prim.cases[0], rng, {0})


def test_stand_ins_refuse_values() -> None:
    reads: list = []
    s = StandIn(np.ones((2, 3)), "x", reads)
    assert (s.shape, s.dtype, s.ndim, s.size) == ((2, 3), np.float64, 2, 6)
    assert np.shape(s) == (2, 3) and np.ndim(s) == 2 and np.size(s) == 6
    assert np.size(s, 1) == 3 and not hasattr(s, "prim")
    uses = [np.asarray, np.exp, float, bool, lambda a: a + 1, lambda a: 2 * a, lambda a: a[0],
            lambda a: a.T, lambda a: a.astype(float), lambda a: np.sum(a), operator.neg,
            lambda a: a == a, lambda a: np.where(a, 1, 0), lambda a: a @ np.ones(3)]
    for use in uses:
        with pytest.raises(StandInReadError):
            use(s)
    assert len(reads) == len(uses)


# ---------------------------------------------------------------- the declared forms

@pytest.mark.parametrize(("names", "form", "positions", "out"), [
    (("mul", "matmul"), ("inputs",), None, False),
    (("tanh", "exp", "sigmoid"), ("out",), (), True),
    (("add", "sum", "reshape", "expand"), (), (), False),
])
def test_declared_forms(names: tuple, form: tuple, positions: Any, out: bool) -> None:
    for name in names:
        prim = REGISTRY[name]
        assert (prim.saves, prim.saved_inputs, prim.saves_out) == (form, positions, out), name


def test_forms_normalise() -> None:
    assert normalize_saves("p", ("inputs", "out"), 2) == (("inputs", "out"), None, True)
    assert normalize_saves("p", ("out", 1), 2) == ((1, "out"), (1,), True)
    assert normalize_saves("p", (1, 0), 2) == (("inputs",), None, False)
    assert normalize_saves("p", [], 1) == ((), (), False)
    assert normalize_saves("p", (np.int64(2),), None) == ((2,), (2,), False)
    assert sg.Primitive("p", abs, [None], None, "{0}", []).saves == ("inputs", "out")


@pytest.mark.parametrize("saves", ["out", ("inputs", 0), (2,), (-1,), ("input",), (True,),
                                   (0, 0), ("out", "out"), (1.0,), None])
def test_bad_forms_raise_at_registration(saves: Any) -> None:
    with pytest.raises(ValueError, match="primitive 'badly_declared'"):
        sg.Primitive("badly_declared", np.add, [None, None], None, "{0}", [], saves=saves)
