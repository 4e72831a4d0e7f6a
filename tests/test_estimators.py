"""Hutchinson and Hutch++ trace estimators, and the divergence of a vector field.

Oracles: traces of known matrices, the closed-form variance of Hutchinson's
estimator, a hand-derived divergence and its gradient, and float64 central
differences. Statistical checks use fixed seeds and a bound of Z standard errors,
the standard error taken from the sample variance of the runs (for a correct
estimator, |mean - truth| > 5 SE has probability about 6e-7).
"""

import numpy as np
import pytest

import simplegrad as sg

Z = 5.0     # statistical bound, in standard errors of the mean over runs


def _within_bound(estimates, truth):
    """Assert the mean of independent estimates is within Z standard errors of truth."""
    estimates = np.asarray(estimates)
    se = estimates.std(ddof=1) / np.sqrt(len(estimates))
    gap = abs(estimates.mean() - truth)
    assert gap <= Z * se, f"mean {estimates.mean():.6g} vs {truth:.6g}: {gap:.3g} > {Z} x {se:.3g}"


def _counted(A):
    """A @ v that counts its calls."""
    calls = []

    def matvec(v):
        assert v.shape == (A.shape[0],)
        calls.append(1)
        return A @ v
    return matvec, calls


def _matrix(n, seed=0):
    return np.random.default_rng(seed).standard_normal((n, n))


def _low_rank_plus_noise(n=100, rank=5, noise=0.05, seed=1):
    """U diag(100, 80, ..) U^T plus a small symmetric Gaussian perturbation."""
    r = np.random.default_rng(seed)
    U = np.linalg.qr(r.standard_normal((n, rank)))[0]
    top = (U * np.linspace(100.0, 20.0, rank)) @ U.T
    E = r.standard_normal((n, n))
    return top + noise * (E + E.T) / 2

# ---------------------------------------------------------------- trace estimators


@pytest.mark.parametrize("dist", ["rademacher", "gaussian"])
def test_hutchinson_unbiased_and_variance_matches_theory(dist):
    A = _matrix(12)
    m, runs = 4, 3000
    matvec, _ = _counted(A)
    est = np.array([sg.hutchinson_trace(matvec, 12, m, rng=s, dist=dist) for s in range(runs)])
    _within_bound(est, np.trace(A))
    # closed form: Var(v^T A v) = 2 ||A_s||_F^2 (Gaussian), minus 2 sum diag(A)^2 (Rademacher),
    # with A_s = (A + A^T) / 2; the mean of m probes divides it by m
    As = (A + A.T) / 2
    per_probe = 2 * np.sum(As**2) - (2 * np.sum(np.diag(A) ** 2) if dist == "rademacher" else 0)
    np.testing.assert_allclose(est.var(ddof=1), per_probe / m, rtol=0.15)


def test_hutchpp_unbiased():
    A = _matrix(12)
    matvec, _ = _counted(A)
    est = [sg.hutchpp_trace(matvec, 12, 6, rng=s) for s in range(2000)]
    _within_bound(est, np.trace(A))


def test_hutchpp_variance_below_hutchinson_at_same_budget():
    A = _low_rank_plus_noise()
    n, budget, runs = 100, 30, 300
    matvec, _ = _counted(A)
    h = np.array([sg.hutchinson_trace(matvec, n, budget, rng=s) for s in range(runs)])
    hpp = np.array([sg.hutchpp_trace(matvec, n, budget, rng=s) for s in range(runs)])
    _within_bound(h, np.trace(A))
    _within_bound(hpp, np.trace(A))
    ratio = h.var(ddof=1) / hpp.var(ddof=1)
    assert ratio > 100, f"Hutchinson / Hutch++ variance ratio only {ratio:.3g}"


def test_hutchpp_is_exact_when_the_sketch_covers_the_range():
    r = np.random.default_rng(2)
    B = r.standard_normal((30, 3))
    A = B @ B.T                             # rank 3, sketch of 12 // 3 = 4 columns
    for seed in range(5):
        est = sg.hutchpp_trace(lambda v: A @ v, 30, 12, rng=seed)
        np.testing.assert_allclose(est, np.trace(A), rtol=1e-10)


@pytest.mark.parametrize("estimator, samples", [
    pytest.param(sg.hutchinson_trace, 1, id="hutchinson-samples1"),
    pytest.param(sg.hutchinson_trace, 7, id="hutchinson-samples7"),
    pytest.param(sg.hutchpp_trace, 3, id="hutchpp-samples3"),
    pytest.param(sg.hutchpp_trace, 10, id="hutchpp-samples10"),
    pytest.param(sg.hutchpp_trace, 11, id="hutchpp-samples11"),
])
def test_estimators_use_exactly_their_budget(estimator, samples):
    matvec, calls = _counted(_matrix(9))
    estimator(matvec, 9, samples, rng=0)
    assert len(calls) == samples


def test_hutchpp_budget_beyond_3n_stops_at_the_exact_trace():
    A = _matrix(5)
    matvec, calls = _counted(A)
    est = sg.hutchpp_trace(matvec, 5, 30, rng=0)    # sketch 10 >= n: Q spans R^5
    assert len(calls) == 10 + 5
    np.testing.assert_allclose(est, np.trace(A), rtol=1e-12)


def test_seeds_reproduce():
    matvec, _ = _counted(_matrix(6))
    for estimator in (sg.hutchinson_trace, sg.hutchpp_trace):
        assert estimator(matvec, 6, 6, rng=4) == estimator(matvec, 6, 6, rng=4)
        assert (estimator(matvec, 6, 6, rng=np.random.default_rng(4))
                == estimator(matvec, 6, 6, rng=4))

# ---------------------------------------------------------------- divergence

N = 8
W = np.random.default_rng(3).standard_normal((N, N))
X = np.random.default_rng(4).uniform(-1.0, 1.0, N)


def field(x):
    """f(x) = tanh(W x) + x**3."""
    return (W @ x).tanh() + x**3


def field_div(x):
    """div f = sum_i W_ii (1 - tanh((W x)_i)^2) + 3 sum_i x_i^2, by hand."""
    h = np.tanh(W @ x)
    return np.sum(np.diag(W) * (1 - h**2)) + 3 * np.sum(x**2)


def field_div_grad(x):
    """d(div f)/dx_k = sum_i W_ii (-2 h_i (1 - h_i^2)) W_ik + 6 x_k, by hand."""
    h = np.tanh(W @ x)
    return W.T @ (np.diag(W) * -2 * h * (1 - h**2)) + 6 * x


def field_jacobian(x):
    h = np.tanh(W @ x)
    return (1 - h**2)[:, None] * W + np.diag(3 * x**2)


def test_divergence_exact_matches_closed_form():
    np.testing.assert_allclose(sg.divergence(field, X), field_div(X), rtol=1e-13)


@pytest.mark.parametrize("method", ["hutchinson", "hutch++"])
def test_divergence_estimators_unbiased(method):
    est = [sg.divergence(field, X, method, samples=6, rng=s) for s in range(300)]
    _within_bound(est, field_div(X))


@pytest.mark.parametrize("method, trace", [("hutchinson", sg.hutchinson_trace),
                                           ("hutch++", sg.hutchpp_trace)])
def test_divergence_uses_the_probes_of_the_trace_estimator(method, trace):
    """Same seed, same probes: the jvps agree with the hand-derived Jacobian."""
    J = field_jacobian(X)
    for seed in range(3):
        est = sg.divergence(field, X, method, samples=7, rng=seed)
        np.testing.assert_allclose(est, trace(lambda v: J @ v, N, 7, rng=seed), rtol=1e-12)


@pytest.mark.parametrize("shape", [(), (2, 3)], ids=["0d", "2x3"])
@pytest.mark.parametrize("method", ["exact", "hutchinson"])
def test_divergence_of_diagonal_field_any_shape(shape, method):
    """A diagonal Jacobian makes Rademacher probes exact: v^T D v = tr(D)."""
    x = np.random.default_rng(5).standard_normal(shape)
    est = sg.divergence(lambda x: x.tanh() * 2.0 + x, x, method, samples=3, rng=0)
    np.testing.assert_allclose(est, np.sum(2 * (1 - np.tanh(x) ** 2) + 1), rtol=1e-13)


def test_divergence_of_linear_and_identity_fields():
    M = _matrix(N, seed=6)
    np.testing.assert_allclose(sg.divergence(lambda x: M @ x, X), np.trace(M), rtol=1e-13)
    assert sg.divergence(lambda x: x, X) == N
    assert sg.divergence(lambda x: x, X, "hutchinson", samples=2, rng=0) == N


def _count_jvps(monkeypatch):
    calls = []
    jvp = sg.Ops.jvp

    def counting(self, y, xs, tangents, create_graph=True):
        calls.append(create_graph)
        return jvp(self, y, xs, tangents, create_graph=create_graph)
    monkeypatch.setattr(sg.Ops, "jvp", counting)
    return calls


@pytest.mark.parametrize("method, samples, products", [
    ("exact", None, N), ("hutchinson", 5, 5), ("hutch++", 10, 10)])
def test_divergence_counts_jvps_and_records_nothing_for_arrays(monkeypatch, method, samples,
                                                               products):
    calls = _count_jvps(monkeypatch)
    sg.divergence(field, X, method, samples=samples, rng=0)
    assert calls == [False] * products


@pytest.mark.parametrize("method, samples, recorded", [
    ("exact", None, [True] * N), ("hutchinson", 5, [True] * 5),
    ("hutch++", 10, [False] * 3 + [True] * 7)])
def test_divergence_of_variable_is_recorded(monkeypatch, method, samples, recorded):
    """Only the Hutch++ sketch is computed as values (its basis Q is a constant)."""
    calls = _count_jvps(monkeypatch)
    op = sg.Ops()
    x = op.var(X)
    d = sg.divergence(field, x, method, samples=samples, rng=1)
    assert calls == recorded
    assert isinstance(d, sg.Variable) and d.ops is op and d.shape == ()
    assert d.prim is not None and d.requires_grad
    np.testing.assert_allclose(d.value, sg.divergence(field, X, method, samples=samples, rng=1),
                               rtol=1e-13)


def test_gradient_of_exact_divergence_matches_closed_form():
    op = sg.Ops()
    x = op.var(X)
    g = op.grad(sg.divergence(field, x), x)
    np.testing.assert_allclose(g.value, field_div_grad(X), rtol=1e-11, atol=1e-12)


def test_gradient_of_hutchinson_divergence_matches_finite_differences():
    """With its seed fixed, the estimate is a smooth function of x: central differences,
    step 1e-5, agree to 1e-7 (truncation ~1e-10, rounding ~1e-10)."""
    op = sg.Ops()
    x = op.var(X)
    g = op.grad(sg.divergence(field, x, "hutchinson", samples=5, rng=9), x).value
    h = 1e-5
    fd = np.array([(sg.divergence(field, X + h * e, "hutchinson", samples=5, rng=9)
                    - sg.divergence(field, X - h * e, "hutchinson", samples=5, rng=9)) / (2 * h)
                   for e in np.eye(N)])
    np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-7)


def test_gradient_of_hutchpp_divergence_exact_when_sketch_spans_everything():
    op = sg.Ops()
    x = op.var(X)
    d = sg.divergence(field, x, "hutch++", samples=3 * N, rng=2)
    np.testing.assert_allclose(d.value, field_div(X), rtol=1e-12)
    np.testing.assert_allclose(op.grad(d, x).value, field_div_grad(X), rtol=1e-10, atol=1e-11)


def test_divergence_twice_differentiable_through_the_tape():
    """Second derivative of the exact divergence along e_0, against central differences
    of the hand-derived gradient (step 1e-5, tolerance 1e-6)."""
    op = sg.Ops()
    x = op.var(X)
    g = op.grad(sg.divergence(field, x), x)
    h2 = op.grad(g[0], x).value
    h = 1e-5
    fd = np.array([(field_div_grad(X + h * e)[0] - field_div_grad(X - h * e)[0]) / (2 * h)
                   for e in np.eye(N)])
    np.testing.assert_allclose(h2, fd, rtol=1e-6, atol=1e-6)

# ---------------------------------------------------------------- errors


def test_errors():
    A = _matrix(4)
    good = lambda v: A @ v
    with pytest.raises(sg.ArgumentError, match="dist must be one of"):
        sg.hutchinson_trace(good, 4, 3, dist="normal")
    with pytest.raises(sg.ArgumentError, match="samples must be at least 1"):
        sg.hutchinson_trace(good, 4, 0)
    with pytest.raises(sg.ArgumentError, match="samples must be an int"):
        sg.hutchinson_trace(good, 4, 2.0)
    with pytest.raises(sg.ArgumentError, match="n must be an int"):
        sg.hutchinson_trace(good, True, 2)
    with pytest.raises(sg.ArgumentError, match="samples must be at least 3"):
        sg.hutchpp_trace(good, 4, 2)
    with pytest.raises(sg.ShapeError, match=r"matvec returned shape \(4, 1\)"):
        sg.hutchinson_trace(lambda v: (A @ v)[:, None], 4, 2)
    with pytest.raises(sg.ArgumentError, match="method must be one of"):
        sg.divergence(field, X, "hutch")
    with pytest.raises(sg.ArgumentError, match="needs samples="):
        sg.divergence(field, X, "hutchinson")
    with pytest.raises(sg.ShapeError, match=r"maps shape \(8,\) to \(\)"):
        sg.divergence(lambda x: x.sum(), X)
    with pytest.raises(sg.ArgumentError, match="must return a Variable"):
        sg.divergence(lambda x: np.ones(N), X)
