"""Seed 002's program and its trace: the gradient of a gradient, printed as it is recorded.

L0 = sum((a + b) * b); da, db = dL0/da, dL0/db; L1 = sum(da * da + db * db); then dL1/da and
dL1/db. simplegrad records every step, the gradients included, on one tape, so the trace below
is the whole derivation. The script checks the trace against the seed document's (the same
entries in the same order; the seed lists the dL_dX lines in hash order, so those are compared
as sets) and the final gradients against their closed forms:
dL1/da = 2 (a + 2b) and dL1/db = 2b + 4 (a + 2b).

Run: python examples/seed_trace.py        (--quick is accepted and changes nothing)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import simplegrad as sg

SEED_TRACE = """\
a = [0.4605, 0.4061, 0.9422, 0.3946]
b = [0.0850, 0.3296, 0.9888, 0.6494]
v0 = a + b
v1 = v0 * b
L0 = v1.sum()
dL0 --------------
v3 = v2.expand([4])
v4 = v3 * b
v5 = v3 * v0
v6 = v5 + v4
dL0_dv1 = v3
dL0_dv0 = v4
dL0_dL0 = v2
dL0_da = v4
dL0_db = v6
------------------
v7 = v4 * v4
v8 = v6 * v6
v9 = v7 + v8
L1 = v9.sum()
dL1 --------------
v11 = v10.expand([4])
v12 = v11 * v6
v13 = v11 * v6
v14 = v12 + v13
v15 = v11 * v4
v16 = v11 * v4
v17 = v15 + v16
v18 = v17 + v14
v19 = v14 * v0
v20 = v14 * v3
v21 = v18 * b
v22 = v18 * v3
v23 = v19 + v21
v24 = v23.sum()
v25 = v22 + v20
dL1_dv0 = v20
dL1_dv4 = v18
dL1_dv2 = v24
dL1_dv5 = v14
dL1_dv9 = v11
dL1_dL1 = v10
dL1_db = v25
dL1_dv6 = v14
dL1_dv3 = v23
dL1_da = v20
dL1_dv8 = v11
dL1_dv7 = v11
------------------"""


def blocks(text: str) -> list[tuple[list[str], set[str]]]:
    """The trace cut at its block lines: per block, its entry lines and its dL_dX lines."""
    out: list[tuple[list[str], set[str]]] = [([], set())]
    for line in text.splitlines():
        if line.endswith("-----"):
            out.append(([], set()))
        elif line.startswith("d") and "_d" in line.split(" = ")[0]:
            out[-1][1].add(line)
        else:
            out[-1][0].append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    """Record the seed program, print its trace, and check it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="accepted for the tests")
    parser.parse_args(argv)

    op = sg.Ops()
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.named_var(np.array([0.0850, 0.3296, 0.9888, 0.6494]), "b")
    l0 = op.sum(op.mul(op.add(a, b), b), name="L0")
    da, db = op.grad(l0, [a, b])
    l1 = op.sum(op.add(op.mul(da, da), op.mul(db, db)), name="L1")
    op.grad(l1, [a, b])
    trace = op.format_trace()
    print(trace)
    print(f"da = {a.grad.value}")
    print(f"db = {b.grad.value}")

    av, bv = a.value, b.value
    failures = []
    if blocks(trace) != blocks(SEED_TRACE):
        failures.append("the trace differs from the reference")
    for name, got, want in (("dL1/da", a.grad.value, 2 * (av + 2 * bv)),
                            ("dL1/db", b.grad.value, 2 * bv + 4 * (av + 2 * bv))):
        err = float(np.max(np.abs(got - want)))
        print(f"check {name} against its closed form: max abs error {err:.1e}")
        if err > 1e-12:
            failures.append(f"{name} is off by {err:.3g}")
    print("check the trace against the reference: "
          + ("differs" if "the trace differs from the reference" in failures else "same entries"))
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
