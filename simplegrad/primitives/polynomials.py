"""Polynomials of a program's entries: the simplifier's expanded normal form of ring arithmetic.

An entry of a record with a ``ring`` role (add, sub, mul, neg: ``Primitive.ring``) whose
inputs are polynomials of other entries (its *atoms*) and numbers is itself such a polynomial:
``Polynomial`` holds it as monomials (atom numbers with powers, in one canonical order) with
their coefficients gathered, so ``g * (1 - t * t)`` and ``g - (t * g) * t`` are one polynomial,
``x * x * x`` is ``x`` to the power 3, and ``2 * x + x`` is ``3 * x``. The simplifier
(rewrites.py, ``simplified`` with an ``Expansion``) gives such an entry as a Polynomial and
writes it out as entries (``Expansion.entry``) only where something else reads it: a program's
output, or an entry of another primitive. Written out, each power is one multiplication of the
power below it by the atom (``t3 = t2 * t``, shared by every polynomial that needs it), each
term one multiplication by its coefficient, and the terms are added (a negative coefficient
subtracted), highest degree first; where the expanded form would compute as many values as the
recorded one or more (entries weighed by their sizes: ``g * (1 - t * t)`` with a matrix g and a
vector t stays so), the recorded form is written instead; where every term shares a factor
and taking it out computes fewer values, the rest is written at its own atoms' size and the
shared atoms multiply it after, the largest last (``W * (2 t^3 - 2 t)`` as
``((2 t^2 - 2) * t) * W``: one product at W's size).

What stays exact: the expanded polynomial equals the recorded entry at every finite point, to
float64 round-off (its coefficients are products of the recorded numbers, its terms summed in
another order). A polynomial is formed only in a float or complex dtype its atoms share, with
every atom still present (so ``x - x`` and ``x * 0`` stay as recorded: x may be inf or nan,
and the entry keeps its shape), and only while it is small (``MOST_TERMS`` terms, a product of
at most ``MOST_PRODUCT`` pairs of terms). Where an intermediate value overflows, the expanded
form may give inf, or a number (``x * (y + z)`` for ``x y + x z`` at x = y = -z = 1e200),
where the recorded one gives nan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .core import REGISTRY, Primitive

MOST_TERMS = 32         # a polynomial with more terms is not formed: the entry stays an atom
MOST_PRODUCT = 256      # nor a product of two whose numbers of terms multiply to more

ADD, SUB, MUL, NEG = "add", "sub", "mul", "neg"     # the roles (Primitive.ring)


def ring_record(role: str) -> Primitive:
    """The registered record with this ring role."""
    found = _RECORDS.get(role)
    if found is None:
        found = _RECORDS[role] = next(p for p in REGISTRY.values() if p.ring == role)
    return found


_RECORDS: dict[str, Primitive] = {}


class Polynomial:
    """An entry's value as a polynomial of atoms: ``terms`` maps each monomial (a tuple of
    (atom number, power), atoms in ascending number) to its coefficient; ``made`` is the entry
    as recorded (its record and inputs, Polynomials or operands; None for an atom or a number),
    ``entry`` the operand it was written out as
    (None until it is), ``tag`` the caller's note on the entry it stands for (a name)."""

    __slots__ = ("terms", "shape", "dtype", "made", "entry", "tag")

    def __init__(self, terms: dict, shape: tuple, dtype: np.dtype, made: tuple | None = None):
        self.terms = terms
        self.shape = shape
        self.dtype = dtype
        self.made = made
        self.entry: Any = None
        self.tag: Any = None        # what the caller notes about the entry it stands for

    def atoms(self) -> set[int]:
        """The numbers of the atoms it reads."""
        return {a for m in self.terms for a, _ in m}

    def __repr__(self) -> str:
        return " + ".join(f"{c!r}*" + "*".join(f"a{a}^{k}" for a, k in m) if m else repr(c)
                          for m, c in self.terms.items()) or "0"


def _times(m: tuple, n: tuple) -> tuple:
    """The product of two monomials."""
    if not m:
        return n
    if not n:
        return m
    powers = dict(m)
    for a, k in n:
        powers[a] = powers.get(a, 0) + k
    return tuple(sorted(powers.items()))


def _plus(p: dict, q: dict, sign: int) -> dict:
    out = dict(p)
    for m, c in q.items():
        out[m] = out.get(m, 0) + (c if sign > 0 else -c)
    return out


def _product(p: dict, q: dict) -> dict | None:
    if len(p) * len(q) > MOST_PRODUCT:
        return None
    out: dict = {}
    for m, c in p.items():
        for n, d in q.items():
            k = _times(m, n)
            out[k] = out.get(k, 0) + c * d
    return out


class Expansion:
    """The simplifier's polynomials over one program: the atoms' numbers (in the order first
    seen), and ``emit(prim, inputs)``, which records one entry of the written-out form (through
    the simplifier's other rules and its shared entries) and gives the caller's operand."""

    def __init__(self, emit: Callable[[Primitive, tuple, Polynomial, bool], Any],
                 describe: Callable[[Any], Any]):
        self.emit = emit
        self.describe = describe
        self.numbers: dict[Any, int] = {}
        self.operands: list[Any] = []
        self.powers: dict[tuple, Any] = {}      # monomial -> its operand, once written out

    # ------------------------------------------------------------ forming

    def combine(self, prim: Primitive, inputs: Sequence[Any]) -> Polynomial | None:
        """The entry ``prim(*inputs)`` of a ring record as a Polynomial, or None where none
        is formed (see the module docstring); inputs are Polynomials or the caller's
        operands."""
        dtype = None
        for x in inputs:
            d = x.dtype if type(x) is Polynomial else self.describe(x).dtype
            if type(x) is Polynomial or not self.describe(x).constant:
                dtype = d
                break
        if dtype is None or np.dtype(dtype).kind not in "fc":
            return None
        ps = []
        for x in inputs:
            p = x if type(x) is Polynomial else self._of(x, np.dtype(dtype))
            if p is None:
                return None
            ps.append(p)
        role = prim.ring
        if role == NEG:
            terms = {m: -c for m, c in ps[0].terms.items()}
        elif role == MUL:
            terms = _product(ps[0].terms, ps[1].terms)
        else:
            terms = _plus(ps[0].terms, ps[1].terms, 1 if role == ADD else -1)
        if terms is None:
            return None
        terms = {m: c for m, c in terms.items() if c != 0}
        if len(terms) > MOST_TERMS or not terms:
            return None
        read = set().union(*(p.atoms() for p in ps))
        if {a for m in terms for a, _ in m} != read or not read:
            return None     # an atom cancelled (x - x, x * 0): the entry stays as recorded
        shape = _broadcast([p.shape for p in ps])
        if _broadcast([self.describe(self.operands[a]).shape for a in read]) != shape:
            return None     # (a number's shape would be lost)
        return Polynomial(terms, shape, np.dtype(dtype), (prim, tuple(inputs)))

    def _of(self, x: Any, dtype: np.dtype) -> Polynomial | None:
        """A caller's operand as a Polynomial: a scalar constant as a number, a uniform
        constant array that keeps the shape as a number too, any other value an atom."""
        d = self.describe(x)
        if d.constant:
            c = _coefficient(d.value, dtype)
            if c is not None:
                return Polynomial({(): c}, tuple(d.shape), np.dtype(dtype))
        if d.dtype is None or np.dtype(d.dtype) != dtype:
            return None
        k = self.numbers.get(x)
        if k is None:
            k = self.numbers[x] = len(self.operands)
            self.operands.append(x)
        return Polynomial({((k, 1),): 1}, tuple(d.shape), np.dtype(dtype))

    # ------------------------------------------------------------ writing out

    def entry(self, p: Polynomial) -> Any:
        """The operand ``p`` is written out as (recorded on first use, then shared)."""
        if p.entry is None:
            cost = self._cost(p)
            factored = self._factoring(p)
            best = cost if factored is None else min(cost, factored[0])
            if p.made is not None and self._recorded_cost(p, best) <= best:
                prim, inputs = p.made       # the recorded form takes fewer entries
                p.entry = self.emit(prim, tuple(self.entry(x) if type(x) is Polynomial
                                                else x for x in inputs), p, True)
            elif factored is not None and factored[0] < cost:
                p.entry = self._written_factored(p, *factored[1:])
            else:
                p.entry = self._written(p)
        return p.entry

    def _cost(self, p: Polynomial) -> int:
        """The values its expanded form computes (entries weighed by their sizes): powers
        not yet written, a multiplication per coefficient other than 1 and -1, an addition
        per term after the first."""
        new: set[tuple] = set()
        cost = (len(p.terms) - 1) * _count(p.shape)
        for m, c in p.terms.items():
            if not m:
                continue
            shape = _broadcast([self._shape(a) for a, _ in m])
            if c != 1 and c != -1:
                cost += _count(shape)
            for a, k in m:
                new.update((a, j) for j in range(2, k + 1) if ((a, j),) not in self.powers)
            if len(m) > 1 and m not in self.powers:
                cost += (len(m) - 1) * _count(shape)
        return cost + sum(_count(self._shape(a)) for a, _ in new)

    def _recorded_cost(self, p: Polynomial, limit: int) -> int:
        """The values its recorded form computes, each Polynomial not written yet counted
        once (counting stops past ``limit``)."""
        seen: set[int] = set()
        total, stack = 0, [p]
        while stack and total <= limit:
            q = stack.pop()
            if id(q) in seen:
                continue
            seen.add(id(q))
            total += _count(q.shape)
            stack.extend(x for x in q.made[1] if type(x) is Polynomial and x.entry is None)
        return total

    def _shape(self, a: int) -> tuple:
        return tuple(self.describe(self.operands[a]).shape)

    def _factoring(self, p: Polynomial) -> tuple | None:
        """The common factor of p's terms taken out, as (the values it computes, the common
        atoms' powers smallest atom first, the rest of p as terms, the rest's shape), or None
        when p has a number term. Written so, the rest is computed at its atoms' size and the
        common atoms multiply it in after, the largest last (``W * (t * (2 t^2 - 2))``, not
        ``2 W t^3 - 2 W t``)."""
        common: dict | None = None
        for m in p.terms:
            if not m:
                return None
            powers = dict(m)
            common = powers if common is None else \
                {a: min(k, powers[a]) for a, k in common.items() if a in powers}
            if not common:
                return None
        factors = sorted(common.items(), key=lambda ak: (_count(self._shape(ak[0])), ak[0]))
        rest = {tuple((a, k - common.get(a, 0)) for a, k in m if k > common.get(a, 0)): c
                for m, c in p.terms.items()}
        cost = 0
        for a, k in factors:
            cost += sum(_count(self._shape(a)) for j in range(2, k + 1)
                        if ((a, j),) not in self.powers)
        if len(rest) == 1:      # one term: its number multiplies the smallest power
            rest_shape = shape = self._shape(factors[0][0])
            c = rest[()]
            cost += 0 if c == 1 else _count(shape)
            later = factors[1:]
        else:
            rest_shape = shape = _broadcast([self._shape(a) for m in rest for a, _ in m])
            cost += self._cost(Polynomial(rest, shape, p.dtype))
            later = factors
        for a, _ in later:
            shape = _broadcast([shape, self._shape(a)])
            cost += _count(shape)
        return cost, factors, rest, rest_shape

    def _written_factored(self, p: Polynomial, factors: list, rest: dict,
                          rest_shape: tuple) -> Any:
        """p written as its common factor times the rest (``_factoring``)."""
        mul = ring_record(MUL)
        if len(rest) == 1:
            (a, k), later = factors[0], factors[1:]
            x = self._monomial(((a, k),), p)
            c = rest[()]
            if c == -1:
                x = self.emit(ring_record(NEG), (x,), p, not later)
            elif c != 1:
                x = self.emit(mul, (x, c), p, not later)
        else:
            later = factors
            q = Polynomial(rest, rest_shape, p.dtype)
            q.tag = p.tag
            x = self._written(q, final=False)
        for i, (a, k) in enumerate(later):
            x = self.emit(mul, (x, self._monomial(((a, k),), p)), p, i == len(later) - 1)
        return x

    def _written(self, p: Polynomial, final: bool = True) -> Any:
        mul = ring_record(MUL)
        signed = []     # (operand, +1 or -1) per term; (None, c) for the number
        for m in sorted(p.terms, key=_degree_first):
            c = p.terms[m]
            if not m:
                signed.append((None, c))
                continue
            x = self._monomial(m, p)
            if c == 1 or c == -1:
                signed.append((x, c))
            elif isinstance(c, complex) or c > 0:
                signed.append((self.emit(mul, (x, c), p, False), 1))
            else:
                signed.append((self.emit(mul, (x, -c), p, False), -1))
        negate = not any(x is not None and s == 1 for x, s in signed)
        if negate:      # every term negative: the sum of their negations, negated
            signed = [(x, -s) for x, s in signed]
        first = next(i for i, (x, s) in enumerate(signed) if x is not None and s == 1)
        total = signed[first][0]
        rest = [t for i, t in enumerate(signed) if i != first]
        for k, (x, s) in enumerate(rest):
            last = final and k == len(rest) - 1 and not negate
            if x is None:       # the number
                below = not isinstance(s, complex) and s < 0
                total = self.emit(ring_record(SUB if below else ADD),
                                  (total, -s if below else s), p, last)
            else:
                total = self.emit(ring_record(ADD if s == 1 else SUB), (total, x), p, last)
        return self.emit(ring_record(NEG), (total,), p, final) if negate else total

    def _monomial(self, m: tuple, p: Polynomial) -> Any:
        """A monomial's operand: each power the one below times its atom, then the powers
        multiplied in the atoms' order; each written once."""
        got = self.powers.get(m)
        if got is not None:
            return got
        mul = ring_record(MUL)
        if len(m) == 1:
            (a, k), = m
            x = self.operands[a] if k == 1 else self.emit(
                mul, (self._monomial(((a, k - 1),), p), self.operands[a]), p, False)
        else:
            x = self.emit(mul, (self._monomial(m[:-1], p), self._monomial(m[-1:], p)), p,
                          False)
        self.powers[m] = x
        return x


def _degree_first(m: tuple) -> tuple:
    """Highest total degree first, then by the atoms' numbers and powers; the number last."""
    return (-sum(k for _, k in m), m)


def _coefficient(value: Any, dtype: np.dtype) -> Any:
    """A constant as a Python number, when it is one number (a scalar or a uniform array) that
    keeps ``dtype``; else None."""
    if type(value) is bool or isinstance(value, np.bool_):
        return None
    if type(value) in (int, float) or (type(value) is complex and dtype.kind == "c"):
        return value
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiuc" or arr.size == 0 or np.result_type(arr.dtype, dtype) != dtype:
        return None
    first = arr.flat[0]
    if arr.size > 1 and not bool(np.all(arr == first)):
        return None
    c = first.item()
    if isinstance(c, complex) and dtype.kind != "c":
        return None
    return c


def _count(shape: tuple) -> int:
    """The number of values of an array of this shape."""
    n = 1
    for k in shape:
        n *= int(k)
    return n


def _broadcast(shapes: list[tuple]) -> tuple:
    return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes))) if shapes else ()
