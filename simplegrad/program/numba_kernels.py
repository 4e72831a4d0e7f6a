"""The loops the numba backend compiles (numba_backend.py decides what they fuse).

A ``Kernel`` is one fused group as numba source: a loop over blocks of ``BLOCK`` values in which
each member entry is one scalar statement, the values read outside the group are written to
arrays and full sums are accumulated per block. Each iteration computes ``CHAINS`` values,
statement by statement interleaved: one value's chain of entries is a sequence of dependent
operations, bound by their latency, and independent chains fill the gaps (LLVM vectorises the
loop, so each chain is a vector of values). An entry whose record states its fused form
(``Primitive.numba``: operators and ``where`` as Python expressions, ``exp`` and ``tanh`` as
calls ``_w_exp``, ``_w_tanh`` of numba functions of arithmetic alone, ``written``) is written
so, numpy ufuncs as themselves, and other forwards as calls of numba-compiled helpers. The kernel
is a C function of pointers: its inputs, then its outputs (allocated by the caller, ``_runner``)
and an array for its sums; its machine code is cached on disk (below)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..primitives.core import Primitive
from .core import Program
from .nodes import CONST, INPUT, NODE, Ref, literal, refs_of

BLOCK = 1024        # values per partial sum
CHAINS = 2          # independent elements per iteration (each a vector): latency overlapped
FASTMATH = frozenset({"contract", "reassoc", "arcp", "nsz"})     # nan and inf kept


def arg_meta(prog: Program, r: Ref) -> tuple[tuple, np.dtype | None]:
    if r.kind == INPUT:
        spec = prog.inputs[r.index]
        return tuple(spec.shape), spec.dtype
    if r.kind == NODE:
        n = prog.entries[r.index]
        return tuple(n.shape), n.dtype
    value = prog.constants[r.index].value
    if type(value) in (int, float, bool):
        return (), None
    arr = np.asarray(value)
    return arr.shape, arr.dtype

# ---------------------------------------------------------------- exp and tanh, written out

# exp and tanh are numba functions of arithmetic alone, which LLVM inlines into the loop and
# vectorises (a libm call keeps a loop scalar, at 50 ns a value). Both reduce their argument
# as x = k ln 2 + r, k = floor(x / ln 2 + 1/2), |r| <= ln 2 / 2 (Cody-Waite: k ln 2 in two
# parts, the first exact), and take expm1(r) = r + r^2 Q(r), Q the Taylor polynomial of degree
# 11 (terms up to r^13 / 13!): truncation error below |r|^14 / 14! e^|r|, at most 8.3e-18
# relative to exp(r) and 2.0e-17 relative to expm1(r), a fifth of an ulp (1.1e-16) or less.
# Q is evaluated by Estrin's scheme, a tree of depth 4 instead of Horner's 11 dependent steps:
# a chain of entries is bound by latency, not by the count of operations. 2^k is built from
# its bits, (k + 1023) << 52 (no table: a gather would slow the vector loop), in two factors
# 2^(k // 2) 2^(k - k // 2), each a normal number, so that a subnormal result is rounded once
# and a large one overflows to inf. tanh(x) = e / (e + 2) with e = expm1(2|x|) =
# 2^k expm1(r) + (2^k - 1) (no cancellation near 0), its sign copied from x. Measured against
# numpy over dense sweeps (tests/test_numba_backend.py): exp within 1 ulp, tanh within 3; nan,
# +-inf, +-0.0, overflow and underflow as numpy gives them. Compiled with contraction only:
# reassociation would undo the exact first step of the reduction.
_WRITTEN = ("exp", "tanh")      # the loop's own functions, _w_exp and _w_tanh
_INV = tuple(1.0 / math.factorial(k) for k in range(14))
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01       # 32 significant bits: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_WRITTEN_FASTMATH = frozenset({"contract"})


@functools.cache
def written(numba: Any) -> dict[str, Callable]:
    """exp and tanh as numba functions that vectorise inside a loop (compiled on first use)."""
    from llvmlite import ir
    from numba.extending import intrinsic

    @intrinsic
    def float_from_bits(typingctx: Any, bits: Any) -> Any:
        if bits != numba.types.int64:
            return None

        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            return builder.bitcast(args[0], ir.DoubleType())
        return numba.types.float64(numba.types.int64), codegen

    jit = numba.njit(error_model="numpy", fastmath=set(_WRITTEN_FASTMATH))

    @jit
    def expm1_reduced(x: float) -> tuple[float, int]:
        k = np.floor(x * _LOG2E + 0.5)
        r = (x - k * _LN2_HI) - k * _LN2_LO
        r2 = r * r
        a0, a1 = _INV[2] + _INV[3] * r, _INV[4] + _INV[5] * r
        a2, a3 = _INV[6] + _INV[7] * r, _INV[8] + _INV[9] * r
        a4, a5 = _INV[10] + _INV[11] * r, _INV[12] + _INV[13] * r
        b0, b1, b2 = a0 + a1 * r2, a2 + a3 * r2, a4 + a5 * r2
        r4 = r2 * r2
        q = (b0 + b1 * r4) + b2 * (r4 * r4)
        # a nan x gives k = nan: fmax makes it a number, and expm1(r) carries the nan
        return r + r2 * q, np.int64(np.fmax(k, -1100.0))

    @jit
    def exp(x: float) -> float:
        c = -746.0 if x < -746.0 else x     # (a nan passes both comparisons)
        c = 710.0 if c > 710.0 else c       # exp(-746) rounds to 0, 2^1024 overflows
        m, k = expm1_reduced(c)
        h = k >> 1
        return (1.0 + m) * float_from_bits((h + 1023) << 52) * \
            float_from_bits((k - h + 1023) << 52)

    @jit
    def tanh(x: float) -> float:
        c = 2.0 * abs(x)
        c = 44.0 if c > 44.0 else c         # tanh(22) rounds to 1
        m, k = expm1_reduced(c)
        s = float_from_bits((k + 1023) << 52)     # k <= 64: one factor, and s - 1 is exact
        e = s * m + (s - 1.0)
        return math.copysign(e / (e + 2.0), x)

    return {"exp": exp, "tanh": tanh}


# ---------------------------------------------------------------- kernels


# ufuncs LLVM turns into vector instructions; any other (sin, log, ...) is a call in the loop,
# which keeps it scalar: numpy's own SIMD loops run those entries
_INLINE = {"add", "subtract", "multiply", "divide", "negative", "greater", "greater_equal",
           "less", "less_equal", "equal", "not_equal", "maximum", "minimum", "fmax", "fmin",
           "absolute", "sqrt", "square", "reciprocal", "sign", "floor", "ceil", "logical_and",
           "logical_or", "logical_not", "logical_xor"}


def is_call(prim: Primitive) -> bool:
    """Whether the entry is a numpy function that numba would call per value (sin, log, ...):
    numpy's SIMD loops run those faster. A forward of simplegrad's own (sigmoid, clip, ...)
    is tried as a numba function; one numba cannot compile falls back."""
    if prim.numba is not None:      # a form of its own in the loop
        return False
    return isinstance(prim.forward, np.ufunc) and prim.forward.__name__ not in _INLINE


def _scalar_expr(prim: Primitive, args: list[str], helpers: dict) -> str:
    """The entry on one element of each argument, as numba source."""
    if prim.numba is not None:
        return prim.numba.format(*args)
    if isinstance(prim.forward, np.ufunc):
        return f"np.{prim.forward.__name__}({', '.join(args)})"
    key = f"_f_{prim.name}"
    helpers[key] = prim.forward
    return f"{key}({', '.join(args)})"


def _number(x: float | int | bool) -> str:
    if type(x) is float and not math.isfinite(x):
        return "np.nan" if x != x else ("np.inf" if x > 0 else "(-np.inf)")
    return repr(x) if type(x) is bool else literal(x)


class Kernel:
    """One fused group: its numba function, its source, and how the program calls it."""

    def __init__(self, prog: Program, group: Any, readers: dict[int, set], outputs: set):
        self.group = group
        members = set(group.members) | set(group.sums)
        # values named by their place in the group, not in the program: a group's source, the
        # key of its compiled kernel, is the same wherever the group stands
        at = {j: k for k, j in enumerate(sorted(members))}
        self.inputs: list[Ref] = []         # arguments of the kernel, in order
        self.outputs: list[int] = []        # node indices it hands back (members, then sums)
        self.helpers: dict[str, Callable] = {}
        self.function: Any = None           # the numba dispatcher, once built
        names: dict[tuple, str] = {}
        size = int(np.prod(group.shape))
        # each member as a statement with {c} for the chain's suffix and {i} for its index
        body: list[str] = []
        for j in group.members:
            node = prog.entries[j]
            args = []
            for r in refs_of(node):
                if r.kind == NODE and r.index in members:
                    args.append(f"t{at[r.index]}{{c}}")
                    continue
                if r.kind == CONST and type(prog.constants[r.index].value) in (int, float, bool):
                    args.append(_number(prog.constants[r.index].value))
                    continue
                key = (r.kind, r.index)
                if key not in names:
                    names[key] = f"a{len(self.inputs)}"
                    self.inputs.append(r)
                one = int(np.prod(arg_meta(prog, r)[0])) == 1 and size != 1
                read = f"{names[key]}[{'0' if one else '{i}'}]"
                # a bool array is passed as bytes: read back as a bool
                boolean = np.dtype(arg_meta(prog, r)[1]).kind == "b"
                args.append(f"({read} != 0)" if boolean else read)
            body.append(f"t{at[j]}{{c}} = {_scalar_expr(node.prim, args, self.helpers)}")
            if j in outputs or readers.get(j, set()) - members:
                self.outputs.append(j)
                body.append(f"o{at[j]}[{{i}}] = t{at[j]}{{c}}")
        arrays = list(self.outputs)
        self.outputs += list(group.sums)
        self.size = size
        # the caller allocates the outputs and passes them after the inputs, then an array
        # for the sums: a C function of pointers (numba_kernels' cache loads it without numba)
        params = ", ".join([*(names[(r.kind, r.index)] for r in self.inputs),
                            *(f"o{at[j]}" for j in arrays), "sums"])
        lines = [f"def kernel({params}):", f"    n = {size}"]
        lines += [f"    acc{at[j]} = 0.0" for j in group.sums]
        # (no min(): numba compiles its overload on first use, tens of ms of a cold start)
        lines += [f"    for b in range(0, n, {BLOCK}):",
                  f"        m = n - b if n - b < {BLOCK} else {BLOCK}",
                  f"        h = (m + {CHAINS - 1}) // {CHAINS}"]
        starts = ["0"] + [f"{c} * h" if c > 1 else "h" for c in range(1, CHAINS)]
        lines += [f"        f{c} = {starts[c]} if {starts[c]} < m - h else m - h"
                  for c in range(1, CHAINS)]
        lines += [f"        s{at[j]} = 0.0" for j in group.sums]
        # chain c computes values b + f_c + i; an unsigned index: no wraparound, so LLVM
        # vectorises without a check that the output overlaps the inputs
        lines.append("        for i in range(h):")
        lines += [f"            u{c} = np.uint64(b + i{f' + f{c}' if c else ''})"
                  for c in range(CHAINS)]
        for line in body:       # the chains' statements interleaved, for the scheduler
            lines += [f"            {line.format(c=f'_{c}' if c else '', i=f'u{c}')}"
                      for c in range(CHAINS)]
        for j in group.sums:
            term = f"t{at[prog.entries[j].in0.position]}"
            acc = prog.entries[j].prim.numba        # "+="
            lines.append(f"            s{at[j]} {acc} {term}")
            # an element two chains cover (at the end of a block) is summed once
            lines += [f"            s{at[j]} {acc} {term}_{c} if i + f{c} >= {starts[c]} else 0.0"
                      for c in range(1, CHAINS)]
        lines += [f"        acc{at[j]} += s{at[j]}" for j in group.sums]
        lines += [f"    sums[{k}] = acc{at[j]}" for k, j in enumerate(group.sums)]
        lines.append("    return")
        self.source = "\n".join(lines) + "\n"

    def build(self, numba: Any, prog: Program) -> Callable:
        """The compiled kernel, a function of flat contiguous arrays returning the outputs
        (members' arrays, then sums): from the on-disk cache when an identical kernel was
        compiled before, else compiled now."""
        sums = set(self.group.sums)
        kinds = [np.dtype(arg_meta(prog, r)[1]) for r in self.inputs]
        outs = [np.dtype(prog.entries[j].dtype) for j in self.outputs if j not in sums]
        key = _key(self.source, [*kinds, "->", *outs], self.helpers)
        got = _BUILT.get(key)
        self.loaded = False
        if got is None:
            address, keep, self.loaded = _compiled(numba, key, self.source,
                                                   [*kinds, *outs], self.helpers)
            got = _BUILT[key] = _runner(address, keep, len(kinds), outs, len(sums),
                                        self.size)
        self.function = got
        return got

    def llvm(self) -> str | None:
        """The kernel's optimised LLVM IR, when it was compiled in this process."""
        keep = getattr(self.function, "keep", (None,))[0]
        return keep.inspect_llvm() if hasattr(keep, "inspect_llvm") else None


def _runner(address: int, keep: Any, inputs: int, outs: list[np.dtype], sums: int,
            size: int) -> Callable:
    """The kernel at ``address`` as a Python function: the outputs allocated here."""
    import ctypes
    proto = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (inputs + len(outs) + 1))
    call = proto(address)

    unused = np.zeros(1)
    nowhere = unused.ctypes.data    # (the sums' pointer of a kernel with none: never written)
    read, at = _data_field()
    if read is None:
        def run(*args: np.ndarray) -> tuple:
            made = [np.empty(size, k) for k in outs]
            total = np.zeros(sums) if sums else unused
            call(*[a.ctypes.data for a in args], *[o.ctypes.data for o in made],
                 total.ctypes.data)
            return (*made, *total[:sums])
    else:
        def run(*args: np.ndarray) -> tuple:
            made = [np.empty(size, k) for k in outs]
            if not sums:
                call(*[read(id(a) + at).value for a in args],
                     *[read(id(o) + at).value for o in made], nowhere)
                return tuple(made)
            total = np.zeros(sums)
            call(*[read(id(a) + at).value for a in args],
                 *[read(id(o) + at).value for o in made], read(id(total) + at).value)
            return (*made, *total)
    run.keep = (keep, unused)   # (the machine code lives as long as what holds it)
    return run


@functools.cache
def _data_field() -> tuple[Callable | None, int]:
    """How to read an array's data pointer fast: numpy's array object keeps it right after
    the object header (what ``PyArray_DATA`` reads), a microsecond less than ``.ctypes.data``
    per argument; used only where it agrees with ``.ctypes.data`` here (else None)."""
    import ctypes
    read, at = ctypes.c_void_p.from_address, object.__basicsize__
    probe = np.arange(16.0)
    arrays = [probe, probe[5:], probe[::2], np.zeros(3, bool), np.empty(1000)]
    try:
        if all(read(id(a) + at).value == a.ctypes.data for a in arrays):
            return read, at
    except (ValueError, OverflowError):
        pass
    return None, 0


# ---------------------------------------------------------------- the kernel cache

# A kernel is compiled once per source, argument types and helpers: in a process (``_BUILT``,
# so a program's identical groups and a program compiled again share one function), and on
# disk: numba compiles it as a C function of pointers (``numba.cfunc``) and its machine code
# (the object file LLVM made) is written to ``<cache>/numba/k<hash>.o``, the hash of its
# source, its argument types, its helpers' source, this module's own source, the versions of
# numba, llvmlite, numpy and Python and the CPU (name and features). Loading one links the
# object with llvmlite alone, in milliseconds: numba's typing and lowering, and its lazy
# initialisation (hundreds of ms), are never run. The file starts with a header naming the
# kernel's key, its symbol, the outside functions it calls (each must resolve in the process,
# else the kernel is compiled again) and the sha256 of the code: a file that is not whole, or
# not ours, is deleted and the kernel compiled again. A kernel that calls a function numba
# provides itself (not in the C library) is kept in memory only. The cache directory is
# ``$SIMPLEGRAD_CACHE_DIR``, else ``$XDG_CACHE_HOME/simplegrad``, else ``~/.cache/simplegrad``
# (read when a kernel is built); where it cannot be written, kernels are compiled in memory.
_BUILT: dict[str, Any] = {}
_KERNEL = "kernel"
_MAGIC = b"simplegrad numba kernel 2\n"
# LLVM intrinsics the code generator turns into calls of the C library (others are
# instructions)
_LIBCALLS = {"floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint",
             "nearbyint": "nearbyint", "round": "round", "maxnum": "fmax", "minnum": "fmin",
             "pow": "pow", "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2",
             "log10": "log10", "sin": "sin", "cos": "cos", "powi": "__powidf2",
             "memset": "memset", "memcpy": "memcpy", "memmove": "memmove"}


def cache_dir() -> Path:
    """Where compiled numba kernels are kept: ``$SIMPLEGRAD_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/simplegrad``, else ``~/.cache/simplegrad``; its ``numba`` folder."""
    root = os.environ.get("SIMPLEGRAD_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        root = os.path.join(base, "simplegrad")
    return Path(root) / "numba"


@functools.cache
def _own_source() -> str:
    """This module's source: a change to how kernels are written changes every key."""
    return Path(__file__).read_text()


@functools.cache
def _machine() -> str:
    """The versions and the CPU the machine code is made for (part of every key)."""
    import llvmlite
    import llvmlite.binding as ll
    return "\0".join([sys.modules["numba"].__version__, llvmlite.__version__, np.__version__,
                      sys.version,
                      ll.get_process_triple(), ll.get_host_cpu_name(),
                      ll.get_host_cpu_features().flatten()])


def _helper_source(fn: Callable) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        return repr((code.co_code, code.co_consts)) if code is not None else repr(fn)


def _key(source: str, kinds: list, helpers: dict) -> str:
    parts = [source, repr([str(k) for k in kinds]), _own_source(), _machine(),
             *(f"{k}\n{_helper_source(fn)}" for k, fn in sorted(helpers.items()))]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _namespace(numba: Any, helpers: dict) -> dict[str, Any]:
    space: dict[str, Any] = {"np": np, "math": math}
    space.update({f"_w_{name}": fn for name, fn in written(numba).items()})
    for key, fn in helpers.items():
        space[key] = numba.njit(error_model="numpy", fastmath=set(FASTMATH))(fn)
    return space


def _compiled(numba: Any, key: str, source: str, kinds: list[np.dtype], helpers: dict,
              fastmath: Any = FASTMATH) -> tuple[int, Any, bool]:
    """The kernel's address, what keeps its code alive, and whether it was loaded from the
    cache directory (else compiled now, and saved there where it can be); ``fastmath``: the
    flags it is compiled with (part of ``key``, through its source)."""
    path = cache_dir() / f"k{key}.o"
    got = _load(path, key)
    if got is not None:
        return (*got, True)
    space = _namespace(numba, helpers)
    exec(compile(source, "<simplegrad numba kernel>", "exec"), space)  # noqa: S102
    T = numba.types
    sig = T.void(*[T.CPointer(T.uint8 if k.kind == "b" else numba.from_dtype(k))
                   for k in kinds], T.CPointer(T.float64))
    fn = numba.cfunc(sig, error_model="numpy", fastmath=set(fastmath) if fastmath else False,
                     pipeline_class=_no_alias(numba))(space[_KERNEL])
    _save(path, key, fn)
    return fn.address, fn, False


@functools.cache
def _no_alias(numba: Any) -> type:
    """numba's compiler, told that the kernel's pointers do not alias: the outputs are new
    arrays and the inputs are only read (so LLVM vectorises the loop with no runtime check
    that an output overlaps an input)."""
    from numba.core.compiler import Compiler

    class NoAlias(Compiler):
        def __init__(self, typingctx: Any, targetctx: Any, library: Any, args: Any,
                     return_type: Any, flags: Any, locals: Any):
            flags.noalias = True
            super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)
    return NoAlias


def _save(path: Path, key: str, fn: Any) -> None:
    """The kernel's machine code written to ``path`` (nothing where it cannot be)."""
    try:
        library = fn._library
        code = library._get_compiled_object()
        calls = set()
        for f in library._final_module.functions:
            if f.is_declaration:
                name = f.name
                if name.startswith("llvm."):
                    name = _LIBCALLS.get(name.split(".")[1])
                if name is not None:
                    calls.add(name)
    except Exception:   # noqa: BLE001 (numba's internals differ between versions)
        return
    if not all(_resolves(name) for name in calls):
        return          # a function of numba's runtime: not there before numba compiles
    head = json.dumps({"key": key, "symbol": fn.native_name, "calls": sorted(calls),
                       "sha256": hashlib.sha256(code).hexdigest()}).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.parent / f".{path.name}.{os.getpid()}.tmp"
        part.write_bytes(_MAGIC + head + b"\n" + code)
        os.replace(part, path)      # whole or absent, for a process reading it now
    except OSError:
        pass


def _load(path: Path, key: str) -> tuple[int, Any] | None:
    """The cached kernel's address and its execution engine, or None (absent, or a file
    that is not a whole kernel of this key: deleted)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    import llvmlite.binding as ll
    try:
        if not data.startswith(_MAGIC):
            raise ValueError("not a kernel")
        head, code = data[len(_MAGIC):].split(b"\n", 1)
        meta = json.loads(head)
        if meta["key"] != key or hashlib.sha256(code).hexdigest() != meta["sha256"]:
            raise ValueError("not this kernel, or not whole")
        if not all(_resolves(name) for name in meta["calls"]):
            return None
        engine = _engine(ll)
        engine.add_object_file(ll.ObjectFileRef.from_data(code))
        engine.finalize_object()
        address = engine.get_function_address(meta["symbol"])
        if not address:
            raise ValueError("no kernel in the file")
    except (ValueError, KeyError, TypeError, RuntimeError):
        path.unlink(missing_ok=True)
        return None
    return address, engine


def _resolves(name: str) -> bool:
    """Whether the linker finds ``name`` in this process without numba compiling anything:
    the C library's and Python's functions, and numba's C helpers (the error path of a
    C function: take the GIL, report the exception), which are installed here."""
    import ctypes

    import llvmlite.binding as ll
    _helpers()
    return bool(ll.address_of_symbol(name)) or hasattr(ctypes.CDLL(None), name)


@functools.cache
def _helpers() -> None:
    try:
        from numba.core.base import _load_global_helpers
        _load_global_helpers()
    except Exception:   # noqa: BLE001, S110 (another numba: its kernels are compiled again)
        pass


def _engine(ll: Any) -> Any:
    """An execution engine of its own for one kernel (kernels compiled in different
    processes may share symbol names)."""
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    machine = ll.Target.from_default_triple().create_target_machine(codemodel="jitdefault")
    return ll.create_mcjit_compiler(ll.parse_assembly(""), machine)
