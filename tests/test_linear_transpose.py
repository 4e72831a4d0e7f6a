"""``sg.linear_transpose``: the adjoint of a linear function, and reverse mode derived from it.

Oracles: the adjoint identity <A x, y> == <x, A^T y> at random x, y and closed-form adjoints
(A^T y for ``A @ t``, JAX's documented example); ``sg.vjp``'s pullback, which
``linear_transpose(linearize(f))`` must equal value for value (1e-12) and, after
``sg.simplify``, line for line (``sg.diff``); numerical linearity of each registered
primitive's numpy forward, F(a x1 + b x2) == a F(x1) + b F(x2), which each record's ``linear``
must agree with both ways.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

import simplegrad as sg
from simplegrad.primitives.core import EACH, JOINT
from tests.test_primitives import apply_with, case_id, sample

RTOL = 1e-12


def close(a, b, rtol: float = RTOL) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol, atol=rtol * max(
        1.0, float(np.max(np.abs(b), initial=0.0)))))


def inner(a, b) -> float:
    """The pairing of a cotangent with a tangent: Re(sum(a * b)) (JAX's, no conjugate)."""
    return float(np.real(np.sum(np.asarray(a) * np.asarray(b))))


def like(rng, a) -> np.ndarray:
    """A random array of a's shape, complex (both parts drawn) when a is."""
    x = rng.normal(size=np.shape(a))
    return x + 1j * rng.normal(size=np.shape(a)) if np.iscomplexobj(a) else x


@dataclass(frozen=True)
class Spec:
    """A shape-and-dtype object, as JAX's ShapeDtypeStruct (not a namedtuple, which is a
    pytree node): only these two are read."""

    shape: tuple
    dtype: np.dtype


# ---------------------------------------------------------------- closed forms


def test_jax_documented_example():
    scalar = Spec((), np.dtype(np.float32))
    f_t = sg.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, scalar, scalar)
    xt, yt = f_t(1.0)
    assert (float(xt), float(yt)) == (0.5, -0.5)
    assert xt.dtype == yt.dtype == np.float32       # the primals' dtypes, as JAX's
    c = np.array([1.5, 2.5])                          # a float64 constant: still float32 out
    (g,) = sg.linear_transpose(lambda t: t * c, Spec((2,), np.dtype(np.float32)))(np.ones(2))
    assert g.dtype == np.float32 and close(g, c)
    # an input the output does not depend on gets zeros, as in JAX
    xt, yt = sg.linear_transpose(lambda x, y: 2.0 * x, 1.0, np.ones(2))(1.0)
    assert float(xt) == 2.0 and close(yt, [0.0, 0.0])


def test_matrix_transpose_is_the_adjoint(rng):
    A = rng.normal(size=(3, 4))
    f_t = sg.linear_transpose(lambda t: A @ t, Spec((4,), np.float64))
    for _ in range(3):
        x, y = rng.normal(size=4), rng.normal(size=3)
        (aty,) = f_t(y)
        assert close(aty, A.T @ y)
        assert np.isclose(inner(A @ x, y), inner(x, aty), rtol=RTOL)


def test_transposing_twice_gives_the_map_back(rng):
    A = rng.normal(size=(2, 3))
    f_t = sg.linear_transpose(lambda t: A @ t, np.zeros(3))
    f_tt = sg.linear_transpose(lambda u: f_t(u)[0], np.zeros(2))
    x = rng.normal(size=3)
    assert close(f_tt(x)[0], A @ x)


LINEAR_MAPS = {
    "scale-broadcast": (lambda t, C: t * C, (3, 1), (3, 4)),
    "sum-axis": (lambda t, C: (t * C).sum(axis=0), (3, 4), (3, 4)),
    "matmul-left": (lambda t, C: C @ t, (4, 2), (3, 4)),
    "getitem-transpose": (lambda t, C: t[1:, ::-1].T * C[:3, :2], (3, 3), (3, 4)),
    "concatenate-cumsum": (lambda t, C: np.cumsum(np.concatenate([t, 2.0 * t]), axis=0),
                           (3,), (3, 4)),
    "einsum": (lambda t, C: np.einsum("ij,jk->ik", C, t), (4, 2), (3, 4)),
    "where-zero": (lambda t, C: np.where(C[0] > 0, t, 0.0), (4,), (3, 4)),
    "pad-roll-mean": (lambda t, C: np.roll(np.pad(t, (1, 2)), 1).mean() * C[0], (3,), (3, 4)),
    "div-solve": (lambda t, C: np.linalg.solve(C[:, :3] + 4 * np.eye(3), t / C[:, 3]),
                  (3,), (3, 4)),
}


@pytest.mark.parametrize("name", list(LINEAR_MAPS))
def test_adjoint_identity(name, rng):
    fn, shape, cshape = LINEAR_MAPS[name]
    C = rng.uniform(0.5, 2.0, size=cshape)
    f_t = sg.linear_transpose(lambda t: fn(t, C), np.zeros(shape))
    for _ in range(3):
        x = rng.normal(size=shape)
        Ax = fn(x, C)                       # numpy itself, on arrays
        y = rng.normal(size=np.shape(Ax))
        (aty,) = f_t(y)
        assert aty.shape == shape
        assert np.isclose(inner(Ax, y), inner(x, aty), rtol=RTOL), name


def test_pytrees_in_and_out(rng):
    A = rng.normal(size=(3, 4))
    f = lambda p, s: {"y": A @ p["w"], "z": p["b"].sum() - s}      # noqa: E731
    f_t = sg.linear_transpose(f, {"w": np.ones(4), "b": np.ones(2)}, 1.0)
    y, z = rng.normal(size=3), 1.5
    (p, s) = f_t({"y": y, "z": z})
    assert set(p) == {"w", "b"}
    assert close(p["w"], A.T @ y) and close(p["b"], [z, z]) and float(s) == -z
    assert f_t.program.format().startswith("inputs: u0, u1")


# ---------------------------------------------------------------- reverse mode derived

rng0 = np.random.default_rng(7)
W1, B1, W2 = rng0.normal(size=(4, 5)), rng0.normal(size=5), rng0.normal(size=(5, 2))
X = rng0.normal(size=(3, 4))

FUNCTIONS = {
    "sin-mul-exp-sum": (lambda x: (x.sin() * x).exp().sum(), (3,)),
    "tanh-log-chain": (lambda x: ((x * x + 1.0).log() * x.tanh()).sigmoid(), (4,)),
    "sum-axis": (lambda x: (x * x).sum(axis=0), (3, 4)),
    "matmul": (lambda x: (x @ W1).exp(), (3, 4)),
    "matmul-weights": (lambda W: X @ W, (4, 5)),
    "mlp-loss": (lambda W: ((X @ W + B1).tanh() @ W2).sum(), (4, 5)),
    "mlp-outputs": (lambda x: (x @ W1 + B1).tanh() @ W2, (3, 4)),
}


def pullback_program(vjp_fn, u0: np.ndarray) -> sg.Program:
    """vjp's pullback recorded on an Ops of our own, as a Program of its cotangent ``u``."""
    op = sg.Ops()
    u = op.var(u0, name="u")
    return op.program(u, list(vjp_fn(u)))


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_transposed_linearization_is_the_pullback(name, rng):
    f, shape = FUNCTIONS[name]
    x0 = rng.normal(size=shape)
    y0, jvp_fn = sg.linearize(f, x0)
    f_t = sg.linear_transpose(jvp_fn, x0)
    y1, vjp_fn = sg.vjp(f, x0)
    assert close(y0, y1)
    u0 = rng.normal(size=np.shape(y0))
    derived, pulled = f_t.program, pullback_program(vjp_fn, u0)
    # the same program, line for line, once both are simplified
    assert not sg.diff(sg.simplify(derived), sg.simplify(pulled)), \
        str(sg.diff(sg.simplify(derived), sg.simplify(pulled)))
    # the same trace, read from sg.trace of either function
    assert not sg.diff(sg.trace(f_t, u0), sg.trace(vjp_fn, u0))
    # and the same values, at several cotangents, run, compiled or saved and loaded
    compiled = sg.compile(derived)
    for _ in range(3):
        u = rng.normal(size=np.shape(y0))
        assert close(f_t(u)[0], vjp_fn(u)[0])
        assert close(compiled(u)[0], vjp_fn(u)[0])


def registry_params() -> list:
    out = []
    for prim in sg.REGISTRY.values():
        for case in prim.cases:
            out.append(pytest.param(prim, case, id=f"{prim.name}-{case_id(case)}"))
    return out


@pytest.mark.filterwarnings("ignore::simplegrad.DisconnectedWarning")     # (floor, sign, ...)
@pytest.mark.parametrize(("prim", "case"), [
    p for p in registry_params() if p.values[0].differentiable])
def test_values_equal_the_pullback_for_every_primitive(prim, case, rng):
    """Reverse mode derived (linearize, then transpose) equals vjp in every input of every
    primitive, the others held fixed."""
    xs = sample(prim, case, rng)
    for i in range(len(xs)):
        if i in case.conditions:
            continue
        f = apply_with(prim, case, xs, [i])
        y0, jvp_fn = sg.linearize(f, xs[i])
        f_t = sg.linear_transpose(jvp_fn, xs[i])
        _, vjp_fn = sg.vjp(f, xs[i])
        u = like(rng, y0)
        assert close(f_t(u)[0], vjp_fn(u)[0], 1e-10), f"{prim.name} input {i}"


# ---------------------------------------------------------------- the records' linearity

A_, B_ = 0.7, 1.9        # a + b != 1, so that an affine map is caught too


def forward(prim, case, xs, values: dict) -> np.ndarray:
    """The primitive's numpy forward with ``values`` at their positions (conditions as bools)."""
    args = [values.get(i, x > 0 if i in case.conditions else x) for i, x in enumerate(xs)]
    out = np.asarray(prim.forward(*args, **case.attrs))
    return out if out.dtype.kind == "c" else out.astype(float)


def numerically_linear(prim, case, positions, rng, zero=()) -> bool:
    """F(a x1 + b x2) == a F(x1) + b F(x2) in the inputs at ``positions``, the inputs at
    ``zero`` held at zero and the rest at a sample."""
    xs, x1, x2 = (sample(prim, case, rng) for _ in range(3))
    xs = [np.zeros_like(x) if i in zero else x for i, x in enumerate(xs)]
    mixed = {i: A_ * x1[i] + B_ * x2[i] for i in positions}
    try:
        lhs = forward(prim, case, xs, mixed)
        rhs = A_ * forward(prim, case, xs, {i: x1[i] for i in positions}) + \
            B_ * forward(prim, case, xs, {i: x2[i] for i in positions})
    except (ValueError, TypeError, ArithmeticError):
        return False
    return bool(np.all(np.isfinite(lhs))) and close(lhs, rhs, 1e-9)


def inputs(prim, case) -> list[int]:
    return [i for i in range(len(case.shapes)) if i not in case.conditions]


def linear_positions(prim, case) -> tuple[str | None, list[int]]:
    """The record's kind and the (non-condition) inputs it calls linear, for this case."""
    rule = None if prim.linear is None else prim.linear.at(len(case.shapes), case.attrs)
    return (None, []) if rule is None else (rule[0], [i for i in inputs(prim, case)
                                                      if i in rule[1]])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # (a x1 + b x2 leaves arcsin's domain)
@pytest.mark.parametrize("prim", list(sg.REGISTRY.values()), ids=list(sg.REGISTRY))
def test_table_agrees_with_numpy(prim, rng):
    """Each input the record calls linear is linear in every case (the other inputs of a
    jointly linear primitive at zero); each it does not call linear is not linear in at least
    one case; jointly linear primitives are linear in all those inputs together,
    linear-in-each ones are not."""
    for i in range(max(len(c.shapes) for c in prim.cases)):
        claimed, found = [], []
        for case in prim.cases:
            if i not in inputs(prim, case):
                continue
            kind, linear = linear_positions(prim, case)
            claimed.append(i in linear)
            zero = [j for j in linear if j != i] if kind == JOINT and i in linear else []
            found.append(numerically_linear(prim, case, [i], rng, zero))
            if claimed[-1]:
                assert found[-1], f"{prim.name} case {case_id(case)}: not linear in input {i}"
        if claimed and not any(claimed) and prim.differentiable:
            assert not all(found), f"{prim.name} is linear in input {i}: give its record linear="
    for case in prim.cases:
        kind, linear = linear_positions(prim, case)
        if len(linear) < 2:
            continue
        together = numerically_linear(prim, case, linear, rng)
        assert together if kind == JOINT else not together, f"{prim.name} {kind}"


@pytest.mark.parametrize(("prim", "case"), registry_params())
def test_table_decides_what_transposes(prim, case, rng):
    """Transposed, with the adjoint identity holding, in the inputs the record calls linear
    (jointly or one at a time); refused, naming the primitive, in each other input and, where
    a jointly linear primitive keeps a nonzero constant, as affine."""
    xs = sample(prim, case, rng)
    kind, linear = linear_positions(prim, case)
    groups = [linear] if kind == JOINT else [[i] for i in linear]
    for group in groups:
        f_t = sg.linear_transpose(apply_with(prim, case, xs, group), *[xs[i] for i in group])
        x = {i: like(rng, xs[i]) for i in group}
        base = [np.zeros_like(a) if i in group else a for i, a in enumerate(xs)]
        Ax = forward(prim, case, base, x)
        y = like(rng, Ax)
        got = f_t(y)
        assert np.isclose(inner(Ax, y), sum(inner(x[i], g) for i, g in zip(group, got)),
                          rtol=1e-10), prim.name
    for i in inputs(prim, case):
        if i in linear and (kind == EACH or len(linear) == 1):
            continue
        reason = r"affine" if i in linear else rf"\({prim.name}\)"
        with pytest.raises(sg.NotDifferentiableError, match=reason):
            sg.linear_transpose(apply_with(prim, case, xs, [i]), xs[i])


# ---------------------------------------------------------------- nested in grad and vmap


def f_mlp(x):
    return ((x @ W1 + B1).tanh() @ W2).sin().sum()


def transposed_linearization(x):
    """Reverse mode derived: the gradient of f_mlp as the transpose of its linearization."""
    _, jvp_fn = sg.linearize(f_mlp, x)
    return sg.linear_transpose(jvp_fn, x)(1.0)[0]


def test_nested_in_grad_is_a_hessian_vector_product(rng):
    x0, v = rng.normal(size=4), rng.normal(size=4)
    assert close(transposed_linearization(x0), sg.grad(f_mlp)(x0))
    hv = sg.grad(lambda x: (transposed_linearization(x) * v).sum())(x0)
    assert close(hv, sg.hessian(f_mlp)(x0) @ v, 1e-10)


def test_nested_in_vmap_is_a_loop(rng):
    xs = rng.normal(size=(5, 4))
    assert close(sg.vmap(transposed_linearization)(xs), np.stack([sg.grad(f_mlp)(x)
                                                                  for x in xs]))
    Ws = rng.normal(size=(5, 3, 4))      # a closure batched per example
    got = sg.vmap(lambda W: sg.linear_transpose(lambda t: t @ W, np.zeros(3))(np.ones(4))[0])(Ws)
    assert close(got, np.stack([W @ np.ones(4) for W in Ws]))


def test_top_level_transpose_inside_grad_and_vmap(rng):
    A = rng.normal(size=(3, 4))
    f_t = sg.linear_transpose(lambda t: A @ t, np.zeros(4))
    U = rng.normal(size=(6, 3))
    assert close(sg.vmap(f_t)(U)[0], U @ A)
    # d/du sum(A^T u) = A 1
    assert close(sg.grad(lambda u: f_t(u)[0].sum())(U[0]), A @ np.ones(4))


def test_closure_stays_differentiable(rng):
    W0 = rng.normal(size=(3, 4))

    def loss(W):        # the transpose of t -> t @ W at ones(4) is W @ 1
        return (sg.linear_transpose(lambda t: t @ W, np.zeros(3))(np.ones(4))[0] ** 2).sum()
    assert close(sg.grad(loss)(W0), 2 * np.outer(W0 @ np.ones(4), np.ones(4)))


def test_under_no_grad_records_nothing():
    op = sg.Ops()
    x = op.var(np.ones(3))
    before = len(op.tape)
    with op.no_grad():
        (g,) = sg.linear_transpose(lambda t: t * 2.0, x)(np.ones(3))
    assert close(g.value, [2.0, 2.0, 2.0]) and len(op.tape) == before


def test_the_derivation_reads_as_reverse_mode(rng):
    """sg.trace of the derived gradient shows the forward, the linearization (a jvp block) and
    then its transpose (a grad block pulling back to the tangent leaf), as the tutorial
    teaches; the transpose recomputes nothing of the forward."""
    text = sg.trace(transposed_linearization, rng.normal(size=4)).format_trace(raw=False)
    blocks = re.findall(r"^(\S+) .*-{14}$", text, flags=re.M)
    assert len(blocks) == 2 and blocks[0] == "jvp" and blocks[1].startswith("dv"), text
    back = text[text.index(blocks[1] + " ---"):]
    assert ".tanh()" not in back and ".cos()" not in back and back.count("@") == 2
    assert re.search(r"^dv\d+_dv\d+ = v\d+$", back, flags=re.M)


def test_transpose_of_an_identity_and_of_zero():
    f_t = sg.linear_transpose(lambda t: t, np.ones(3))
    assert close(f_t(np.arange(3.0))[0], np.arange(3.0))
    assert f_t.program.format() == "inputs: u\noutputs: u"
    assert close(sg.linear_transpose(lambda t: (t, 2.0 * t), np.ones(3))(
        (np.ones(3), np.ones(3)))[0], [3.0, 3.0, 3.0])
    assert close(sg.linear_transpose(lambda t: np.zeros(3), np.ones(3))(np.ones(3))[0],
                 np.zeros(3))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(("f_lin", "match"), [
    (lambda t: t.sin(), r"the entry `v\d+ = t\.sin\(\)` \(sin\) is not linear, and its "
                        r"input 0 \(t with shape \(3,\)\) depends on f_lin's inputs"),
    (lambda t: t * t, r"\(mul\) is linear in each input alone"),
    (lambda t: t + 1.0, r"\(add\) also takes a constant, .* affine"),
    (lambda t: t.ops.pad(t, 1, constant_values=2.0), r"\(pad\) is not linear"),
    (lambda t: (t > 0) * t, r"\(greater\) is not linear"),
    (lambda t: t.relu(), r"\(relu\) is not linear"),
    (lambda t: 1.0 / t, r"\(div\) is linear only in its input\(s\) 0"),
    (lambda t: np.ones(3), r"output 0 .* does not depend on its inputs and is not zero"),
])
def test_not_linear_is_refused_naming_the_entry(f_lin, match):
    with pytest.raises(sg.NotDifferentiableError, match=match):
        sg.linear_transpose(f_lin, np.ones(3))


def test_refusal_inside_grad_leaves_the_tape_as_it_was():
    op = sg.Ops()
    x = op.var(np.ones(3))
    y = x * 2.0
    before = op.format_trace()
    with pytest.raises(sg.NotDifferentiableError, match="sin"):
        sg.linear_transpose(lambda t: (t * y).sin(), x)
    assert op.format_trace() == before


def test_bad_arguments():
    with pytest.raises(sg.ArgumentError, match="at least one primal"):
        sg.linear_transpose(lambda t: t)
    with pytest.raises(sg.ArgumentError, match="expected a function"):
        sg.linear_transpose(3.0, 1.0)
    with pytest.raises(sg.ArgumentError, match="reduce_axes"):
        sg.linear_transpose(lambda t: t, 1.0, reduce_axes=("batch",))
    with pytest.raises(sg.DTypeError, match="leaf 0 of primal 0 has dtype int64"):
        sg.linear_transpose(lambda t: t, np.arange(3))
    with pytest.raises(sg.ArgumentError, match="leaf 0 of primal 1 is a str"):
        sg.linear_transpose(lambda t, s: t, 1.0, "s")
    f_t = sg.linear_transpose(lambda t: {"a": t, "b": t.sum()}, np.ones(3))
    with pytest.raises(sg.ArgumentError, match="structure"):
        f_t(np.ones(3))
    with pytest.raises(sg.ShapeError, match=r"cotangent leaf 0 has shape \(2,\) but f_lin's "
                       r"output leaf 0 has shape \(3,\)"):
        f_t({"a": np.ones(2), "b": 1.0})
    assert close(f_t({"a": np.ones(3), "b": 2.0})[0], [3.0, 3.0, 3.0])


def test_a_rule_written_otherwise_differs_in_form_not_in_value():
    """As the README says: cos's transposed jvp negates u before multiplying by sin x, its vjp
    after."""
    x0 = np.array([0.5, 1.0])
    f = lambda x: x.cos()       # noqa: E731
    f_t = sg.linear_transpose(sg.linearize(f, x0)[1], x0)
    _, vjp_fn = sg.vjp(f, x0)
    u = np.array([1.0, -2.0])
    derived, pulled = f_t.program.format(), pullback_program(vjp_fn, u).format()
    assert derived.splitlines()[1].endswith(" = -u")
    assert pulled.splitlines()[-2].split(" = ")[1].startswith("-")
    assert sg.diff(f_t.program, pullback_program(vjp_fn, u))
    assert close(f_t(u)[0], vjp_fn(u)[0]) and close(f_t(u)[0], -u * np.sin(x0))


def test_readme_section_prints_what_it_shows():
    f = lambda x: (x.sin() * x).sum()       # noqa: E731
    x0 = np.array([0.5, 1.0])
    f_vjp = sg.linear_transpose(sg.linearize(f, x0)[1], x0)
    assert close(f_vjp(1.0)[0], np.sin(x0) + x0 * np.cos(x0))
    body = [line.split(" = ", 1)[1] for line in f_vjp.program.format().splitlines()[1:-1]]
    assert body[0] == "u.expand([2])" and body[-1].count("+") == 1
    assert sorted(b.split(" * ")[1] for b in body[1:-1]) == [
        "[0.4794, 0.8415]", "[0.5000, 1.0000]", "[0.8776, 0.5403]"]


def test_complex_linear_maps_transpose_without_a_conjugate(rng):
    """JAX's convention: the transpose of t -> A t is u -> A^T u (no conjugate), of conj is
    conj; a complex cotangent of a real output is refused."""
    A = rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))
    u = rng.normal(size=2) + 1j * rng.normal(size=2)
    f_t = sg.linear_transpose(lambda t: A @ t, np.zeros(3, complex))
    np.testing.assert_allclose(f_t(u)[0], A.T @ u, rtol=1e-13)
    np.testing.assert_allclose(sg.linear_transpose(np.conj, np.zeros(2, complex))(u)[0],
                               np.conj(u), rtol=1e-13)
    with pytest.raises(sg.DTypeError, match="give real numbers"):
        sg.linear_transpose(lambda t: t * 2.0, np.zeros(2))(u)
