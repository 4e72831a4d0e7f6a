"""sg.jit: recorded once per signature, replayed compiled, guards on Python decisions.

Every value is checked against an independent answer: the same function written in numpy,
the untransformed function (a loop of plain calls), or central finite differences.
"""

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simplegrad as sg
from simplegrad import nn, optim


def test_replays_the_recording_and_records_once_per_signature():
    calls = []

    def f(x, w):
        calls.append(1)
        return (x @ w).tanh().sum(axis=1) * 3.0

    jf = sg.jit(f)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 2))
    for _ in range(5):
        x = rng.normal(size=(3, 4))
        np.testing.assert_allclose(jf(x, w), np.tanh(x @ w).sum(axis=1) * 3.0, rtol=1e-13)
    assert jf.recordings == 1 and len(calls) == 1         # replays call f no more
    x = rng.normal(size=(7, 4))                             # a new shape: a new signature
    np.testing.assert_allclose(jf(x, w), np.tanh(x @ w).sum(axis=1) * 3.0, rtol=1e-13)
    assert jf.recordings == 2
    np.testing.assert_allclose(jf(x.astype(np.float32), w), np.tanh(x @ w).sum(axis=1) * 3,
                               rtol=1e-5)                  # a new dtype: a new signature
    assert jf.recordings == 3


def test_branch_on_a_comparison_is_a_guard_that_records_again():
    def f(x):
        if x.sum() > 0:
            return x * 2.0
        return x.exp()

    def numpy_f(x):
        return x * 2.0 if x.sum() > 0 else np.exp(x)

    jf = sg.jit(f)
    xs = [np.array([1.0, 2.0]), np.array([3.0, -1.0]), np.array([-1.0, -2.0]),
          np.array([0.5, 0.5]), np.array([-3.0, 1.0])]
    for x in xs:
        np.testing.assert_allclose(jf(x), numpy_f(x), rtol=1e-14)
    assert jf.recordings == 2          # one per branch: the second branch's program is kept
    assert len(jf.programs(xs[0])) == 2


@pytest.mark.filterwarnings("ignore::simplegrad.ConversionWarning")  # (the guard is the point)
def test_float_of_a_value_is_a_guard_on_that_value():
    def f(x):
        s = float(x.sum())         # leaves the tape: a constant of the program
        return x * s

    jf = sg.jit(f)
    a, b = np.array([1.0, 2.0]), np.array([2.0, 2.0])
    np.testing.assert_allclose(jf(a), a * a.sum())
    c = np.array([2.0, 1.0])
    np.testing.assert_allclose(jf(c), c * c.sum())                        # same sum: replayed
    assert jf.recordings == 1
    np.testing.assert_allclose(jf(b), b * b.sum())                        # new sum: recorded
    assert jf.recordings == 2


@pytest.mark.filterwarnings("ignore::simplegrad.ConversionWarning")  # (the guard is the point)
def test_int_and_item_decisions_are_guards():
    def f(x):
        k = int(x.max())                    # a Python int from a value
        return x ** (k % 3) + x[0].item()

    def numpy_f(x):
        return x ** (int(x.max()) % 3) + x[0]

    jf = sg.jit(f)
    for x in [np.array([1.5, 0.2]), np.array([1.5, 0.3]), np.array([2.2, 0.1]),
              np.array([0.9, 1.0])]:
        np.testing.assert_allclose(jf(x), numpy_f(x), rtol=1e-14)


def test_transforms_inside_are_recorded_and_match_finite_differences():
    def loss(w, x):
        return ((x @ w).tanh() ** 2).sum()

    vg = sg.jit(sg.value_and_grad(loss))
    rng = np.random.default_rng(2)
    x = rng.normal(size=(5, 3))
    for _ in range(3):
        w = rng.normal(size=(3, 2))
        value, g = vg(w, x)
        assert value == pytest.approx(np.sum(np.tanh(x @ w) ** 2), rel=1e-13)
        eps, fd = 1e-6, np.zeros_like(w)
        for i in np.ndindex(w.shape):
            e = np.zeros_like(w)
            e[i] = eps
            fd[i] = (np.sum(np.tanh(x @ (w + e)) ** 2) - np.sum(np.tanh(x @ (w - e)) ** 2)) / (
                2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-9)
    assert vg.recordings == 1


def test_jax_habit_training_step_equals_the_untransformed_loop():
    rng = np.random.default_rng(0)
    model = nn.MLP([2, 8, 2], activation="tanh", rng=rng)
    x = rng.normal(size=(32, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(int)
    opt = optim.Adam(lr=0.05)

    def step(params, state, x, y):
        value, grads = sg.value_and_grad(
            lambda p: nn.cross_entropy(model.apply(p, x), y))(params)
        params, state = opt.update(grads, state, params)
        return value, params, state

    jstep = sg.jit(step)
    p1 = p2 = model.params()
    s1 = s2 = opt.init(p1)
    for _ in range(10):
        v1, p1, s1 = step(p1, s1, x, y)
        v2, p2, s2 = jstep(p2, s2, x, y)
        assert v2 == pytest.approx(v1, rel=1e-12)
    for k in p1:
        np.testing.assert_allclose(p2[k], p1[k], rtol=1e-11, atol=1e-13)
    assert float(s2["step"]) == s1["step"] == 10
    # the int step count is traced (a 0-d float after the first step): two signatures only
    assert jstep.recordings == 2


def test_static_arguments_are_part_of_the_signature():
    def f(x, n, scale):
        return x.reshape(n, -1).sum(axis=1) * scale

    jf = sg.jit(f, static_argnums=1)
    x = np.arange(6.0)
    np.testing.assert_allclose(jf(x, 2, 1.5), x.reshape(2, -1).sum(axis=1) * 1.5)
    np.testing.assert_allclose(jf(x, 2, 2.5), x.reshape(2, -1).sum(axis=1) * 2.5)
    assert jf.recordings == 1          # scale is traced: replayed at a new value
    np.testing.assert_allclose(jf(x, 3, 2.5), x.reshape(3, -1).sum(axis=1) * 2.5)
    assert jf.recordings == 2          # n is static: a new program
    # integer arrays are static by value (indices are constants of a program)
    jg = sg.jit(lambda x, i: x[i] * 2.0)
    np.testing.assert_allclose(jg(x, np.array([0, 2])), x[[0, 2]] * 2)
    np.testing.assert_allclose(jg(x, np.array([1, 5])), x[[1, 5]] * 2)
    assert jg.recordings == 2


def test_results_are_the_callers_arrays_and_constants_pass_through():
    jf = sg.jit(lambda x: {"same": x, "twice": x * 2.0, "fixed": 7})
    x = np.array([1.0, 2.0])
    for _ in range(2):
        out = jf(x)
        assert out["fixed"] == 7
        np.testing.assert_array_equal(out["twice"], [2.0, 4.0])
        out["same"][0] = 99.0                       # writing into a result leaves x alone
        assert x[0] == 1.0


def test_inside_a_transform_the_function_records_there():
    jf = sg.jit(lambda x: (x * x).sin())
    g = sg.grad(lambda x: jf(x).sum())(np.array([0.3, 1.1]))
    x = np.array([0.3, 1.1])
    np.testing.assert_allclose(g, np.cos(x * x) * 2 * x, rtol=1e-13)
    assert jf.recordings == 0


@pytest.mark.filterwarnings("ignore::simplegrad.ConversionWarning")  # (the guard is the point)
def test_max_programs_keeps_the_most_recent():
    jf = sg.jit(lambda x: x * 2.0 if float(x.sum()) > 0 else x * 3.0, max_programs=1)
    pos, neg = np.array([1.0]), np.array([-1.0])
    for x in (pos, neg, pos, neg):
        np.testing.assert_allclose(jf(x), x * (2.0 if x.sum() > 0 else 3.0))
    assert jf.recordings == 4 and len(jf.programs(pos)) == 1


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(sg.ArgumentError, match="jit: expected a function"):
        sg.jit(3)
    with pytest.raises(sg.ArgumentError, match="max_programs"):
        sg.jit(lambda x: x, max_programs=0)
    with pytest.raises(sg.ArgumentError, match="static_argnums"):
        sg.jit(lambda x: x, static_argnums="0")
    jf = sg.jit(lambda x, s: x * 2.0)
    with pytest.raises(sg.ArgumentError, match="neither an array nor hashable"):
        jf(np.ones(2), {1, 2})
    with pytest.raises(sg.ArgumentError, match="out of range"):
        sg.jit(lambda x: x, static_argnums=3)(np.ones(2))


# ---------------------------------------------------------------- the fast entry


def _no_general_path(monkeypatch):
    """Fail the test if a call replays through the general path (_Recorded.run) instead of
    the signature's generated entry."""
    def general(self, traced):
        raise AssertionError("replayed through the general path")
    module = importlib.import_module("simplegrad.transforms.jit")   # (the package's jit is sg.jit)
    monkeypatch.setattr(module._Recorded, "run", general)


def _step_by_hand(p, state, x, labels, scale):
    """The jitted function below, in numpy: its value and its rebuilt pytree."""
    h = np.tanh(x @ p["w"] + p["b"][0])
    return {"loss": (h[np.arange(len(labels)), labels] * scale).sum(),
            "p": {"w": p["w"] * 0.5, "b": [p["b"][0] + 1.0]},
            "state": (state["n"] + 1.0, None, {})}


def _step(p, state, x, labels, scale):
    h = (x @ p["w"] + p["b"][0]).tanh()
    return {"loss": (h[np.arange(len(labels)), labels] * scale).sum(),
            "p": {"w": p["w"] * 0.5, "b": [p["b"][0] + 1.0]},
            "state": (state["n"] + 1.0, None, {})}


def _assert_tree_close(got, want):
    got_leaves, got_def = sg.tree_flatten(got)
    want_leaves, want_def = sg.tree_flatten(want)
    assert got_def == want_def
    for g, w in zip(got_leaves, want_leaves):
        assert type(g) is np.ndarray
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)


def test_repeat_calls_take_the_generated_entry_and_rebuild_the_pytree(monkeypatch):
    rng = np.random.default_rng(3)
    p = {"w": rng.normal(size=(3, 4)), "b": [rng.normal(size=4)]}
    state = {"n": 0.0, "slots": {}, "none": None}
    labels = np.array([0, 3])
    jf = sg.jit(_step)
    x = rng.normal(size=(2, 3))
    _assert_tree_close(jf(p, state, x, labels, 2), _step_by_hand(p, state, x, labels, 2))
    _no_general_path(monkeypatch)
    for k in range(4):          # new values of every traced leaf, one signature
        p = {"w": rng.normal(size=(3, 4)), "b": [rng.normal(size=4)]}
        state = {"n": float(k), "slots": {}, "none": None}
        x = rng.normal(size=(2, 3))
        _assert_tree_close(jf(p, state, x, labels, k + 1),
                           _step_by_hand(p, state, x, labels, k + 1))
    assert jf.recordings == 1


def test_a_call_of_another_signature_is_never_served_by_an_entry():
    rng = np.random.default_rng(4)
    p = {"w": rng.normal(size=(3, 4)), "b": [rng.normal(size=4)]}
    state = {"n": 1.0, "slots": {}, "none": None}
    x, labels = rng.normal(size=(2, 3)), np.array([0, 3])
    jf = sg.jit(_step)
    jf(p, state, x, labels, 2)

    class Sub(np.ndarray):
        pass
    changed = [  # (arguments, new recording?)
        ((p, state, x, np.array([1, 2]), 2), True),         # other static label values
        ((p, state, x, labels.astype(np.int32), 2), True),  # other static dtype
        ((p, state, x, labels, 2.0), True),                 # a float where an int was
        ((p, state, x.astype(np.float32), labels, 2), True),
        ((p, state, rng.normal(size=(5, 3)), labels, 2), True),
        (({**p, "b": (p["b"][0],)}, state, x, labels, 2), True),   # a tuple for a list
        ((p, {**state, "slots": {"m": None}}, x, labels, 2), True),
        ((p, {**state, "none": 0}, x, labels, 2), True),
        ((p, state, x.view(Sub), labels, 2), False),        # same signature, general path
        ((p, state, x, labels, 2), False),
    ]
    for args, new in changed:
        before = jf.recordings
        want = _step_by_hand(*args)
        _assert_tree_close(jf(*args), want)
        _assert_tree_close(jf(*args), want)                 # replayed
        assert jf.recordings == before + new
    def g(p):
        return {k: v * 2.0 for k, v in p.items()}
    jg = sg.jit(g)
    for q in ({"a": np.ones(2)}, {"a": np.ones(2), "b": np.ones(3)}, {"b": np.ones(2)}):
        got = jg(q)
        assert sorted(got) == sorted(q)
        for k in q:
            np.testing.assert_array_equal(got[k], q[k] * 2)
    assert jg.recordings == 3        # a key more or another key: a new structure


def test_results_never_share_memory_with_arguments_or_the_program():
    c = np.array([5.0, 6.0])

    def f(x):
        return x, x[1:], x.reshape(2, 2), x * 2.0, c * 1.0
    jf = sg.jit(f)
    for _ in range(3):
        x = np.arange(4.0)
        outs = jf(x)
        for o in outs:
            assert isinstance(o, np.ndarray) and o.flags.writeable
            assert not np.shares_memory(o, x) and not np.shares_memory(o, c)
            o[...] = -1.0                       # the caller's to write into
        np.testing.assert_array_equal(x, np.arange(4.0))
    np.testing.assert_array_equal(jf(np.arange(4.0))[4], [5.0, 6.0])


def test_namedtuple_and_registered_node_arguments(monkeypatch):
    from collections import namedtuple

    class Layer:
        def __init__(self, w, b):
            self.w, self.b = w, b
    sg.register_pytree_node(Layer, lambda n: ((n.w, n.b), None), lambda _, ch: Layer(*ch))
    Pair = namedtuple("Pair", "x scale")
    jf = sg.jit(lambda layer, pair: ((pair.x @ layer.w + layer.b).tanh() * pair.scale).sum())
    rng = np.random.default_rng(5)
    for k in range(4):
        layer = Layer(rng.normal(size=(3, 2)), rng.normal(size=2))
        x = rng.normal(size=(4, 3))
        assert jf(layer, Pair(x, k + 0.5)) == pytest.approx(
            (np.tanh(x @ layer.w + layer.b) * (k + 0.5)).sum(), rel=1e-13)
        if k == 0:
            _no_general_path(monkeypatch)       # replays read the nodes in the entry
    assert jf.recordings == 1
    monkeypatch.undo()
    Other = namedtuple("Other", "x scale")      # same fields, another type: a new signature
    x = rng.normal(size=(4, 3))
    assert jf(layer, Other(x, 2.0)) == pytest.approx(
        (np.tanh(x @ layer.w + layer.b) * 2.0).sum(), rel=1e-13)
    assert jf.recordings == 2


def test_guards_switch_programs_without_recording_again():
    runs = []

    def f(x):
        runs.append(1)
        return x * 2.0 if x.sum() > 0 else -x

    jf = sg.jit(f)
    xs = [np.array([1.0, 2.0]), np.array([-1.0, -2.0])] * 5 + [np.array([3.0, -1.0])]
    for x in xs:
        np.testing.assert_array_equal(jf(x), x * 2.0 if x.sum() > 0 else -x)
    assert jf.recordings == len(runs) == 2


def test_keyword_arguments_are_traced_or_static_by_name():
    def f(x, n, scale=1.0):
        return x.reshape(n, -1).sum(axis=1) * scale

    def numpy_f(x, n, scale=1.0):
        return x.reshape(n, -1).sum(axis=1) * scale

    x = np.arange(12.0)
    for static in ({"static_argnames": "n"}, {"static_argnums": 1}):
        jf = sg.jit(f, **static)        # either names n both ways (jax.jit's rule)
        calls = [((x,), {"n": 2, "scale": 0.5}), ((x,), {"n": 2, "scale": 1.5}),
                 ((x, 3), {"scale": 2.0}), ((x, 3), {"scale": 2.5}), ((x, 4), {}),
                 ((x,), {"scale": 3.0, "n": 2})]
        for args, kwargs in calls:
            np.testing.assert_allclose(jf(*args, **kwargs), numpy_f(*args, **kwargs),
                                       rtol=1e-14)
        # traced scale replays; n (by keyword or by position) and each structure records
        assert jf.recordings == 3
    with pytest.raises(sg.ArgumentError, match="static_argnames"):
        sg.jit(f, static_argnames=3)
    with pytest.raises(sg.ArgumentError, match="out of range"):
        sg.jit(f, static_argnums=5)


# any pytree of plain containers, traced leaves (float arrays, Python numbers) and static ones
_LEAVES = st.one_of(
    st.sampled_from([(), (2,), (1, 3)]).map(lambda s: ("array", s)),
    st.floats(-2, 2).map(lambda v: ("value", v)),
    st.integers(-3, 3).map(lambda v: ("value", v)),
    st.sampled_from(["relu", "tanh", None, True]).map(lambda v: ("value", v)),
    st.just(("index", None)))
_TREES = st.recursive(_LEAVES, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.lists(kids, max_size=3).map(tuple),
    st.dictionaries(st.sampled_from("abcd"), kids, max_size=3)), max_leaves=8)


def _fill(tree, rng):
    """A pytree of the drawn structure with fresh values at its traced leaves."""
    if isinstance(tree, tuple) and len(tree) == 2 and tree[0] in ("array", "value", "index"):
        kind, what = tree
        if kind == "array":
            return rng.normal(size=what)
        if kind == "index":
            return np.array([1, 0])
        return rng.normal() if type(what) is float else what
    if isinstance(tree, dict):
        return {k: _fill(v, rng) for k, v in tree.items()}
    return type(tree)(_fill(v, rng) for v in tree)


def _traced(x):
    return isinstance(x, (float, sg.Variable, np.ndarray)) and not (
        isinstance(x, np.ndarray) and x.dtype.kind != "f") or type(x) is int


@settings(max_examples=40, deadline=None)
@given(_TREES, _TREES)
def test_replays_any_plain_pytree_as_the_function_computes_it(tree, other):
    def f(a, b=None):
        out = sg.tree_map(lambda x: x * 2.0 + 1.0 if isinstance(x, sg.Variable) else x, a)
        return {"out": out, "b": sg.tree_map(lambda x: x - 1.0 if isinstance(x, sg.Variable)
                                             else x, b), "n": len(sg.tree_leaves(a))}

    def numpy_f(a, b=None):
        return {"out": sg.tree_map(lambda x: np.array(x * 2.0 + 1.0) if _traced(x) else x, a),
                "b": sg.tree_map(lambda x: np.array(x - 1.0) if _traced(x) else x, b),
                "n": len(sg.tree_leaves(a))}

    rng = np.random.default_rng(6)
    jf = sg.jit(f)
    for k in range(3):          # records once; replays at new values through the entry
        a, b = _fill(tree, rng), _fill(other, rng)
        with pytest.MonkeyPatch.context() as patch:
            if k:
                _no_general_path(patch)
            got = jf(a, b=b)
        want = numpy_f(a, b=b)
        got_leaves, got_def = sg.tree_flatten(got)
        want_leaves, want_def = sg.tree_flatten(want)
        assert got_def == want_def
        for g, w in zip(got_leaves, want_leaves):
            if isinstance(w, np.ndarray) and w.dtype.kind == "f":
                assert type(g) is np.ndarray
                np.testing.assert_allclose(g, w, rtol=1e-14)
            else:
                assert type(g) is type(w) and np.all(g == w)
    assert jf.recordings == 1
