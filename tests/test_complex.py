"""Complex values: gradients in JAX's convention (values computed once with jax.grad, jax.vjp
and jax.jvp and written here; no peer runs at test time), real inputs meeting complex
constants, complex64, and primitives that refuse complex values."""

import numpy as np
import pytest

import simplegrad as sg

Z = np.array([1 + 2j, 3 - 1j])
A = np.array([[1, 2j], [3, 1 - 1j]])
V = np.array([0.5 - 1j, 2 + 0.3j])

# f, jax.grad(f)(Z)
JAX_GRADS = {
    "abs2": (lambda z: np.sum(np.abs(z) ** 2), [2 - 4j, 6 + 2j]),
    "sin_real": (lambda z: np.sum(np.sin(z).real),
                 [2.0327230070196656 - 3.0518977991518j,
                  -1.5276382501165435 + 0.16584440191897884j]),
    "cube_imag": (lambda z: np.sum((z * z * z).imag), [12 + 9j, -18 - 24j]),
    "abs_exp": (lambda z: np.sum(np.abs(np.exp(z))), [2.7182818284590455, 20.08553692318767]),
    "z_conj_z": (lambda z: np.sum((z * np.conj(z)).real), [2 - 4j, 6 + 2j]),
    "angle": (lambda z: np.sum(np.angle(z)), [-0.4 - 0.2j, 0.1 - 0.3j]),
    "matmul_abs": (lambda z: np.abs(A @ z).sum(),
                   [3.13655351424417 - 2.0505012066313557j,
                    2.429744369669245 - 0.5976204840625798j]),
}


@pytest.mark.parametrize("name", sorted(JAX_GRADS))
def test_grad_is_jax_grad(name):
    f, want = JAX_GRADS[name]
    np.testing.assert_allclose(sg.grad(f)(Z), want, rtol=1e-12, atol=1e-14)


def finite_difference_grad(f, z, h=1e-6):
    """dL/dx - i dL/dy, entry by entry, by central differences in both real directions."""
    out = np.zeros_like(z)
    for k in range(z.size):
        e = np.zeros_like(z)
        e.flat[k] = h
        dx = (f(z + e) - f(z - e)) / (2 * h)
        dy = (f(z + 1j * e) - f(z - 1j * e)) / (2 * h)
        out.flat[k] = dx - 1j * dy
    return out


@pytest.mark.parametrize("name", sorted(JAX_GRADS))
def test_jax_convention_is_dx_minus_i_dy(name):
    f = JAX_GRADS[name][0]
    np.testing.assert_allclose(sg.grad(f)(Z), finite_difference_grad(f, Z), rtol=1e-7)


def test_cookbook_real_function_of_z():
    """The autodiff cookbook's f(z) = x**2 + y**2 at 3+4j: 6-8j, as abs(z)**2."""
    z = 3.0 + 4j
    assert sg.grad(lambda z: np.real(z) ** 2 + np.imag(z) ** 2)(z) == pytest.approx(6 - 8j)
    assert sg.grad(lambda z: np.abs(z) ** 2)(z) == pytest.approx(6 - 8j)


def test_vjp_and_jvp_are_jax_s():
    def f(z):
        return np.sin(z) * np.conj(z)
    _, pullback = sg.vjp(f, Z)
    np.testing.assert_allclose(pullback(V)[0], [-5.610389810803408 + 2.698378677193735j,
                                                -9.101999797096008 - 5.877046427292944j],
                               rtol=1e-12)
    np.testing.assert_allclose(sg.jvp(f, (Z,), (V,))[1],
                               [-9.529591893646622 + 4.657979718615341j,
                                -8.403935578874055 - 1.223284972479941j], rtol=1e-12)


def test_second_order_through_complex_values():
    """d/dx of the gradient of |exp(i a x)|^2 (1 + x^2): a real x, complex intermediates."""
    def f(x):
        z = np.exp(1j * 0.7 * x) * (1 + x * x)
        return np.sum(np.abs(z) ** 2)
    x = np.array([0.3, -1.1])
    g = sg.grad(f)(x)
    np.testing.assert_allclose(g, 4 * x * (1 + x * x), rtol=1e-12)
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(sg.grad(f)(x)))(x),
                               4 + 12 * x * x, rtol=1e-12)


def test_real_input_gets_a_real_gradient():
    x = np.array([0.3, -1.2])
    g = sg.grad(lambda x: np.sum(np.abs(x * (1 + 2j)) ** 2))(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 10 * x, rtol=1e-12)


def test_complex64_stays_complex64():
    g = sg.grad(lambda z: np.sum(np.abs(z) ** 2))(Z.astype(np.complex64))
    assert g.dtype == np.complex64
    np.testing.assert_allclose(g, [2 - 4j, 6 + 2j], rtol=1e-6)


def test_real_and_imag_of_real_variables_unchanged():
    x = np.array([0.5, -2.0])
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.real(x) * x))(x), 2 * x)
    assert sg.grad(lambda x: np.sum(np.imag(x) + x))(x).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("fn", [np.floor, np.ceil, np.trunc])
def test_real_only_primitives_refuse_complex(fn):
    with pytest.raises(sg.DTypeError, match=fn.__name__):
        sg.grad(lambda z: np.sum(np.abs(fn(z))))(Z)


def test_arctan2_refuses_complex():
    with pytest.raises(sg.DTypeError, match="arctan2"):
        sg.grad(lambda z: np.sum(np.abs(np.arctan2(z, 1.0))))(Z)


# ---------------------------------------------------------------- PyTorch's convention

# f, what PyTorch's backward leaves in z.grad (torch 2.13, computed once)
TORCH_GRADS = {
    "abs2": [2 + 4j, 6 - 2j],
    "sin_real": [2.0327230070196656 + 3.0518977991518j,
                 -1.5276382501165433 - 0.1658444019189788j],
    "cube_imag": [12 - 9j, -18 + 24j],
    "abs_exp": [2.718281828459045, 20.08553692318767],
    "z_conj_z": [2 + 4j, 6 - 2j],
    "angle": [-0.4 + 0.2j, 0.1 + 0.3j],
    "matmul_abs": [3.13655351424417 + 2.0505012066313557j,
                   2.429744369669245 + 0.5976204840625796j],
}


@pytest.mark.parametrize("name", sorted(TORCH_GRADS))
def test_torch_convention_is_torch_grad(name):
    f = JAX_GRADS[name][0]
    np.testing.assert_allclose(sg.grad(f, convention="torch")(Z), TORCH_GRADS[name],
                               rtol=1e-12, atol=1e-14)


def test_torch_convention_value_and_grad_and_vjp():
    value, g = sg.value_and_grad(lambda z: np.abs(z) ** 2, convention="torch")(3 + 4j)
    assert value == pytest.approx(25.0) and g == pytest.approx(6 + 8j)
    _, pullback = sg.vjp(lambda z: np.sin(z) * np.conj(z), Z, convention="torch")
    # torch.autograd.grad(f(z), z, grad_outputs=V)
    np.testing.assert_allclose(pullback(V)[0], [4.705095732735642 + 11.775323531806471j,
                                                -9.02199860548982 + 2.897135204958486j],
                               rtol=1e-12)


def test_real_inputs_same_in_both_conventions():
    x = np.array([0.4, -0.9])
    def f(x):
        return np.sum(np.abs(np.exp(1j * x) * (2 + x)) ** 2)
    np.testing.assert_allclose(sg.grad(f, convention="torch")(x), sg.grad(f)(x))
    np.testing.assert_allclose(sg.grad(f)(x), 2 * (2 + x), rtol=1e-12)


def test_convention_is_checked():
    with pytest.raises(sg.ArgumentError, match="convention"):
        sg.grad(np.sum, convention="numpy")


# ---------------------------------------------------------------- holomorphic=True


def test_cookbook_holomorphic_grad_jacobian_hessian():
    z = 3.0 + 4j
    assert sg.grad(np.sin, holomorphic=True)(z) == pytest.approx(np.cos(z))
    assert sg.hessian(lambda z: z ** 3, holomorphic=True)(1 + 2j) == pytest.approx(6 + 12j)
    # jax.jacobian(lambda z: A @ z * z, holomorphic=True)(Z)
    want = [[4 + 10j, -4 + 2j], [9 - 3j, 7 - 2j]]
    for mode in ("auto", "rev", "fwd"):
        np.testing.assert_allclose(
            sg.jacobian(lambda z: A @ z * z, mode=mode, holomorphic=True)(Z), want)
    np.testing.assert_allclose(sg.hessian(lambda z: np.sum(z ** 3), holomorphic=True)(Z),
                               [[6 + 12j, 0], [0, 18 - 6j]])


def test_jacobian_of_real_outputs_of_complex_inputs_is_jax_s():
    # jax.jacobian(lambda z: jnp.abs(A @ z))(Z)
    want = [[0.3511234415883917 - 0.9363291775690445j, 1.872658355138089 + 0.7022468831767834j],
            [2.785430072655778 - 1.1141720290623112j, 0.5570860145311557 - 1.2998673672393632j]]
    np.testing.assert_allclose(sg.jacobian(lambda z: np.abs(A @ z))(Z), want, rtol=1e-12)


def test_holomorphic_refusals_are_jax_s():
    with pytest.raises(sg.DTypeError, match="holomorphic=True"):
        sg.grad(np.sin)(3 + 4j)             # a complex output
    with pytest.raises(sg.DTypeError, match="complex inputs"):
        sg.grad(np.sin, holomorphic=True)(3.0)
    with pytest.raises(sg.DTypeError, match="complex output"):
        sg.grad(np.abs, holomorphic=True)(3 + 4j)
    with pytest.raises(sg.DTypeError, match="holomorphic=True"):
        sg.hessian(lambda z: np.sum(np.abs(z) ** 2))(Z)     # jax.hessian refuses it too
    with pytest.raises(sg.DTypeError, match="holomorphic=True"):
        sg.jacobian(lambda z: np.abs(z), mode="fwd")(Z)
    with pytest.raises(sg.DTypeError, match="complex inputs"):
        sg.jacobian(lambda x: x * 1j, holomorphic=True)(np.ones(2))


# ---------------------------------------------------------------- real, imag, conj, abs, angle


def test_parts_and_their_gradients():
    z = np.array([0.5 + 1.5j, -2.0 - 0.5j])
    op = sg.Ops()
    v = op.var(z)
    np.testing.assert_array_equal(v.real.value, z.real)
    np.testing.assert_array_equal(np.imag(v).value, z.imag)
    np.testing.assert_array_equal(v.conj().value, np.conj(z))
    np.testing.assert_allclose(np.angle(v).value, np.angle(z))
    np.testing.assert_allclose(np.angle(v, deg=True).value, np.angle(z, deg=True))
    assert v.real.dtype == np.float64 and np.abs(v).dtype == np.float64
    # JAX: grad of sum(real(z)) is 1, of sum(imag(z)) is -1j
    np.testing.assert_array_equal(sg.grad(lambda z: np.sum(np.real(z)))(z), [1, 1])
    np.testing.assert_array_equal(sg.grad(lambda z: np.sum(np.imag(z)))(z), [-1j, -1j])
    # Re(conj(z) (2 + 1j)) = 2x + y: dL/dx - i dL/dy = 2 - 1j
    np.testing.assert_allclose(sg.grad(lambda z: np.sum(np.real(np.conj(z) * (2 + 1j))))(z),
                               [2 - 1j, 2 - 1j])


def test_conj_and_real_of_real_values_record_nothing():
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0]))
    assert x.conj() is x and x.real is x and np.conj(x) is x
    assert len(op.tape.entries) == 0


# ---------------------------------------------------------------- Fourier transforms


def _fd(f, z, h=1e-6):
    out = np.zeros_like(z)
    for k in range(z.size):
        e = np.zeros_like(z)
        e.flat[k] = h
        out.flat[k] = (f(z + e) - f(z - e)) / (2 * h)
        if np.iscomplexobj(z):
            out.flat[k] -= 1j * (f(z + 1j * e) - f(z - 1j * e)) / (2 * h)
    return out


W = np.array([0.3 - 1j, 1.2 + 0.4j, -0.7 + 0.2j, 0.5 + 0.5j, 1 - 0.3j, -0.2 - 0.9j,
              0.8 + 0.1j, -1.1 + 0.6j, 0.4 - 0.4j])
ZF = np.array([0.2 + 1j, -1.3 + 0.4j, 0.7 - 0.6j, 1.1 + 0.2j, -0.5 - 0.8j])
XF = np.array([0.4, -1.0, 2.0, 0.3, -0.6, 1.5])

FOURIER = {
    "fft": (lambda z: np.sum(np.abs(np.fft.fft(z) * W[:5]) ** 2), ZF),
    "fft_n_ortho": (lambda z: np.sum(np.abs(np.fft.fft(z, n=7, norm="ortho") * W[:7]) ** 2),
                    ZF),
    "fft_truncated": (lambda z: np.sum(np.abs(np.fft.fft(z, n=3) * W[:3]) ** 2), ZF),
    "ifft_forward": (lambda z: np.sum(np.abs(np.fft.ifft(z, norm="forward") * W[:5]) ** 2), ZF),
    "rfft": (lambda x: np.sum(np.abs(np.fft.rfft(x) * W[:4]) ** 2), XF),
    "rfft_odd": (lambda x: np.sum(np.abs(np.fft.rfft(x, n=5) * W[:3]) ** 2), XF),
    "irfft": (lambda z: np.sum(np.fft.irfft(z) * np.arange(8.0) ** 2), ZF),
    "irfft_odd_ortho": (lambda z: np.sum(np.fft.irfft(z, n=9, norm="ortho") * np.arange(9.0)),
                        ZF),
    "fftn": (lambda z: np.sum(np.abs(np.fft.fftn(np.reshape(z[:4], (2, 2))) *
                                     np.reshape(W[:4], (2, 2))) ** 2), ZF),
    "ifftn_axes": (lambda z: np.sum(np.abs(np.fft.ifftn(np.reshape(z[:4], (2, 2)), axes=(1,)))
                                    ** 3), ZF),
}


@pytest.mark.parametrize("name", sorted(FOURIER))
def test_fourier_gradients(name):
    f, a = FOURIER[name]
    np.testing.assert_allclose(sg.grad(f)(a), _fd(f, a), rtol=1e-7, atol=1e-8)


def test_fourier_values_are_numpy_s():
    op = sg.Ops()
    z, x = op.var(ZF), op.var(XF)
    np.testing.assert_allclose(np.fft.fft(z, n=7, norm="ortho").value,
                               np.fft.fft(ZF, n=7, norm="ortho"))
    np.testing.assert_allclose(np.fft.rfft(x).value, np.fft.rfft(XF))
    np.testing.assert_allclose(np.fft.irfft(z, n=9).value, np.fft.irfft(ZF, n=9))
    m = ZF[:4].reshape(2, 2)
    np.testing.assert_allclose(np.fft.fftn(op.var(m)).value, np.fft.fftn(m))
    np.testing.assert_allclose(np.fft.ifftn(op.var(m), s=(2, 3), axes=(0, 1)).value,
                               np.fft.ifftn(m, s=(2, 3), axes=(0, 1)))


def test_fourier_power_spectrum_loss_matches_jax():
    """jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2 * jnp.arange(4.)))(XF)."""
    def f(x):
        return np.sum(np.abs(np.fft.rfft(x)) ** 2 * np.arange(4.0))
    # closed form: sum_k c_k |X_k|^2, gradient 2 Re(F^T (c X)) on the half spectrum
    spectrum = np.fft.rfft(XF)
    full = np.zeros(6, complex)
    full[:4] = np.arange(4.0) * spectrum
    want = 2 * np.real(np.fft.fft(np.conj(full)))
    np.testing.assert_allclose(sg.grad(f)(XF), want, rtol=1e-12, atol=1e-12)


def test_fourier_vmap_and_second_order():
    zs = np.stack([ZF, ZF[::-1] * 1j])
    f = FOURIER["fft"][0]
    g = sg.vmap(sg.grad(f))(zs)
    np.testing.assert_allclose(g, [sg.grad(f)(zs[0]), sg.grad(f)(zs[1])], rtol=1e-12)
    # f is |F z w|^2: a quadratic form, so its gradient is linear in z (JAX convention:
    # grad = 2 conj(F^H diag(|w|^2) F z) = 2 F^T conj(diag(|w|^2) F z), F symmetric) and the
    # gradient at 2z is twice that at z
    np.testing.assert_allclose(sg.grad(f)(2 * ZF), 2 * sg.grad(f)(ZF), rtol=1e-12)
    F = np.fft.fft(np.eye(5))
    np.testing.assert_allclose(sg.grad(f)(ZF),
                               2 * F.T @ np.conj(np.abs(W[:5]) ** 2 * (F @ ZF)), rtol=1e-12)


def test_rfft_refuses_complex_values():
    with pytest.raises(sg.DTypeError, match="rfft"):
        sg.grad(lambda z: np.sum(np.abs(np.fft.rfft(z))))(ZF)


# ---------------------------------------------------------------- comparisons and orderings


@pytest.mark.parametrize("fn", [lambda z: np.maximum(z, 0), lambda z: z < 1,
                                lambda z: np.max(z), lambda z: np.sort(z),
                                lambda z: np.clip(z, 0, 1)],
                         ids=["maximum", "less", "max", "sort", "clip"])
def test_orderings_refuse_complex(fn):
    with pytest.raises(sg.DTypeError, match="takes real values only"):
        sg.grad(lambda z: np.sum(np.abs(fn(z))))(Z)


# ---------------------------------------------------------------- the trace


def test_trace_heads_complex_blocks_with_the_convention():
    with sg.Ops() as op:
        z = op.var(np.array([1 + 2j, 3 - 1j]), name="z")
        op.grad(np.sum(np.abs(z) ** 2), z)
        text = op.format_trace()
    assert "dv2 2 dL/dz = dL/dx - i dL/dy (JAX convention) ----" in text
    assert "z.conj()" in text
    with sg.Ops() as op:
        w = op.var(3 + 4j, name="w")
        op.grad(w ** 3, w)
        assert "dv0 df/dz (holomorphic) ----" in op.format_trace()
    with sg.Ops() as op:        # real blocks as before
        x = op.var(np.array([1.0, 2.0]), name="x")
        op.grad(np.sum(x * x), x)
        assert "dv1 --------------" in op.format_trace()


def test_explained_trace_shows_where_a_conjugate_enters():
    with sg.Ops() as op:
        z = op.var(np.array([1 + 2j, 3 - 1j]), name="z")
        op.grad(np.sum(np.abs(z) ** 2), z)
        lines = op.format_trace(explain=True).splitlines()
    assert any(line.startswith("v7 = z.conj()    # d(v0 = z.abs())/dz") for line in lines)


def test_abs_taylor_of_complex_inputs():
    # |z + t v| is not piecewise linear in t for complex z: its series is sqrt of z conj(z)'s
    z = np.array([1 + 2j, -0.5 + 0.3j])
    v = np.array([0.3 - 0.1j, 0.2 + 0.7j])
    series = sg.taylor(abs, z, v, 4)
    nested = lambda t: abs(z + t * v).sum()      # noqa: E731
    for k in range(1, 5):
        nested = sg.derivative(nested)
        np.testing.assert_allclose(series[k].sum(), nested(0.0), rtol=1e-10)
    f = lambda t: np.abs(z + t * v)       # noqa: E731
    h = 1e-3
    np.testing.assert_allclose(series[2], (f(h) - 2 * f(0) + f(-h)) / h ** 2, rtol=1e-5)
    np.testing.assert_allclose(series[3], (f(2 * h) - 2 * f(h) + 2 * f(-h) - f(-2 * h))
                               / (2 * h ** 3), rtol=1e-4, atol=1e-5)
    real = sg.taylor(abs, np.array([-1.5, 2.0]), np.array([0.5, -1.0]), 2)
    np.testing.assert_array_equal(real[1], [-0.5, -1.0])
    assert not real[2].any()
