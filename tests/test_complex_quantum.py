"""A quantum example: the energy E = <psi|H|psi> / <psi|psi> of a small Hermitian H, its
gradient in the complex state (both conventions) and its Hessian in the real parameters
(Re psi, Im psi), against the closed forms and finite differences."""

import numpy as np
import pytest

import simplegrad as sg

# a 3-level Hamiltonian, Hermitian: H = A + iB, A symmetric, B antisymmetric
H = np.array([[1.0, 0.5 - 0.2j, 0.1j],
              [0.5 + 0.2j, -0.3, 0.4 + 0.3j],
              [-0.1j, 0.4 - 0.3j, 0.8]])
PSI = np.array([0.6 + 0.2j, -0.3 + 0.5j, 0.1 - 0.4j])


def energy(psi):
    """<psi|H|psi> / <psi|psi> (real for a Hermitian H)."""
    return np.real(np.conj(psi) @ (H @ psi)) / np.real(np.conj(psi) @ psi)


def energy_of_parameters(theta):
    n = theta.shape[0] // 2
    return energy(theta[:n] + 1j * theta[n:])


def _closed_forms(psi):
    norm = np.real(np.conj(psi) @ psi)
    e = energy(psi)
    residual = (H @ psi - e * psi) / norm       # dE/d(conj psi), the Wirtinger derivative
    return e, residual


def test_hamiltonian_is_hermitian():
    np.testing.assert_allclose(H, H.conj().T)


def test_energy_gradient_in_both_conventions():
    e, residual = _closed_forms(PSI)
    value, g = sg.value_and_grad(energy)(PSI)
    assert value == pytest.approx(e, rel=1e-14)
    np.testing.assert_allclose(g, 2 * np.conj(residual), rtol=1e-12)    # JAX: 2 dE/dz
    np.testing.assert_allclose(sg.grad(energy, convention="torch")(PSI), 2 * residual,
                               rtol=1e-12)                              # PyTorch: 2 dE/dz̄


def test_energy_gradient_against_finite_differences():
    h = 1e-6
    want = np.zeros(3, complex)
    for k in range(3):
        e = np.zeros(3)
        e[k] = h
        want[k] = (energy(PSI + e) - energy(PSI - e)) / (2 * h) - \
            1j * (energy(PSI + 1j * e) - energy(PSI - 1j * e)) / (2 * h)
    np.testing.assert_allclose(sg.grad(energy)(PSI), want, rtol=1e-8)


def test_ground_state_is_stationary():
    w, v = np.linalg.eigh(H)
    ground = v[:, 0] * np.exp(0.3j)
    assert sg.grad(energy)(ground) == pytest.approx(np.zeros(3), abs=1e-13)
    assert energy(ground) == pytest.approx(w[0], rel=1e-13)


def test_energy_hessian_in_real_parameters():
    theta = np.concatenate([PSI.real, PSI.imag])
    # the real form: psi^H H psi = theta^T M theta with M = [[A, -B], [B, A]]
    A, B = H.real, H.imag
    M = np.block([[A, -B], [B, A]])
    norm = theta @ theta
    e = theta @ M @ theta / norm
    r = M @ theta - e * theta
    want = 2 / norm * (M - e * np.eye(6)) - 4 / norm ** 2 * (np.outer(r, theta) +
                                                            np.outer(theta, r))
    got = sg.hessian(energy_of_parameters)(theta)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(sg.grad(energy_of_parameters)(theta), 2 * r / norm,
                               rtol=1e-12)
    # and by central differences of the recorded gradient
    h = 1e-6
    fd = np.array([(sg.grad(energy_of_parameters)(theta + h * ek) -
                    sg.grad(energy_of_parameters)(theta - h * ek)) / (2 * h)
                   for ek in np.eye(6)])
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)


def test_hessian_of_complex_state_needs_real_parameters():
    with pytest.raises(sg.DTypeError, match="holomorphic=True"):
        sg.hessian(energy)(PSI)
