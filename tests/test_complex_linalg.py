"""eigh and svd of complex matrices: the eigenvalues of the Hermitian part (a + a^H) / 2 and the
singular values, against JAX's gradients and tangents (computed once with jax.grad and jax.jvp
in float64 and written here) and finite differences in both real directions; the singular
values at order 2, and the vectors' derivatives (JAX's phase gauge) through functions the
phases leave unchanged."""

import numpy as np
import pytest
from test_complex import finite_difference_grad

import simplegrad as sg

H = np.array([[2, 1 - 1j, 0.5j], [1 + 1j, -1, 0.3], [-0.5j, 0.3, 0.5]])
A = np.array([[1 + 2j, 0.5, -1j], [0.3 - 1j, 2, 1 + 1j]])
C = np.array([0.3, -1.2, 0.7])
D = np.array([1.5, -0.4])
TH = np.array([[0.1j, 1, 0.2], [0.4, -1j, 0.5 + 0.5j], [1, 0, 2j]])
TA = np.array([[1, 1j, 0], [0.5, -0.2, 1j]])


def eigenvalue_loss(a):         # np.linalg.eigvalsh: numpy's lower triangle, mirrored
    return (np.linalg.eigvalsh(a) * C).sum()


def hermitian_part_loss(a):     # op.eigvalsh: the Hermitian part, as jnp.linalg.eigh has it
    return (a.rec.eigvalsh(a) * C).sum()


def singular_value_loss(a):
    return (np.linalg.svd(a, compute_uv=False) * D).sum()


def plain_eigenvalue_loss(a):       # what eigh decomposes: the Hermitian part
    return (np.linalg.eigvalsh((a + a.conj().T) / 2) * C).sum()


# jax.grad(lambda a: jnp.sum(jnp.linalg.eigh(a)[0] * C))(H)
JAX_EIGH_GRAD = np.array([
    [0.6146016184837071, 0.09820068672501661 + 0.04257909765596987j,
     0.11124317813809345 - 0.2159651105696485j],
    [0.09820068672501661 - 0.04257909765596987j, 0.2606698633016735,
     -0.32280985808645757 - 0.18540529689682245j],
    [0.11124317813809345 + 0.2159651105696485j, -0.32280985808645757 + 0.18540529689682245j,
     -1.0752714817853808]])
# jax.grad(lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False) * D))(A)
JAX_SVD_GRAD = np.array([
    [0.10377542002750603 - 0.5271868739335225j, -0.5958453115812277 - 0.22562543567894808j,
     -0.43244875171798425 + 0.2936768283906211j],
    [-0.02057320300150733 + 0.9968761029233432j, 0.3297646177144432 + 0.05640635891973703j,
     0.13197859948737534 - 0.5644273512053591j]])
JAX_EIGH_JVP = [-0.34498390659824296, -0.03382996418243198, 0.37881387078067474]
JAX_SVD_JVP = [0.5593111785843746, 0.05344521502097754]


def test_eigenvalues_of_the_hermitian_part():
    w = np.linalg.eigvalsh(H)
    op = sg.Ops()
    got = op.eigh(op.var(H))
    np.testing.assert_allclose(got.eigenvalues.raw, w, rtol=1e-12)
    assert got.eigenvalues.dtype == np.float64
    np.testing.assert_allclose(got.eigenvectors.raw @ np.diag(w) @ got.eigenvectors.raw.conj().T,
                               H, atol=1e-12)
    skew = H + np.array([[0.5j, 1, 0], [-1, 0, 2], [0, -2, -1j]])   # anti-Hermitian added
    np.testing.assert_allclose(op.eigvalsh(op.var(skew)).raw, np.linalg.eigvalsh(H),
                               rtol=1e-12)


def test_eigenvalue_gradient_is_jax_and_finite_differences():
    g = sg.grad(hermitian_part_loss)(H)
    np.testing.assert_allclose(g, JAX_EIGH_GRAD, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, finite_difference_grad(plain_eigenvalue_loss, H), atol=1e-7)
    bent = H + np.array([[0.3j, 0.2, 0], [-0.1j, 0, 1], [0.4, 0, -0.2j]])  # not Hermitian
    np.testing.assert_allclose(sg.grad(hermitian_part_loss)(bent),
                               finite_difference_grad(plain_eigenvalue_loss, bent), atol=1e-7)
    np.testing.assert_allclose(sg.grad(eigenvalue_loss)(bent),     # one triangle read
                               finite_difference_grad(eigenvalue_loss, bent), atol=1e-7)
    assert not np.triu(sg.grad(eigenvalue_loss)(bent), 1).any()


def test_singular_value_gradient_is_jax_and_finite_differences():
    g = sg.grad(singular_value_loss)(A)
    np.testing.assert_allclose(g, JAX_SVD_GRAD, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g, finite_difference_grad(singular_value_loss, A), atol=1e-7)


def test_tangents_are_jax_jvp():
    _, t = sg.jvp(lambda a: a.rec.eigvalsh(a), (H,), (TH,))
    np.testing.assert_allclose(t, JAX_EIGH_JVP, rtol=1e-10)
    _, t = sg.jvp(lambda a: np.linalg.svd(a, compute_uv=False), (A,), (TA,))
    np.testing.assert_allclose(t, JAX_SVD_JVP, rtol=1e-10)
    assert t.dtype == np.float64


@pytest.mark.parametrize("order", [1, 2])
def test_checker_at_orders_one_and_two(order, rng):
    modes = ("rev",) if order == 1 else ("rev", "fwd")
    sg.check_grads(lambda a: a.rec.eigvalsh(a), [H], order=order, modes=modes, rng=rng,
                   atol=1e-5, rtol=1e-5)
    sg.check_grads(lambda a: a.rec.svdvals(a), [A], order=1, modes=("rev", "fwd"), rng=rng,
                   atol=1e-5, rtol=1e-5)


def gauge_free(a):
    """|V|^2 weighted, and V diag(c) V^H: functions of the eigenvectors the phases leave alone."""
    w, v = a.rec.eigh(a)
    return (abs(v) ** 2 * C).sum() + ((v * C) @ v.conj().T * TH).real.sum()


def plain_gauge_free(a):
    w, v = np.linalg.eigh((a + a.conj().T) / 2)
    return (abs(v) ** 2 * C).sum() + ((v * C) @ v.conj().T * TH).real.sum()


def test_eigenvector_derivatives_of_phase_free_functions():
    np.testing.assert_allclose(sg.grad(gauge_free)(H),
                               finite_difference_grad(plain_gauge_free, H), atol=1e-6)
    _, t = sg.jvp(gauge_free, (H,), (TH,))
    h = 1e-6
    want = (plain_gauge_free(H + h * TH) - plain_gauge_free(H - h * TH)) / (2 * h)
    np.testing.assert_allclose(t, want, atol=1e-6)


def test_taylor_of_the_eigenvalues():
    series = sg.taylor(lambda a: a.rec.eigvalsh(a), H, TH, 2)
    f = lambda t: np.linalg.eigvalsh((H + t * TH + (H + t * TH).conj().T) / 2)    # noqa: E731
    h = 1e-4
    np.testing.assert_allclose(series[1], (f(h) - f(-h)) / (2 * h), atol=1e-8)
    np.testing.assert_allclose(series[2], (f(h) - 2 * f(0) + f(-h)) / h ** 2, atol=1e-5)


CU = np.array([[0.5 - 1j, 2.0, 0.3j], [1.0, -0.7 + 0.2j, 1.5]])
WU = np.array([[0.2, -1.0], [0.7, 0.4]])
WV = np.array([[1.0, 0.3, -0.5], [0.1, 0.8, 2.0]])


def singular_gauge_free(a):
    """u_i v_i^H weighted, |U|^2 and |Vh|^2 weighted: functions the pairs' phases leave alone."""
    u, s, vh = (a.rec.svd if hasattr(a, "rec") else np.linalg.svd)(a, full_matrices=False)
    return np.real(np.sum(((u * D) @ vh) * CU)) + np.sum(np.abs(u) ** 2 * WU) + \
        np.sum(np.abs(vh) ** 2 * WV)


def test_singular_vector_derivatives_of_phase_free_functions():
    np.testing.assert_allclose(sg.grad(singular_gauge_free)(A),
                               finite_difference_grad(singular_gauge_free, A), atol=1e-7)
    _, t = sg.jvp(singular_gauge_free, (A,), (TA,))
    h = 1e-6
    want = (singular_gauge_free(A + h * TA) - singular_gauge_free(A - h * TA)) / (2 * h)
    np.testing.assert_allclose(t, want, atol=1e-7)
    wide = A.T.conj() @ np.array([[1.0, 0.5j], [0.2, -1.0]])          # a (3, 2) matrix
    f = lambda a: np.sum(np.abs(a.rec.svd(a, full_matrices=False).U) ** 2 * WV.T)  # noqa: E731
    plain = lambda a: np.sum(np.abs(np.linalg.svd(a, full_matrices=False)[0]) ** 2 * WV.T)  # noqa: E731
    np.testing.assert_allclose(sg.grad(f)(wide), finite_difference_grad(plain, wide), atol=1e-7)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (3, 3), (2, 2, 3)])
def test_singular_values_at_order_two(shape, rng):
    """The checker's complex differences (both real directions) at orders 1 and 2, reverse and
    forward, on wide, tall, square and stacked complex matrices."""
    a = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    sg.check_grads(lambda a: a.rec.svdvals(a), [a], order=2, modes=("rev", "fwd"), rng=rng,
                   atol=1e-5, rtol=1e-5)


def test_singular_value_hessian_against_second_differences():
    """d2/dt2 L(A + t T) = Re(sum(T * d/dt grad L(A + t T))) in JAX's convention, against the
    central second difference of L; and d/dt grad against differences of the gradient."""
    grad = sg.grad(singular_value_loss)
    _, hv = sg.jvp(grad, (A,), (TA,))
    h = 1e-4
    second = (singular_value_loss(A + h * TA) - 2 * singular_value_loss(A) +
              singular_value_loss(A - h * TA)) / h ** 2
    np.testing.assert_allclose(np.real(np.sum(TA * hv)), second, atol=1e-6)
    h = 1e-6
    np.testing.assert_allclose(hv, (grad(A + h * TA) - grad(A - h * TA)) / (2 * h), atol=1e-7)
    hessian_of_real = sg.hessian(lambda t: singular_value_loss(t[0] + 1j * t[1]))(
        np.stack([A.real, A.imag]))
    direction = np.stack([TA.real, TA.imag])
    np.testing.assert_allclose(np.tensordot(hessian_of_real, direction, 3).ravel() @
                               direction.ravel(), second, atol=1e-6)
