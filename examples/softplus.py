"""A numerically stable softplus as a custom operation, against the naive composition.

softplus(x) = log(1 + exp(x)). Written naively, exp(800) overflows to inf: the value
becomes inf and the gradient (1 / (1 + exp(x))) * exp(x) = 0 * inf = nan. The custom
operation computes max(x, 0) + log(1 + exp(-|x|)), which never overflows, and states
its gradient directly as g * sigmoid(x) (1.0 at x = 800). The rule is written with
simplegrad operations, so it is recorded and can be differentiated again.

Run: python examples/softplus.py
"""

import numpy as np

import simplegrad as sg


@sg.custom_vjp
def softplus(x):
    """log(1 + exp(x)) without overflow."""
    return x.relu() + ((-x.abs()).exp() + 1).log()


@softplus.defvjp
def softplus_bwd(g, out, x):
    """d softplus / dx = sigmoid(x)."""
    return g * x.sigmoid()


def naive_softplus(x):
    """log(1 + exp(x)) as written: exp overflows for x above about 709."""
    return (x.exp() + 1).log()


def fmt(a: np.ndarray) -> str:
    """Four fixed decimals, as the trace prints values."""
    return np.array2string(a, precision=4, separator=", ", floatmode="fixed", suppress_small=True)


def show(label: str, f, points: list[float]) -> None:
    """Print value, first and second derivative of ``f`` at ``points``."""
    op = sg.Ops()
    x = op.var(points, name="x")
    with np.errstate(over="ignore", invalid="ignore"):
        y = f(x)
        dx = op.grad(y.sum(), x)
        d2x = op.grad(dx.sum(), x)
    print(f"{label:>7}  value  {fmt(y.value)}")
    print(f"{'':>7}  d/dx   {fmt(dx.value)}")
    print(f"{'':>7}  d2/dx2 {fmt(d2x.value)}")


def main() -> None:
    """Compare the two at ordinary and at overflowing inputs, then print the custom trace."""
    points = [-3.0, 0.0, 3.0, 800.0]
    print(f"x = {points}")
    show("naive", naive_softplus, points)
    show("custom", softplus, points)
    #   naive  value  [0.0486, 0.6931, 3.0486,    inf]
    #          d/dx   [0.0474, 0.5000, 0.9526,    nan]
    #          d2/dx2 [0.0452, 0.2500, 0.0452,    nan]
    #  custom  value  [  0.0486,   0.6931,   3.0486, 800.0000]
    #          d/dx   [0.0474, 0.5000, 0.9526, 1.0000]
    #          d2/dx2 [0.0452, 0.2500, 0.0452, 0.0000]

    op = sg.Ops()
    x = op.named_var([800.0], "x")
    L = op.sum(softplus(x), name="L")
    op.grad(L, x)
    print("\ntrace of the custom operation (one forward entry, its rule in the grad block):")
    print(op.format_trace())
    # x = [800.0000]
    # v0 = softplus(x)
    # L = v0.sum()
    # dL --------------
    # v2 = v1.expand([1])
    # v3 = x.sigmoid()
    # v4 = v2 * v3
    # dL_dL = v1
    # dL_dv0 = v2
    # dL_dx = v4
    # ------------------


if __name__ == "__main__":
    main()
