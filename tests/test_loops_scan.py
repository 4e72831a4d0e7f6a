"""sg.scan and sg.fori_loop: one entry with the body as a sub-program, its vjp a reverse scan
of the body's vjp and its jvp a scan of the body's jvp, checked against closed forms and the
same loop unrolled in simplegrad, at orders 1-4, under vmap and jit."""

import math

import numpy as np
import pytest

import simplegrad as sg


def squarings(k):
    """x -> x^(2^k) by a fori_loop of k squarings (pytensor #1772's case)."""
    return lambda x: sg.fori_loop(0, k, lambda i, c: c * c, x)


@pytest.mark.parametrize("k", [1, 3, 4])
@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_fori_loop_of_squarings_against_closed_form(k, order):
    x, n = 1.07, 2 ** k
    exact = math.prod(n - j for j in range(order)) * x ** (n - order)
    f = squarings(k)
    for _ in range(order):
        f = sg.grad(f)
    assert np.allclose(f(x), exact, rtol=1e-12)
    assert np.allclose(sg.derivative(squarings(k), order=order)(x), exact, rtol=1e-12)


def test_fori_loop_records_one_loop_entry():
    op = sg.Ops()
    x = op.var(1.0, name="x")
    squarings(100)(x)
    assert sum(" = scan(" in line for line in op.format_trace().splitlines()) == 1
    assert len(op.tape) < 10


def test_scan_prints_its_body_once_under_the_loop_line_with_its_trip_count():
    op = sg.Ops()
    h0 = op.var(np.ones(4), name="h0")
    h, ys = sg.scan(cell(W, U), h0, np.ones((100, 3)))
    op.grad((h * h).sum() + ys.sum(), h0)
    text = op.format_trace()
    loops = [line for line in text.splitlines() if " = scan(" in line]
    assert len(loops) == 3      # the forward, the carries' history, the reverse scan
    assert all(line.endswith("# x 100") for line in loops)
    assert sum("tanh" in line for line in text.splitlines()) == 3   # once per body
    assert "reverse=True" in loops[2]


def test_fori_loop_reads_the_index_and_dynamic_bounds():
    body = lambda i, c: c + i * c       # c * prod(1 + i)
    assert np.allclose(sg.fori_loop(2, 5, body, 1.5), 1.5 * 3 * 4 * 5)
    assert np.allclose(sg.grad(lambda c: sg.fori_loop(2, 5, body, c))(1.5), 60.0)
    op = sg.Ops()
    c = op.var(1.5)
    n = op.leaf(np.array(5), None, False)
    y = sg.fori_loop(2, n, body, c)
    assert np.allclose(y.value, 90.0)
    assert np.allclose(op.grad(y, c).value, 60.0)
    assert np.allclose(sg.fori_loop(3, 1, body, 2.0), 2.0)   # no trips


# ---------------------------------------------------------------- an RNN cell

RNG = np.random.default_rng(3)
W = RNG.normal(size=(4, 4)) * 0.6
U = RNG.normal(size=(4, 3)) * 0.6
XS = RNG.normal(size=(6, 3))
H0 = RNG.normal(size=4)


def cell(W, U):
    def step(h, x):
        h = np.tanh(W @ h + U @ x)
        return h, (h * h).sum()
    return step


def loss_scan(W, U, xs, h0):
    h, ys = sg.scan(cell(W, U), h0, xs)
    return (h ** 3).sum() + (ys * ys).sum()


def loss_unrolled(W, U, xs, h0):
    step, h, total = cell(W, U), h0, 0.0
    for t in range(xs.shape[0]):
        h, y = step(h, xs[t])
        total = total + y * y
    return (h ** 3).sum() + total


def close(a, b, tol):
    """Within tol of b, relative to b's largest entry."""
    return np.abs(np.asarray(a) - b).max() <= tol * np.abs(b).max()


def test_rnn_scan_matches_the_unrolled_loop_at_orders_1_to_3():
    args = (W, U, XS, H0)
    assert close(loss_scan(*args), loss_unrolled(*args), 1e-15)
    for i in range(4):
        a = sg.grad(loss_scan, argnums=i)(*args)
        b = sg.grad(loss_unrolled, argnums=i)(*args)
        assert close(a, b, 1e-15)
    for i in (0, 3):
        a = sg.hessian(loss_scan, argnums=i)(*args)
        b = sg.hessian(loss_unrolled, argnums=i)(*args)
        assert close(a, b, 1e-15)
    # third order: along a direction, by nested grads of a scalar parameter
    d = RNG.normal(size=4)
    f3 = lambda f: sg.grad(sg.grad(sg.grad(lambda s: f(W, U, XS, H0 + s * d))))(0.2)
    assert close(f3(loss_scan), f3(loss_unrolled), 1e-15)


def test_rnn_scan_under_vmap_matches_per_example():
    h0s = RNG.normal(size=(3, 4))
    got = sg.vmap(lambda h0: loss_scan(W, U, XS, h0))(h0s)
    assert np.allclose(got, [loss_unrolled(W, U, XS, h) for h in h0s], rtol=1e-14)
    g = sg.vmap(sg.grad(lambda h0: loss_scan(W, U, XS, h0)))(h0s)
    g2 = np.array([sg.grad(loss_unrolled, argnums=3)(W, U, XS, h) for h in h0s])
    assert np.allclose(g, g2, rtol=1e-13, atol=1e-14)
    # a batched xs and a batched closure (W) read inside the body
    xss = RNG.normal(size=(2, 6, 3))
    got = sg.vmap(lambda xs: loss_scan(W, U, xs, H0))(xss)
    assert np.allclose(got, [loss_unrolled(W, U, xs, H0) for xs in xss], rtol=1e-14)
    Ws = RNG.normal(size=(2, 4, 4)) * 0.5
    got = sg.vmap(sg.grad(lambda W: loss_scan(W, U, XS, H0)))(Ws)
    expect = [sg.grad(loss_unrolled)(w, U, XS, H0) for w in Ws]
    assert np.allclose(got, expect, rtol=1e-13, atol=1e-14)


def test_rnn_scan_under_jit():
    f = sg.jit(sg.grad(loss_scan))
    assert np.allclose(f(W, U, XS, H0), sg.grad(loss_unrolled)(W, U, XS, H0), rtol=1e-13)
    assert np.allclose(f(W * 0.5, U, XS, H0), sg.grad(loss_unrolled)(W * 0.5, U, XS, H0),
                       rtol=1e-13)


# ---------------------------------------------------------------- the signature


def test_scan_on_arrays_returns_arrays_and_stacks_ys():
    carry, ys = sg.scan(lambda c, x: (c + x, c * x), 0.0, np.arange(1.0, 5.0))
    assert type(carry) is np.ndarray and carry == 10.0
    assert np.array_equal(ys, [0.0, 2.0, 9.0, 24.0])


def test_scan_reverse_runs_from_the_end_and_stacks_in_xs_order():
    carry, ys = sg.scan(lambda c, x: (c * 10 + x, c), 0.0, np.array([1.0, 2.0, 3.0]),
                        reverse=True)
    assert carry == 321.0
    assert np.array_equal(ys, [32.0, 3.0, 0.0])
    g = sg.grad(lambda xs: sg.scan(lambda c, x: (c * 10 + x, c), 0.0, xs,
                                   reverse=True)[0])(np.array([1.0, 2.0, 3.0]))
    assert np.allclose(g, [1.0, 10.0, 100.0])     # 321 = ((x2 * 10 + x1) * 10 + x0)


def test_scan_without_xs_takes_length():
    carry, ys = sg.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=5)
    assert carry == 32.0 and np.array_equal(ys, [1.0, 2.0, 4.0, 8.0, 16.0])
    assert np.allclose(sg.grad(lambda c: sg.scan(lambda c, _: (c * c, None), c, None,
                                                 length=3)[0])(1.1), 8 * 1.1 ** 7)
    with pytest.raises(sg.ArgumentError, match="length"):
        sg.scan(lambda c, _: (c, None), 1.0, None)
    with pytest.raises(sg.ShapeError):
        sg.scan(lambda c, x: (c, None), 1.0, np.ones(3), length=4)


def test_scan_pytree_carry_and_ys():
    def step(c, x):
        return {"p": c["p"] * x["a"], "q": (c["q"][0] + x["b"],)}, [c["p"], x["b"] * 2]
    xs = {"a": np.array([2.0, 3.0]), "b": np.array([[1.0, 1.0], [2.0, 0.5]])}
    carry, ys = sg.scan(step, {"p": 1.5, "q": (np.zeros(2),)}, xs)
    assert np.allclose(carry["p"], 9.0) and np.allclose(carry["q"][0], [3.0, 1.5])
    assert np.allclose(ys[0], [1.5, 3.0]) and np.allclose(ys[1], [[2, 2], [4, 1]])

    def loss(p, a):
        carry, ys = sg.scan(step, {"p": p, "q": (np.zeros(2),)}, {"a": a, "b": xs["b"]})
        return carry["p"] * ys[0].sum()
    # p^2 a0 a1 (1 + a0)
    p, a = 1.5, np.array([2.0, 3.0])
    assert np.allclose(sg.grad(loss)(p, a), 2 * p * a[0] * a[1] * (1 + a[0]))
    assert np.allclose(sg.grad(loss, argnums=1)(p, a),
                       [p * p * a[1] * (1 + 2 * a[0]), p * p * a[0] * (1 + a[0])])


def test_scan_carry_must_keep_its_shape():
    with pytest.raises(sg.ShapeError, match="carry"):
        sg.scan(lambda c, x: (np.ones(2) * c, None), 1.0, np.ones(3))
    with pytest.raises(sg.ArgumentError, match="pair"):
        sg.scan(lambda c, x: c, 1.0, np.ones(3))


def test_program_stats_count_a_loops_work_by_its_trips():
    op = sg.Ops()
    x = op.var(0.5, name="x")
    inner = lambda i, c: sg.fori_loop(0, 3, lambda j, d: d * 0.5 + 0.25, c)   # 2 entries
    y = sg.fori_loop(0, 100, inner, x)
    s = op.program([x], [y]).stats()
    # the outer body: the inner scan (3 trips of 2 entries) and the part taking its carry
    assert s.entries == 2 and s.work == 100 * (3 * 2 + 1) + 1
    assert list(s.loops.values()) == [100]
    assert "701 entries run" in str(s)
    w = sg.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)
    s = op.program([x], [w]).stats()
    # the recorded run's 5 trips (0.5 doubled to 16): the test 6 times, the body 5, the part
    assert list(s.loops.values()) == [5] and s.work == 6 + 5 + 1
    plain = op.program([x], [x * 2.0]).stats()
    assert plain.work == plain.entries and plain.loops == {} and "run" not in str(plain)


# ---------------------------------------------------------------- the eager gradient's fast path


def _rnn(steps=6, units=5):
    rng = np.random.default_rng(3)
    W = rng.normal(size=(units, units)) / units
    U = rng.normal(size=(units, 3))
    xs = rng.normal(size=(steps, 3))

    def loss(W):
        h, _ = sg.scan(lambda h, x: (np.tanh(W @ h + U @ x), None), np.zeros(units), xs)
        return (h * h).sum()

    def unrolled(W):
        h = np.zeros(units)
        for x in xs:
            h = np.tanh(W @ h + U @ x)
        return (h * h).sum()
    return W, loss, unrolled


def _scan_bodies(op):
    return [e.attrs["body"] for e in op.tape.entries if e.prim.name == "scan"]


def test_a_closure_traced_again_takes_the_body_kept_for_its_program():
    W, loss, _ = _rnn()
    first, again = sg.Ops(), sg.Ops()
    loss(first.var(W))
    loss(again.var(W))
    assert _scan_bodies(first)[0] is _scan_bodies(again)[0]
    # another constant in the closure: another program, another body
    other = sg.Ops()
    sg.scan(lambda h, x: (np.tanh(h + 2.0 * x), None), other.var(np.zeros(3)), np.ones((2, 3)))
    one = sg.Ops()
    sg.scan(lambda h, x: (np.tanh(h + 3.0 * x), None), one.var(np.zeros(3)), np.ones((2, 3)))
    assert _scan_bodies(other)[0] is not _scan_bodies(one)[0]


def test_the_eager_gradient_runs_the_pullback_on_the_values_the_forward_kept():
    W, loss, unrolled = _rnn()
    got = sg.grad(loss)(W)
    op = sg.Ops()
    w = op.var(W)
    recorded = op.grad(loss(w), w).value
    np.testing.assert_array_equal(got, recorded)            # the same operations, in order
    np.testing.assert_allclose(got, sg.grad(unrolled)(W), rtol=1e-13)
    body = _scan_bodies(op)[0]
    split = body.split((0, 1), 1, 1)
    assert split is not None
    pullback = split.pullback.program.format(raw=True)
    assert "tanh" not in pullback and ".T" not in pullback   # kept, and W.T made once
    assert "tanh" in split.forward.program.format(raw=True)


def test_a_recorded_gradient_after_an_eager_one_pulls_back_only_to_what_requires_grad():
    W, loss, _ = _rnn()
    counts = []
    for _ in range(2):
        op = sg.Ops()
        w = op.var(W)
        op.grad(loss(w), w)
        counts.append(len(op.tape))
        sg.grad(loss)(W)
    assert counts[0] == counts[1] == 14     # no cotangent for xs, nor the initial carry


def test_the_compiled_gradient_runs_the_forward_once_and_the_pullback_on_what_it_kept():
    W, loss, _ = _rnn()
    op = sg.Ops()
    w = op.var(W)
    dw = op.grad(loss(w), w)
    prog = op.program([w], [dw])
    fn = sg.compile(prog)
    np.testing.assert_array_equal(fn(W), prog(W))
    np.testing.assert_array_equal(fn(W * 0.5), prog(W * 0.5))
    loops = [line.strip() for line in fn.source.splitlines() if line.strip().startswith("for ")]
    assert len(loops) == 3      # the forward, the reverse (kept values), the reverse (else)
    fast = fn.source.split("tobytes()", 2)[2].split("else:", 1)[0]
    assert "np.tanh" not in fast                # the pullback alone
    np.testing.assert_array_equal(sg.jit(sg.grad(loss))(W), sg.grad(loss)(W))


@pytest.mark.parametrize("units,width,steps,reverse", [
    (5, 3, 6, False), (32, 8, 150, False), (17, 33, 70, True), (2, 2, 3, False),
    (40, 1, 45, True)])
def test_the_compiled_gradient_hoists_what_reads_no_carry_and_answers_to_the_last_bit(
        units, width, steps, reverse):
    # U @ x_t and 1 - t*t before the loops, the outer products of W's gradient per chunk of
    # steps (several chunks, either direction), matrix-vector products by A.dot: the replay's
    # values, bit for bit, for C-, F- and strided W and a carry starting strided
    rng = np.random.default_rng(11)
    U, xs = rng.normal(size=(units, width)), rng.normal(size=(steps, width))
    for h0 in (rng.normal(size=units), rng.normal(size=2 * units)[::2]):
        def loss(W, h0=h0):
            h, _ = sg.scan(lambda h, x: (np.tanh(W @ h + U @ x), None), h0, xs,
                           reverse=reverse)
            return (h * h).sum()
        op = sg.Ops()
        w = op.var(rng.normal(size=(units, units)))
        prog = op.program([w], [op.grad(loss(w), w)])
        fn = sg.compile(prog)
        forward = fn.source.split("for ", 1)[0]
        assert "np.matmul(" in forward
        assert "np.add.reduce(" in fn.source.split("tobytes()", 2)[2].split("else:", 1)[0]
        for W in (rng.normal(size=(units, units)) / units,
                  np.asfortranarray(rng.normal(size=(units, units))) / units,
                  rng.normal(size=(units, 2 * units))[:, ::2] / units):
            np.testing.assert_array_equal(fn(W), prog(W))
            np.testing.assert_array_equal(sg.jit(sg.grad(loss))(W), sg.grad(loss)(W))
