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

import uuid
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
    da, dask = _dask()
    chunked = [i for i, x in enumerate(inputs) if isinstance(x, da.Array)]
    if not chunked:
        raise ArgumentError("map_chunks: no input is a dask array; pass the data as one "
                            "(dask.array.from_array(x, chunks=...)) or call the program")
    rows = _rows(program, inputs, chunked)
    args = list(inputs)
    for i in range(len(inputs)):
        if i in chunked:
            x = inputs[i]
            args[i] = x.rechunk((rows,) + tuple(-1 for _ in x.shape[1:])).to_delayed().ravel()
        else:
            args[i] = dask.delayed(input_value("map_chunks", program.inputs[i], inputs[i]),
                                   name=f"map_chunks-input-{uuid.uuid4().hex}")
    run = dask.delayed(prog, name=f"map_chunks-program-{uuid.uuid4().hex}")
    parts = [dask.delayed(_run_chunk, pure=True)(
        run, [a[k] if i in chunked else a for i, a in enumerate(args)],
        float(rows[k]) if reduce == "mean" else None) for k in range(len(rows))]
    outs = _outputs(program)
    if reduce is None:
        arrays = [_concatenated(da, parts, j, shape, dtype, rows, program, chunked[0])
                  for j, (shape, dtype) in enumerate(outs)]
    else:
        total = _tree(dask, parts, split_every, float(sum(rows)) if reduce == "mean" else None)
        arrays = [da.from_delayed(total[j], shape, dtype=_reduced(dtype, reduce))
                  for j, (shape, dtype) in enumerate(outs)]
    return arrays[0] if program.single else arrays


# ---------------------------------------------------------------- checks


def _dask() -> tuple:
    try:
        import dask
        import dask.array as da
    except ImportError as e:
        raise MissingToolError("map_chunks: needs dask: pip install 'simplegrad[dask]'") from e
    return da, dask


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


def _run_chunk(prog: Any, args: list, weight: float | None) -> list:
    """The program on one chunk; its outputs times ``weight`` (its rows) for a mean."""
    outs = prog(*args)
    outs = [outs] if not isinstance(outs, list) else outs
    return outs if weight is None else [np.multiply(o, weight) for o in outs]


def _add(*parts: list) -> list:
    """Output by output, the sum of some chunks' outputs."""
    total = [np.array(o, copy=True) for o in parts[0]]
    for part in parts[1:]:
        for j, o in enumerate(part):
            total[j] = total[j] + o
    return total


def _divide(total: list, rows: float) -> list:
    return [np.divide(o, rows) for o in total]


def _tree(dask: Any, parts: list, split_every: int, rows: float | None) -> Any:
    """The parts summed ``split_every`` at a time, level by level, then divided by ``rows``
    (a mean); one Delayed list of outputs."""
    while len(parts) > 1:
        parts = [dask.delayed(_add, pure=True)(*parts[k:k + split_every])
                 for k in range(0, len(parts), split_every)]
    return parts[0] if rows is None else dask.delayed(_divide, pure=True)(parts[0], rows)


def _concatenated(da: Any, parts: list, j: int, shape: tuple, dtype: np.dtype,
                  rows: tuple, program: Program, first: int) -> Any:
    """Output j of every chunk, concatenated along axis 0."""
    if not shape:
        raise ShapeError(f"map_chunks: reduce=None concatenates along axis 0, but output {j} "
                         "is a scalar; use reduce='sum' or 'mean'")
    recorded = program.inputs[first].shape[0]
    blocks = [da.from_delayed(part[j], ((n,) if shape[0] == recorded else shape[:1]) + shape[1:],
                              dtype=dtype) for part, n in zip(parts, rows)]
    return da.concatenate(blocks, axis=0)
