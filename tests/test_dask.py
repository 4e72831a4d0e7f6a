"""Programs and their gradients on dask arrays: lazy replay, compiled replay, map_chunks,
pickling, and a real cluster.

Every value is checked against the numpy replay of the same program (1e-12 relative; 1e-10
for sums across chunks, whose order of addition differs), or against the program recorded on
the whole batch. Laziness is checked with a scheduler that refuses to run any task while the
dask outputs are built, and tasks are counted with a dask callback when they run.
"""

from __future__ import annotations

import functools
import operator
import pickle
import subprocess
import sys

import numpy as np
import pytest

import simplegrad as sg

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
from dask.callbacks import Callback  # noqa: E402  (after the skip when dask is absent)


class ComputedError(Exception):
    """A dask task ran while a program was only being built."""


def _refuse(*args, **kwargs):
    raise ComputedError("a dask task was computed before .compute()")


def refusing():
    """Within the block, computing anything with dask raises ComputedError."""
    return dask.config.set(scheduler=_refuse)


class Tasks(Callback):
    """Counts the tasks dask runs, by the name of the function each calls."""

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def _pretask(self, key, dsk, state):
        task = dsk[key]
        fn = getattr(task, "func", None)
        self.names.append(getattr(fn, "__name__", type(fn).__name__))


# ---------------------------------------------------------------- programs


def mlp_program(n: int, rng):
    """An MLP's mean squared loss, its gradients and a second-order term (the gradient of
    |dL/dW1|^2), recorded on n rows: inputs X, y, W1, b1, W2."""
    X, y = rng.normal(size=(n, 6)), rng.normal(size=(n, 1))
    W1, b1, W2 = rng.normal(size=(6, 5)) / 3, rng.normal(size=5), rng.normal(size=(5, 1)) / 2
    op = sg.Ops()
    xs = [op.var(v) for v in (X, y, W1, b1, W2)]
    x, t, w1, c1, w2 = xs
    loss = op.mean((op.tanh(x @ w1 + c1) @ w2 - t) ** 2)
    g1, gc, g2 = op.grad(loss, [w1, c1, w2])
    (h1,) = op.grad(op.sum(g1 * g1), [w1])
    return op.program(xs, [loss, g1, gc, g2, h1]), [X, y, W1, b1, W2]


def logistic_program(X, y, w):
    """Logistic regression: the mean loss and its gradient, recorded on (X, y, w)."""
    op = sg.Ops()
    x, t, v = op.var(X), op.var(y), op.var(w)
    z = x @ v
    loss = op.mean(op.log(1 + op.exp(-z)) * t + op.log(1 + op.exp(z)) * (1 - t))
    (g,) = op.grad(loss, [v])
    return op.program([x, t, v], [loss, g])


@pytest.fixture
def data(rng):
    X = rng.normal(size=(600, 4))
    y = (rng.random(600) < 1 / (1 + np.exp(-X @ [1.0, -2.0, 0.5, 0.0]))).astype(float)
    return X, y, rng.normal(size=4)


def close(got, want, rtol=1e-12, atol=0.0):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- replay on dask arrays


@pytest.mark.parametrize("compiled", [False, True], ids=["program", "compiled"])
def test_replay_is_lazy_and_equals_numpy(compiled, rng):
    prog, values = mlp_program(400, rng)
    run = sg.compile(prog) if compiled else prog
    lazy = [da.from_array(values[0], chunks=(100, 3)), da.from_array(values[1], chunks=100),
            *values[2:]]
    with refusing():
        outs = run(*lazy)
    assert all(isinstance(o, da.Array) for o in outs)
    close(dask.compute(*outs, scheduler="sync"), prog(*values), rtol=1e-12, atol=1e-12)


def test_compiled_keeps_the_fast_path_for_ndarrays(rng):
    prog, values = mlp_program(40, rng)
    c = sg.compile(prog)
    assert "np.add.reduce(" in c.source and "np.add.reduce(" not in c.dispatch_source
    assert "np.sum(" in c.dispatch_source
    assert c._numpy.__globals__["__builtins__"] == {"slice": slice}
    outs = c(*values)
    assert all(type(o) is np.ndarray for o in outs)
    close(outs, prog(*values), rtol=0)                    # the same numpy calls: bit for bit


def test_inputs_are_checked_without_computing(rng):
    prog, values = mlp_program(40, rng)
    wrong = da.from_array(values[0][:, :5], chunks=10)
    for run in (prog, sg.compile(prog)):
        with refusing():
            with pytest.raises(sg.ShapeError, match=r"input .* has shape \(40, 6\), got \(40, 5\)"):
                run(wrong, *values[1:])
            with pytest.raises(sg.DTypeError, match="complex128"):
                run(da.from_array(values[0].astype(complex)), *values[1:])
            ints = da.from_array(np.arange(40 * 6).reshape(40, 6) % 5, chunks=20)
            out = run(ints, *values[1:])                  # int64 -> float64 is a safe cast
        close(dask.compute(*out, scheduler="sync"),
              prog(np.asarray(ints, dtype=float), *values[1:]), atol=1e-12)


def test_a_variable_is_not_a_duck_array(rng):
    """Variables implement __array_ufunc__ too; a program still refuses them, by name."""
    prog, values = mlp_program(10, rng)
    x = sg.Ops().var(values[0], name="X")
    for run in (prog, sg.compile(prog)):
        with pytest.raises(sg.ArgumentError, match=r"got the Variable X; pass its value"):
            run(x, *values[1:])


def test_a_primitive_that_would_compute_raises_materialize_error(rng):
    x0 = rng.normal(size=(4, 5))
    rows, cols = np.array([[0, 1], [3, 2]]), np.array([[4, 0], [1, 1]])
    op = sg.Ops()
    x = op.var(x0)
    y = op.sum(op.tanh(x[rows, cols]), name="y")      # nd fancy indexing: dask has none
    prog = op.program([x], y)
    lazy = da.from_array(x0, chunks=2)
    assert issubclass(sg.MaterializeError, sg.SimplegradError)
    assert issubclass(sg.MaterializeError, RuntimeError)
    for run in (prog, sg.compile(prog)):
        with refusing(), pytest.raises(sg.MaterializeError, match=r"getitem.*materialize=True"):
            run(lazy)
        got = run(lazy, materialize=True)                # allowed: the index computes x
        np.testing.assert_allclose(dask.compute(got, scheduler="sync")[0],
                                   np.tanh(x0[rows, cols]).sum(), rtol=1e-12)


@pytest.mark.parametrize("shape, axis", [((7, 3), 0), ((4, 9), 1), ((3, 5, 2), 1)])
def test_the_adjoint_of_indexing_is_a_segment_sum(shape, axis, rng):
    """The gradient of x[..., idx] scatters with np.add.at in numpy; on dask, chunk by chunk."""
    x0 = rng.normal(size=shape)
    idx = rng.integers(0, shape[axis], size=11)              # repeated indices add up
    op = sg.Ops()
    x = op.var(x0)
    y = x[(slice(None),) * axis + (idx,)]
    (g,) = op.grad(op.sum(y * y * rng.normal(size=y.shape)), [x])
    prog = op.program([x], g)
    assert "scatter_add" in [n.prim.name for n in prog.nodes]
    with refusing():
        out = prog(da.from_array(x0, chunks=2))
    blocks = [k for k in dict(out.__dask_graph__()) if str(k).count("_segment_block")]
    assert len(blocks) == -(-11 // 2)                        # one per chunk of the 11 rows
    np.testing.assert_allclose(out.compute(scheduler="sync"), prog(x0), rtol=1e-12)


# ---------------------------------------------------------------- map_chunks


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_map_chunks_equals_the_full_batch(reduce, data):
    X, y, w = data
    prog = logistic_program(X[:100], y[:100], w)
    full = logistic_program(X, y, w)(X, y, w)
    with refusing():
        loss, grad = sg.map_chunks(prog, da.from_array(X, chunks=(100, 2)),
                                   da.from_array(y, chunks=200), w, reduce=reduce)
    assert isinstance(loss, da.Array) and loss.shape == () and grad.shape == (4,)
    tasks = Tasks()
    with tasks:
        loss, grad = dask.compute(loss, grad, scheduler="sync")
    assert tasks.names.count("_run_chunk") == 6          # one task per chunk, each run once
    scale = 6 if reduce == "sum" else 1                  # each chunk's mean, added
    close([loss / scale, grad / scale], full, rtol=1e-10)


def test_map_chunks_concatenates_per_example_outputs(data):
    X, y, w = data
    op = sg.Ops()
    x, v = op.var(X[:150]), op.var(w)
    p = op.sigmoid(x @ v)
    (gx,) = op.grad(op.sum(p), [x])                      # per example: d p_i / d x_i
    prog = op.program([x, v], [p, gx])
    p_all, gx_all = sg.map_chunks(prog, da.from_array(X, chunks=150), w, reduce=None)
    assert p_all.shape == (600,) and gx_all.shape == (600, 4)
    loop = [prog(X[k:k + 150], w) for k in range(0, 600, 150)]
    close(dask.compute(p_all, gx_all, scheduler="sync"),
          [np.concatenate([o[j] for o in loop]) for j in range(2)], rtol=1e-12)


def _depth(graph: dict, key) -> int:
    """Tasks along the longest chain of dependencies that ends at ``key``."""
    from dask.core import get_dependencies
    depth: dict = {}
    order = [key]
    while order:
        k = order[-1]
        deps = [d for d in get_dependencies(graph, k) if d not in depth]
        if deps:
            order.extend(deps)
            continue
        order.pop()
        depth[k] = 1 + max((depth[d] for d in get_dependencies(graph, k)), default=0)
    return depth[key]


def _kind(key) -> str:
    """The part of a map_chunks key between its prefix and its uuid: run, add, out0, ..."""
    name = key[0] if isinstance(key, tuple) else key
    return name.split("-")[1] if name.startswith("map_chunks-") else "input data"


def test_map_chunks_reduces_as_a_tree(data, monkeypatch):
    """Past READ_PARTS partials, each level of the tree is a layer of tasks."""
    from simplegrad import distributed as sgd
    monkeypatch.setattr(sgd, "READ_PARTS", 4)
    X, y, w = data
    prog = logistic_program(X[:30], y[:30], w)
    loss, grad = sg.map_chunks(prog, da.from_array(X, chunks=30), da.from_array(y, chunks=30),
                               w, split_every=4)
    graph = dict(loss.__dask_graph__())
    kinds = [_kind(k) for k in graph]
    assert kinds.count("run") == 20 and kinds.count("add") == 5 + 2   # 20 -> 5 -> 2
    assert kinds.count("out0") == 1                                     # adds the last 2
    assert set(graph) - {(loss.name,)} < set(dict(grad.__dask_graph__()))   # shared tasks
    assert _depth(graph, (loss.name,)) == 4 + 1          # run, add, add, out; the getters
    tasks = Tasks()
    with tasks:
        value = loss.compute(scheduler="sync")
    assert tasks.names.count("_run_chunk") == 20
    want = sum(prog(X[k:k + 30], y[k:k + 30], w)[0] for k in range(0, 600, 30))
    np.testing.assert_allclose(value, want, rtol=1e-12)


@pytest.mark.parametrize("chunks, read, depth", [(600, 64, 2), (100, 64, 2), (75, 64, 2),
                                                 (50, 64, 2), (20, 64, 2), (50, 8, 3)])
def test_map_chunks_is_two_tasks_deep_on_up_to_read_parts_chunks(chunks, read, depth, data,
                                                                  monkeypatch):
    """A task per chunk, then a task per output adding the partials into that output's only
    block: two deep while one task may read every partial (READ_PARTS of them), one more per
    level of partial sums past that; the data's tasks below (from_array's getters) add one."""
    from simplegrad import distributed as sgd
    monkeypatch.setattr(sgd, "READ_PARTS", read)
    X, y, w = data
    prog = logistic_program(X[:chunks], y[:chunks], w)
    outs = sg.map_chunks(prog, da.from_array(X, chunks=chunks), da.from_array(y, chunks=chunks),
                         w, reduce="mean")
    graph = {k: v for out in outs for k, v in dict(out.__dask_graph__()).items()}
    assert {_kind(k) for k in graph} == {"input data", "run", "out0", "out1"} | \
        ({"add"} if depth > 2 else set())
    for out in outs:
        key = (out.name,) + (0,) * out.ndim
        assert _depth(graph, key) == depth + 1
    close(dask.compute(*outs, scheduler="sync"), logistic_program(X, y, w)(X, y, w), rtol=1e-10)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("chunks, split_every", [(20, 8), (20, 4), (30, 2), (50, 8)])
def test_the_tree_adds_in_one_order_however_its_levels_are_tasks(chunks, split_every, reduce,
                                                                 data, monkeypatch):
    """The levels of partial sums an output's task adds itself give the bits the levels as
    tasks give (split_every alone sets the order of the sum); both agree with the program
    on the whole batch."""
    from simplegrad import distributed as sgd
    X, y, w = data
    prog = logistic_program(X[:chunks], y[:chunks], w)
    lazy = da.from_array(X, chunks=chunks), da.from_array(y, chunks=chunks)
    values, adds = [], []
    for read in (sgd.READ_PARTS, 2):                # levels in the outputs' tasks, as tasks
        monkeypatch.setattr(sgd, "READ_PARTS", read)
        outs = sg.map_chunks(prog, *lazy, w, reduce=reduce, split_every=split_every)
        adds.append(sum(_kind(k) == "add" for k in dict(outs[1].__dask_graph__())))
        values.append(dask.compute(*outs, scheduler="sync"))
    assert adds[0] == 0 and adds[1] > 0
    parts = [prog(X[k:k + chunks], y[k:k + chunks], w) for k in range(0, 600, chunks)]
    if reduce == "mean":
        parts = [[np.multiply(o, float(chunks)) for o in part] for part in parts]
    for j, (inline, tasks) in enumerate(zip(*values, strict=True)):
        level = [part[j] for part in parts]         # the order by hand: groups, left to right
        while len(level) > split_every:
            level = [functools.reduce(operator.add, level[g:g + split_every])
                     for g in range(0, len(level), split_every)]
        want = functools.reduce(operator.add, level)
        want = want / 600.0 if reduce == "mean" else want
        np.testing.assert_array_equal(inline, want)
        np.testing.assert_array_equal(tasks, want)
    full = logistic_program(X, y, w)(X, y, w)
    scale = 1.0 if reduce == "mean" else 600 / chunks
    close(values[0], [v * scale for v in full], rtol=1e-10)


def test_the_program_is_unpickled_once_per_process(data):
    """Each chunk's task carries the program's pickled bytes, made once per program; a
    process that unpickles several tasks unpickles the program once."""
    from simplegrad import distributed as sgd
    X, y, w = data
    prog = sg.compile(logistic_program(X[:100], y[:100], w))
    outs = sg.map_chunks(prog, da.from_array(X, chunks=100), da.from_array(y, chunks=100), w)
    again = sg.map_chunks(prog, da.from_array(X, chunks=100), da.from_array(y, chunks=100), w)
    runs = [v for k, v in dict(outs[0].__dask_graph__()).items() if _kind(k) == "run"]
    runs += [v for k, v in dict(again[0].__dask_graph__()).items() if _kind(k) == "run"]
    assert len(runs) == 12 and len({id(task[1]) for task in runs}) == 1   # one per program
    assert all(task[1].value is prog for task in runs)                      # here: itself
    sent = [pickle.dumps(task) for task in runs]                            # one message each
    assert all(len(s) < 3 * len(sent[0]) for s in sent)
    sgd._UNPICKLED.clear()
    loads = []
    real = pickle.loads

    def counting(payload, *args, **kwargs):
        loads.append(len(payload))
        return real(payload, *args, **kwargs)

    there = [pickle.loads(s) for s in sent]                                 # a worker's view
    try:
        sgd.pickle.loads = counting
        values = [fn(shipped, args, weight) for fn, shipped, args, weight in
                  [(t[0], t[1], [X[k % 6 * 100:(k % 6 + 1) * 100], y[k % 6 * 100:(k % 6 + 1)
                                 * 100], w], t[3]) for k, t in enumerate(there)]]
    finally:
        sgd.pickle.loads = real
    assert len(loads) == 1                                       # the program, once
    assert there[0][1].value is there[5][1].value is not prog
    close(values[0], prog(X[:100], y[:100], w), rtol=0)


def test_large_parameters_are_one_key_small_ones_are_written_in(data, monkeypatch):
    from simplegrad import distributed as sgd
    X, y, w = data
    prog = logistic_program(X[:100], y[:100], w)
    lazy = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    small = dict(sg.map_chunks(prog, *lazy, w)[1].__dask_graph__())
    assert not [k for k in small if str(k).endswith("-input-2")]
    monkeypatch.setattr(sgd, "INLINE_BYTES", 16)
    outs = sg.map_chunks(prog, *lazy, w, reduce="mean")
    graph = dict(outs[1].__dask_graph__())
    (key,) = [k for k in graph if str(k).endswith("-input-2")]
    np.testing.assert_array_equal(graph[key], w)
    close(dask.compute(*outs, scheduler="sync"), logistic_program(X, y, w)(X, y, w), rtol=1e-10)


def test_map_chunks_ragged_last_chunk(data):
    X, y, w = data
    prog = logistic_program(X[:128], y[:128], w)
    lazy = da.from_array(X, chunks=(128, 4)), da.from_array(y, chunks=128)   # ..., 88 rows
    try:
        prog(X[:88], y[:88], w)
    except sg.ShapeError:
        with pytest.raises(sg.ShapeError, match="a chunk of 88 rows; the program was recorded "
                                                "on 128"):
            sg.map_chunks(prog, *lazy, w, reduce="mean")
        pytest.skip("a ragged chunk needs programs at any batch size (issue 17)")
    loss, grad = sg.map_chunks(prog, *lazy, w, reduce="mean")
    close(dask.compute(loss, grad, scheduler="sync"), logistic_program(X, y, w)(X, y, w),
          rtol=1e-10)


def test_map_chunks_refuses_bad_arguments(data):
    X, y, w = data
    prog = logistic_program(X[:100], y[:100], w)
    Xd, yd = da.from_array(X, chunks=100), da.from_array(y, chunks=100)
    with pytest.raises(sg.ArgumentError, match="no input is a dask array"):
        sg.map_chunks(prog, X[:100], y[:100], w)
    with pytest.raises(sg.ArgumentError, match="reduce must be"):
        sg.map_chunks(prog, Xd, yd, w, reduce="max")
    with pytest.raises(sg.ArgumentError, match=r"takes 3 input\(s\)"):
        sg.map_chunks(prog, Xd, yd)
    with pytest.raises(sg.ShapeError, match="has 500 rows"):
        sg.map_chunks(prog, Xd, yd[:500], w)
    with pytest.raises(sg.ShapeError, match="output 0 is a scalar"):
        sg.map_chunks(prog, Xd, yd, w, reduce=None)
    with pytest.raises(sg.ArgumentError, match="expected a Program"):
        sg.map_chunks(lambda *a: a, Xd, yd, w)


def test_map_chunks_takes_a_compiled_program(data):
    X, y, w = data
    prog = logistic_program(X[:200], y[:200], w)
    outs = sg.map_chunks(sg.compile(prog), da.from_array(X, chunks=200),
                         da.from_array(y, chunks=200), w, reduce="mean")
    close(dask.compute(*outs, scheduler="sync"), logistic_program(X, y, w)(X, y, w), rtol=1e-10)

# ---------------------------------------------------------------- pickling


@sg.custom_vjp
def softplus(x):
    """log(1 + e^x), with its gradient given by hand."""
    return np.log(1 + np.exp(x))


@softplus.defvjp
def _softplus_bwd(g, out, x):
    return (g * (1 - np.exp(-out)),)


@pytest.mark.parametrize("dumps", ["pickle", "cloudpickle"])
def test_programs_pickle(dumps, rng):
    dump = pytest.importorskip(dumps).dumps
    prog, values = mlp_program(20, rng)
    op = sg.Ops()
    x = op.var(rng.normal(size=5))
    y = op.sum(softplus(x) * op.log_softmax(x))
    custom = op.program([x], [y, *op.grad(y, [x])])
    for p, args in ((prog, values), (custom, [x.value])):
        for run in (p, sg.compile(p)):
            back = pickle.loads(dump(run))
            close(back(*args), p(*args), rtol=0)          # the same program, bit for bit
    assert pickle.loads(dump(sg.compile(prog))).source == sg.compile(prog).source

# ---------------------------------------------------------------- on a cluster


def _unpickled() -> int:
    """On a worker: how many programs this process has unpickled for map_chunks."""
    from simplegrad import distributed as sgd
    return len(sgd._UNPICKLED)


def _cluster_gradient(processes: bool, data) -> None:
    distributed = pytest.importorskip("distributed")
    X, y, w = data
    prog = logistic_program(X[:150], y[:150], w)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        for step in range(2):                     # the same program twice, w moved between
            loss, grad = sg.map_chunks(prog, da.from_array(X, chunks=150),
                                       da.from_array(y, chunks=150), w + step, reduce="mean")
            with distributed.get_task_stream(client) as stream:
                got = client.compute([loss, grad], sync=True)
            close(got, logistic_program(X, y, w + step)(X, y, w + step), rtol=1e-10)
            ran = sorted(_kind(r["key"]) for r in stream.data
                         if "finalize" in str(r["key"]) or _kind(r["key"]) != "input data")
            assert ran == ["out0", "out1"] + ["run"] * 4     # a task per chunk, one per output
        unpickled = client.run(_unpickled)
    if processes:                                 # once per worker process, not per task
        assert sorted(unpickled.values()) in ([1, 1], [0, 1])


def test_map_chunks_on_a_threaded_cluster(data):
    _cluster_gradient(False, data)


@pytest.mark.slow
def test_map_chunks_on_worker_processes(data):
    _cluster_gradient(True, data)


def test_import_simplegrad_does_not_import_dask():
    code = "import simplegrad, sys; print(sorted(m for m in sys.modules if m.startswith('dask')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_per_block_forwards_declare_the_dtype_they_compute(rng):
    """Dask is told each block forward's dtype before running it: float32 stays float32."""
    a0 = (rng.normal(size=(4, 3, 3)) + 3 * np.eye(3)).astype(np.float32)
    op = sg.Ops()
    a = op.var(a0)
    s = a @ op.transpose(a, (0, 2, 1))
    outs = [op.det(a), op.inv(a), op.solve(a, a), op.slogdet(a), op.cholesky(s),
            *op.eigh(s), *op.svd(a), *op.qr(a), op.pinv(a)]
    prog = op.program([a], outs)
    lazy = prog(da.from_array(a0, chunks=(2, 3, 3)))
    for got, want, declared in zip(dask.compute(*lazy, scheduler="sync"), prog(a0), lazy):
        assert declared.dtype == got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
