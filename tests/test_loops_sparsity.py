"""Sparsity patterns through loops and branches: a scan, a fori_loop and a while loop
propagate their body's pattern through the trips, a cond unions its branches'; each pattern
holds the dense Jacobian's (Hessian's) nonzeros at random points and equals the pattern
written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import simplegrad as sg

pytest.importorskip("scipy")

N = 8


def shift_product(c):
    """A lower-bidiagonal step: entry k on entries k-1 and k."""
    return np.concatenate([c[:1], c[1:] * c[:-1]]) + np.sin(c)


def band(n, lower, upper=0):
    """The band of ``lower`` sub- and ``upper`` super-diagonals."""
    k = np.subtract.outer(np.arange(n), np.arange(n))
    return (k <= lower) & (k >= -upper)


def nonzeros(f, x, order=1):
    d = sg.hessian(f)(x) if order == 2 else sg.jacobian(f)(x)
    return np.asarray(d).reshape(-1, x.size) != 0


def check(f, exact, order=1, points=3):
    pattern = (sg.hessian_sparsity(f) if order == 2 else sg.jacobian_sparsity(f))
    rng = np.random.default_rng(0)
    for _ in range(points):
        x = rng.uniform(0.5, 1.5, N)
        got = pattern(x).toarray()
        assert not (nonzeros(f, x, order) & ~got).any()     # it holds every nonzero
        assert np.array_equal(got, exact)


def test_scan_of_a_banded_step_spreads_one_band_per_trip():
    def f(x):
        c, ys = sg.scan(lambda c, _: (shift_product(c), c[0] * c[1]), x, None, length=3)
        return np.concatenate([c, ys])
    first = np.zeros((3, N), bool)
    first[:, :2] = True
    check(f, np.vstack([band(N, 3), first]))


def test_scan_over_float_xs_reads_each_step_row():
    def f(x):
        c, ys = sg.scan(lambda c, xt: (c * xt, c + xt), np.ones(2), x.reshape(4, 2))
        return np.concatenate([c, ys.reshape(-1)])
    column = np.arange(N) % 2               # entry j of a step on entry j of each row
    exact = np.zeros((2 + N, N), bool)
    for j in range(2):
        exact[j] = column == j              # the product of its rows' entries
        for t in range(4):                  # y_t: the carry before step t, plus row t
            exact[2 + 2 * t + j] = (column == j) & (np.arange(N) < 2 * t + 2)
    check(f, exact)


def test_fori_loop_stops_where_the_pattern_stops_growing():
    f = sg.jacobian_sparsity(lambda x: sg.fori_loop(0, 500, lambda i, c: shift_product(c), x))
    assert np.array_equal(f(np.zeros(N)).toarray(), band(N, N))


def test_fori_loop_reading_its_index_follows_each_trip():
    def f(x):
        def body(i, c):
            return c + c[i] * c[i + 1]     # every entry on entries i and i + 1 too
        return sg.fori_loop(0, 2, body, x)
    exact = np.eye(N, dtype=bool)
    exact[:, :3] = True
    check(f, exact)


def test_while_loop_pattern_holds_for_every_trip_count():
    def f(x):
        return sg.while_loop(lambda c: c[1] < 2, lambda c: (shift_product(c[0]), c[1] + 1),
                             (x, 0))[0]
    check(f, band(N, N))    # two trips here, any number at another input


def test_cond_unions_its_branches():
    def f(x):
        return sg.cond(np.sum(x) > 0, lambda v: v * 2.0,
                       lambda v: np.concatenate([v[1:], v[:1]]), x)
    exact = np.eye(N, dtype=bool) | np.roll(np.eye(N, dtype=bool), 1, axis=1)
    check(f, exact)


def test_hessian_of_a_scan_through_its_gradient_program():
    def f(x):
        c, _ = sg.scan(lambda c, _: (shift_product(c), None), x, None, length=2)
        return np.sum(c ** 2)
    x = np.linspace(0.5, 1.5, N)
    got = sg.hessian_sparsity(f)(x).toarray()
    assert not (nonzeros(f, x, 2) & ~got).any()
    assert np.array_equal(got, band(N, 2, 2))     # two entries share a window of 3
