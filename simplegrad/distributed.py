"""Programs beyond one machine: ``sg.map_chunks`` runs a program, recorded on one chunk of the
data, on every chunk of dask arrays and combines the outputs with a tree reduction.

A recorded program (a loss and its gradient, say) is data: it pickles, ships to dask workers
and runs there in numpy on each chunk, in one task per chunk; nothing is computed until the
caller asks (``dask.compute``, ``.compute()``, a ``distributed.Client``). Inputs that are dask
arrays are split along axis 0, all into the same chunks; the others (parameters) go whole to
every chunk. Each output is then summed over the chunks (``reduce="sum"``), averaged with each
chunk weighted by its rows (``"mean"``: a mean loss's gradient, right with a ragged last
chunk), or concatenated along axis 0 (``None``: per-example outputs).

dask (``pip install 'simplegrad[dask]'``) is imported when ``map_chunks`` is called, never at
``import simplegrad``. Sums across chunks are added in another order than one numpy sum over
all rows, so they differ from it in the last bits.
"""

from __future__ import annotations

import functools
import pickle
import threading
import uuid
import weakref
from collections import OrderedDict
from operator import getitem
from typing import Any, Literal

import numpy as np

from .errors import ArgumentError, MissingToolError, ShapeError
from .program.compile import Compiled
from .program.core import Program
from .program.inputs import input_error, input_value
from .program.nodes import CONST, INPUT

__all__ = ["map_chunks"]

Reduce = Literal["sum", "mean"] | None


def map_chunks(prog: Program | Compiled, *inputs: Any, reduce: Reduce = "sum",
               split_every: int = 8) -> Any:
    """Run ``prog`` on every axis-0 chunk of its dask-array inputs and combine each output
    across chunks (``reduce``: "sum", "mean" weighted by rows, or None to concatenate); lazy
    dask arrays in the structure the program returns."""
    program = prog.program if isinstance(prog, Compiled) else prog
    if not isinstance(program, Program):
        raise ArgumentError(f"map_chunks: expected a Program or a compiled program, got "
                            f"{type(prog).__name__}")
    if reduce not in ("sum", "mean", None):
        raise ArgumentError(f"map_chunks: reduce must be 'sum', 'mean' or None, got {reduce!r}")
    if not isinstance(split_every, int) or split_every < 2:
        raise ArgumentError(f"map_chunks: split_every must be an int >= 2, got {split_every!r}")
    if len(inputs) != len(program.inputs):
        names = ", ".join(i.name for i in program.inputs)
        raise ArgumentError(f"map_chunks: the program takes {len(program.inputs)} input(s) "
                            f"({names}), got {len(inputs)}")
    da, HighLevelGraph = _dask()
    chunked = [i for i, x in enumerate(inputs) if isinstance(x, da.Array)]
    if not chunked:
        raise ArgumentError("map_chunks: no input is a dask array; pass the data as one "
                            "(dask.array.from_array(x, chunks=...)) or call the program")
    rows = _rows(program, inputs, chunked)
    names = _Names(uuid.uuid4().hex)
    data, layer, args = [], {}, []
    for i, x in enumerate(inputs):
        if i in chunked:
            whole = (rows,) + tuple((n,) for n in x.shape[1:])
            x = x if x.chunks == whole else x.rechunk(whole)
            data.append(x)
            args.append([(x.name, k) + (0,) * (x.ndim - 1) for k in range(len(rows))])
        else:
            args.append(_parameter(layer, f"{names.run}-input-{i}",
                                   input_value("map_chunks", program.inputs[i], x)))
    shipped = _shipped(prog)
    for k, n in enumerate(rows):
        layer[(names.run, k)] = (_run_chunk, shipped,
                                 [a[k] if i in chunked else a for i, a in enumerate(args)],
                                 float(n) if reduce == "mean" else None)
    outs = _outputs(program)
    if reduce is None:
        graph = HighLevelGraph.from_collections(names.run, layer, dependencies=data)
        arrays = [_concatenated(da, graph, names, j, shape, dtype, rows, program, chunked[0])
                  for j, (shape, dtype) in enumerate(outs)]
    else:
        partial = sum(int(np.prod(shape)) * _reduced(dtype, reduce).itemsize
                      for shape, dtype in outs)
        parts = _tree(layer, names, [(names.run, k) for k in range(len(rows))], split_every,
                      partial)
        graph = HighLevelGraph.from_collections(names.run, layer, dependencies=data)
        total = float(sum(rows)) if reduce == "mean" else None
        arrays = [_array(da, graph, names, j, (_total, j, parts, total, split_every),
                         tuple((d,) for d in shape), _reduced(dtype, reduce))
                  for j, (shape, dtype) in enumerate(outs)]
    return arrays[0] if program.single else arrays


# ---------------------------------------------------------------- checks


def _dask() -> tuple:
    try:
        import dask.array as da
        from dask.highlevelgraph import HighLevelGraph
    except ImportError as e:
        raise MissingToolError("map_chunks: needs dask: pip install 'simplegrad[dask]'") from e
    return da, HighLevelGraph


def _rows(program: Program, inputs: tuple, chunked: list[int]) -> tuple[int, ...]:
    """The chunks along axis 0 (the first dask input's), after checking every input."""
    first = inputs[chunked[0]]
    rows = tuple(first.chunks[0]) if first.ndim else ()
    for i in chunked:
        x, spec = inputs[i], program.inputs[i]
        if x.ndim == 0:
            raise ShapeError(f"map_chunks: input {spec.name} is a 0-d dask array; chunks are "
                             "split along axis 0")
        if any(np.isnan(n) for n in x.chunks[0]):
            raise ShapeError(f"map_chunks: input {spec.name} has unknown chunk sizes; call "
                             f".compute_chunk_sizes() on it first")
        if x.shape[0] != first.shape[0]:
            raise ShapeError(f"map_chunks: input {spec.name} has {x.shape[0]} rows, "
                             f"{program.inputs[chunked[0]].name} has {first.shape[0]}; "
                             "every dask input is split along axis 0 into the same chunks")
        error = input_error("map_chunks", spec, spec.shape, np.dtype(x.dtype))
        if error is not None:
            raise error
    for n in sorted(set(rows)):         # the program at each chunk's rows (Program.with_shapes)
        shapes = [(n, *np.shape(x)[1:]) if i in chunked else np.shape(x)
                  for i, x in enumerate(inputs)]
        try:
            program.with_shapes(*shapes)
        except ShapeError as e:
            spec = program.inputs[chunked[0]]
            raise ShapeError(f"map_chunks: {str(e).removeprefix('program: ')} (a chunk of "
                             f"{n} rows; the program was recorded on "
                             f"{spec.shape[0] if spec.shape else 0}: rechunk the inputs to "
                             "that many rows, or record on another chunk)") from None
    return rows


def _outputs(program: Program) -> list[tuple[tuple, np.dtype]]:
    """(shape, dtype) of each output on one chunk."""
    out = []
    for r in program.outputs:
        if r.kind == INPUT:
            spec = program.inputs[r.index]
            out.append((tuple(spec.shape), np.dtype(spec.dtype)))
        elif r.kind == CONST:
            value = program.constants[r.index].value
            out.append((np.shape(value), np.result_type(value)))
        else:
            node = program.entries[r.index]
            out.append((tuple(node.shape), np.dtype(node.dtype)))
    return out


def _reduced(dtype: np.dtype, reduce: str) -> np.dtype:
    """The dtype of an output summed (its own) or averaged (a floating one) over chunks."""
    return np.result_type(dtype, 1.0) if reduce == "mean" else dtype

# ---------------------------------------------------------------- the graph
#
# One high-level graph per call, written out directly (no dask.delayed: no unpacking, no
# tokenizing): a layer of one task per chunk, then one task per output that adds the chunks'
# partial outputs (and divides, for a mean) straight into that output's only block, an array
# that computes to that block with no finalize task. The partials are added split_every at a
# time, level by level, while more than split_every remain (that order, and so the last bits
# of the sum, is split_every's alone); a level is a layer of tasks of its own only while the
# partials left are more than READ_PARTS or READ_BYTES, what one task may read, else the
# output's task adds those levels itself. So the graph is two tasks deep (a scheduler round
# trip each) for up to READ_PARTS small partials, with no task that only passes a value on.
# Keys are named by one uuid per call. Parameters up to INLINE_BYTES are written into every
# chunk's task; larger ones are one key of the graph, fetched once per worker. The program
# travels as its pickled bytes (_Shipped) and is unpickled once per worker process, not once
# per task.

INLINE_BYTES = 1 << 20
READ_PARTS = 64
READ_BYTES = 1 << 26


class _Names:
    """The keys of one call: its chunks' tasks, partial sums and outputs."""

    def __init__(self, token: str) -> None:
        self.run = f"map_chunks-run-{token}"
        self.add = f"map_chunks-add-{token}"
        self.token = token

    def out(self, j: int) -> str:
        return f"map_chunks-out{j}-{self.token}"


def _parameter(layer: dict, key: str, value: np.ndarray) -> Any:
    """A parameter as the chunks' tasks read it: itself when small, else a key of the graph."""
    if value.nbytes <= INLINE_BYTES:
        return value
    layer[key] = value
    return key


class _Shipped:
    """A program as dask tasks carry it: pickled once in this process, unpickled once per
    process that runs it (by a token; the last few kept), not once per task."""

    __slots__ = ("token", "payload", "_value")

    def __init__(self, token: str, payload: bytes, value: Any = None) -> None:
        self.token, self.payload, self._value = token, payload, value

    @property
    def value(self) -> Any:
        if self._value is None:
            self._value = _unpickled(self.token, self.payload)
        return self._value

    def __reduce__(self) -> tuple:
        return _Shipped, (self.token, self.payload)


_SHIPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # program -> _Shipped
_UNPICKLED: OrderedDict[str, Any] = OrderedDict()                   # token -> program
_KEEP = 16
_LOCK = threading.Lock()


def _shipped(prog: Any) -> _Shipped:
    """The program's _Shipped, made (and pickled) on the first call with it."""
    with _LOCK:
        hit = _SHIPPED.get(prog)
    if hit is None:
        try:
            payload = pickle.dumps(prog, protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError):
            import cloudpickle  # dask's own dependency: closures, lambdas
            payload = cloudpickle.dumps(prog, protocol=pickle.HIGHEST_PROTOCOL)
        hit = _Shipped(uuid.uuid4().hex, payload, prog)
        with _LOCK:
            hit = _SHIPPED.setdefault(prog, hit)
    return hit


def _unpickled(token: str, payload: bytes) -> Any:
    """The program of ``token``, unpickled from ``payload`` the first time this process
    meets it."""
    with _LOCK:
        prog = _UNPICKLED.get(token)
        if prog is not None:
            _UNPICKLED.move_to_end(token)
            return prog
    prog = pickle.loads(payload)
    with _LOCK:
        _UNPICKLED[token] = prog
        while len(_UNPICKLED) > _KEEP:
            _UNPICKLED.popitem(last=False)
    return prog


def _run_chunk(shipped: _Shipped, args: list, weight: float | None) -> list:
    """The program on one chunk; its outputs times ``weight`` (its rows) for a mean."""
    outs = shipped.value(*args)
    outs = [outs] if not isinstance(outs, list) else outs
    return outs if weight is None else [np.multiply(o, weight) for o in outs]


def _add(*parts: list) -> list:
    """Output by output, the sum of some chunks' outputs."""
    return [_sum([part[j] for part in parts]) for j in range(len(parts[0]))]


def _sum(values: list) -> np.ndarray:
    """The values added in their order, into a new array."""
    total = np.array(values[0], copy=True)
    for value in values[1:]:
        total = total + value
    return total


def _total(j: int, parts: list, rows: float | None, split_every: int) -> np.ndarray:
    """Output j of the partials, added ``split_every`` at a time while more remain (as the
    levels of _tree would), divided by ``rows`` (a mean) if given."""
    values = [part[j] for part in parts]
    while len(values) > split_every:
        values = [_sum(values[g:g + split_every]) for g in range(0, len(values), split_every)]
    total = _sum(values)
    return total if rows is None else np.divide(total, rows)


def _tree(layer: dict, names: _Names, parts: list, split_every: int, nbytes: int) -> list:
    """The partials' keys (``nbytes`` each) added ``split_every`` at a time, a level of tasks
    at a time, while more than ``split_every`` remain and more than one task may read; the
    keys left."""
    level = 0
    while len(parts) > split_every and (len(parts) > READ_PARTS
                                        or len(parts) * nbytes > READ_BYTES):
        keys = [(names.add, level, g) for g in range(-(-len(parts) // split_every))]
        for g, key in enumerate(keys):
            layer[key] = (_add, *parts[g * split_every:(g + 1) * split_every])
        parts, level = keys, level + 1
    return parts


def _array(da: Any, graph: Any, names: _Names, j: int, task: tuple, chunks: tuple,
           dtype: np.dtype) -> Any:
    """Output j as a one-block dask array computed by ``task``."""
    key = (names.out(j),) + (0,) * len(chunks)
    return _blocks(da, graph, names, j, {key: task}, chunks, dtype)


def _blocks(da: Any, graph: Any, names: _Names, j: int, layer: dict, chunks: tuple,
            dtype: np.dtype) -> Any:
    """Output j as the dask array of ``layer``'s blocks: its own layer over the call's
    ``graph``, whose tasks it reads."""
    name = names.out(j)
    hlg = type(graph)({**graph.layers, name: layer},
                      {**graph.dependencies, name: {names.run}})
    if len(layer) > 1:
        return da.Array(hlg, name, chunks, dtype=dtype)
    return _one_block_array(da)(hlg, name, chunks, dtype=dtype)


@functools.cache
def _one_block_array(da: Any) -> type:
    """dask.array.Array for arrays of one block, whose computed value is that block: it
    finalizes as a Delayed does (``single_key``), which dask computes with no finalize task
    (nor the task that would pass the block on to it): one task per output, not three."""
    from dask.delayed import single_key

    class OneBlockArray(da.Array):
        __slots__ = ()

        def __dask_postcompute__(self) -> tuple:
            return single_key, ()

    return OneBlockArray


def _concatenated(da: Any, graph: Any, names: _Names, j: int, shape: tuple, dtype: np.dtype,
                  rows: tuple, program: Program, first: int) -> Any:
    """Output j of every chunk, concatenated along axis 0: block k is chunk k's."""
    if not shape:
        raise ShapeError(f"map_chunks: reduce=None concatenates along axis 0, but output {j} "
                         "is a scalar; use reduce='sum' or 'mean'")
    recorded = program.inputs[first].shape[0]
    sizes = tuple(rows) if shape[0] == recorded else (shape[0],) * len(rows)
    tail = (0,) * (len(shape) - 1)
    layer = {(names.out(j), k) + tail: (getitem, (names.run, k), j) for k in range(len(rows))}
    return _blocks(da, graph, names, j, layer, (sizes,) + tuple((d,) for d in shape[1:]), dtype)
