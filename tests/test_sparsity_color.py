"""``sg.color``: the colour counts of the issue's checks, and every colouring checked against
its definition by brute force (column: no two columns of a colour share a row; star: proper,
no path on four vertices in two colours; acyclic: proper, every two-coloured subgraph a
forest) on banded, arrowhead, stencil and random patterns."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import simplegrad as sg

sparse = pytest.importorskip("scipy.sparse")


def band(n: int, b: int) -> np.ndarray:
    return np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= b


def arrow(n: int) -> np.ndarray:
    p = np.eye(n, dtype=bool)
    p[0, :] = p[:, 0] = True
    return p


def laplacian(k: int) -> np.ndarray:
    """The 5-point stencil on a k x k grid."""
    n = k * k
    p = np.eye(n, dtype=bool)
    for i, j in itertools.product(range(k), range(k)):
        for di, dj in ((1, 0), (0, 1)):
            if i + di < k and j + dj < k:
                p[i * k + j, (i + di) * k + j + dj] = p[(i + di) * k + j + dj, i * k + j] = True
    return p


def random_symmetric(n: int, rng: np.random.Generator, density: float = 0.15) -> np.ndarray:
    p = rng.random((n, n)) < density
    return p | p.T | np.eye(n, dtype=bool)


def is_column_coloring(p: np.ndarray, c: np.ndarray) -> bool:
    return all(len(set(c[np.nonzero(row)[0]].tolist())) == row.sum() for row in p)


def _edges(p: np.ndarray) -> list[tuple[int, int]]:
    return [(i, j) for i, j in zip(*np.nonzero(np.triu(p | p.T, 1)))]


def is_proper(p: np.ndarray, c: np.ndarray) -> bool:
    return all(c[i] != c[j] for i, j in _edges(p))


def is_star_coloring(p: np.ndarray, c: np.ndarray) -> bool:
    adj = [set(np.nonzero(r)[0].tolist()) - {i} for i, r in enumerate(p | p.T)]
    for a in range(len(adj)):
        for b in adj[a]:
            for d in adj[b] - {a}:
                for e in adj[d] - {a, b}:
                    if c[a] == c[d] and c[b] == c[e]:
                        return False
    return is_proper(p, c)


def is_acyclic_coloring(p: np.ndarray, c: np.ndarray) -> bool:
    if not is_proper(p, c):
        return False
    edges = _edges(p)
    def find(parent: dict, v: int) -> int:
        while parent.get(v, v) != v:
            v = parent[v]
        return v
    for pair in itertools.combinations(sorted(set(c.tolist())), 2):
        parent: dict = {}
        for i, j in edges:
            if {c[i], c[j]} == set(pair):
                ri, rj = find(parent, i), find(parent, j)
                if ri == rj:
                    return False        # this edge closes a two-coloured cycle
                parent[ri] = rj
    return True


def count(c: np.ndarray) -> int:
    return len(set(c.tolist()))


def test_the_issue_counts():
    tri = band(12, 1)
    assert count(sg.color(tri, "column")) == 3
    assert count(sg.color(tri, "star")) == 3
    assert count(sg.color(tri, "acyclic")) == 2
    assert count(sg.color(arrow(9), "star")) == 2
    for b in range(1, 5):
        assert count(sg.color(band(20, b), "column")) == 2 * b + 1


def test_the_five_point_stencil_column_colours():
    p = laplacian(8)
    c = sg.color(p, "column")
    assert is_column_coloring(p, c)
    # a row holds 5 entries, and (i + 2j) mod 5 reaches 5; the greedy orders reach 7
    assert 5 <= count(c) <= 7
    assert is_column_coloring(p, np.add.outer(np.arange(8), 2 * np.arange(8)).ravel() % 5)


@pytest.mark.parametrize("method,check", [("column", is_column_coloring),
                                          ("star", is_star_coloring),
                                          ("acyclic", is_acyclic_coloring)])
def test_colourings_meet_their_definitions(method, check, rng):
    patterns = [band(15, 2), arrow(10), laplacian(4)] + \
        [random_symmetric(n, rng) for n in (6, 12, 20, 30)]
    for p in patterns:
        c = sg.color(sparse.csr_array(p), method)
        assert c.shape == (p.shape[0],) and c.dtype.kind == "i" and c.min() == 0
        assert check(p, c), (method, p.astype(int))
    counts = [count(sg.color(p, m)) for p in patterns for m in ("star", "acyclic")]
    assert all(a >= b for a, b in zip(counts[::2], counts[1::2]))   # acyclic needs fewer


def test_row_colouring_of_a_rectangular_pattern(rng):
    p = rng.random((14, 9)) < 0.2
    r = sg.color(p, "row")
    assert r.shape == (14,) and is_column_coloring(p.T, r)
    c = sg.color(p, "column")
    assert c.shape == (9,) and is_column_coloring(p, c)


def test_refusals():
    with pytest.raises(sg.ArgumentError, match="method must be"):
        sg.color(band(3, 1), "greedy")
    with pytest.raises(sg.ShapeError, match="square"):
        sg.color(np.ones((2, 3), bool), "star")


def test_spy_draws_the_pattern_and_its_colours():
    p = band(4, 1)
    assert sg.spy(p) == "##..\n###.\n.###\n..##"
    assert sg.spy(p, sg.color(p, "column")) == "01..\n012.\n.120\n..20"
    svg = sg.spy(p, sg.color(p, "column"), format="svg")
    assert svg.startswith("<svg") and svg.count("<rect") == 1 + p.sum()


def test_a_published_count():
    """asdex's README (pypi.org/project/asdex, 0.5.0) colours the Jacobian of
    (x[1:] - x[:-1]) ** 2 at n = 50 (49 x 50, 98 entries) with 2 colours, by JVP."""
    p = sg.jacobian_sparsity(lambda x: (x[1:] - x[:-1]) ** 2)(np.zeros(50))
    assert p.shape == (49, 50) and p.nnz == 98
    assert count(sg.color(p, "column")) <= 2


def test_the_documentation_picture_is_spys():
    """docs/sparse.md's picture: the Bratu residual's Jacobian on a 5 x 4 grid, by column."""
    from pathlib import Path

    def bratu(u, lam=2.0):
        g, h = u.reshape(5, 4), 1.0 / 6
        p = np.pad(g, 1)
        lap = (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * g) / h ** 2
        return (-lap - lam * np.exp(g)).reshape(-1)
    p = sg.jacobian_sparsity(bratu)(np.zeros(20))
    picture = Path(__file__).resolve().parents[1] / "docs" / "sparse_bratu.svg"
    assert picture.read_text() == sg.spy(p, sg.color(p, "column"), format="svg") + "\n"


def test_spy_draws_a_large_pattern_in_blocks():
    p = band(1000, 1)
    text = sg.spy(p, sg.color(p, "column"), limit=100)
    lines = text.split("\n")
    assert len(lines) == 100 and {len(r) for r in lines} == {100}
    # blocks of 10 x 10: the diagonal blocks and the corners of their neighbours
    assert [r.index("#") for r in lines[1:4]] == [0, 1, 2] and lines[0] == "##" + "." * 98
    assert sg.spy(p, format="svg", limit=50).count("<rect") == 1 + 50 + 2 * 49
    with pytest.raises(sg.ArgumentError, match="format"):
        sg.spy(p, format="png")


def test_published_counts_of_asdex():
    """asdex's documentation (adrianhill.de/asdex, the pages of asdex 0.5): the Rosenbrock
    Hessian at n = 100 (100 x 100, 298 entries) in 3 colours (how-to/hessians, "Symmetric
    Coloring"), and the Jacobian of the 2-D Brusselator on a 32 x 32 periodic grid (2048 x
    2048, 12,288 entries) in 12 colours by JVP (how-to/brusselator). Their functions here."""
    def rosenbrock(x):
        return np.sum((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2)

    h = sg.hessian_sparsity(rosenbrock)(np.zeros(100))
    assert h.shape == (100, 100) and h.nnz == 298
    c = sg.color(h, "star")
    assert count(c) <= 3
    assert is_star_coloring(h.toarray(), c)

    n, alpha = 32, 10.0

    def brusselator(uv):
        u, v = uv[: n * n].reshape(n, n), uv[n * n:].reshape(n, n)

        def laplacian(w):
            return (np.roll(w, 1, axis=0) + np.roll(w, -1, axis=0) + np.roll(w, 1, axis=1)
                    + np.roll(w, -1, axis=1) - 4 * w) * n ** 2
        du = 1.0 + u ** 2 * v - 4.4 * u + alpha * laplacian(u)
        dv = 3.4 * u - u ** 2 * v + alpha * laplacian(v)
        return np.concatenate([du.ravel(), dv.ravel()])

    p = sg.jacobian_sparsity(brusselator)(np.zeros(2 * n * n))
    assert p.shape == (2048, 2048) and p.nnz == 12288
    c = sg.color(p, "column")
    assert count(c) <= 12
    assert is_column_coloring(p.toarray(), c)


@pytest.mark.parametrize("rho,star,acyclic", [(10, 11, 6), (20, 21, 11)])
def test_published_counts_of_sparsematrixcolorings_on_bands(rho, star, acyclic):
    """SparseMatrixColorings.jl's test/theory.jl (after Gebremedhin, Tarafdar, Pothen and
    Walther, "Efficient computation of sparse Hessians using coloring and automatic
    differentiation", INFORMS J. Computing 21(2), 2009): a symmetric band of rho off-diagonals
    at n = 5,000 takes 2 floor(rho / 2) + 1 colours by star colouring and floor(rho / 2) + 1
    by acyclic colouring: 11 and 6 for rho = 10, 21 and 11 for rho = 20."""
    p = sparse.csr_array(sparse.diags_array([np.ones(5000 - abs(k)) for k in
                                             range(-rho // 2, rho // 2 + 1)],
                                            offsets=range(-rho // 2, rho // 2 + 1)))
    assert p.nnz == 5000 * (rho + 1) - 2 * sum(range(1, rho // 2 + 1))
    assert count(sg.color(p, "star")) <= star
    assert count(sg.color(p, "acyclic")) <= acyclic


@pytest.mark.parametrize("method", ["column", "row", "star", "acyclic"])
def test_stopping_at_the_bound_keeps_the_colouring_of_all_three_orders(method, rng):
    """sg.color stops trying orders once a colouring reaches the clique bound (the fullest
    row): the colouring it returns is still the first of the fewest colours over the three
    orders, tried in full here."""
    from simplegrad.transforms import sparse as impl

    paint = {"column": impl._distance1, "row": impl._distance1, "star": impl._star,
             "acyclic": impl._acyclic}[method]
    patterns = [band(30, 2), laplacian(6), arrow(12)] + \
        [random_symmetric(n, rng, 0.1) for n in (10, 25, 40)]
    if method in ("column", "row"):
        patterns += [rng.random((20, 15)) < 0.2, rng.random((15, 30)) < 0.15]
    for p in patterns:
        adj, _ = impl._neighbours(p, method)
        full = [np.array(paint(adj, order)) for order in impl._orders(adj)]
        want = min(full, key=lambda c: c.max(initial=-1))     # the first of the fewest
        np.testing.assert_array_equal(sg.color(p, method), want)
