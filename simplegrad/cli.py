"""The ``simplegrad`` command: runs the seed program and prints its derivation trace."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from .render import format_value
from .tape import Ops
from .variable import Variable


def seed_program(echo: bool = True) -> tuple[Ops, Variable, Variable]:
    """Run seed 002: L0 = sum((a + b) * b), its gradient, then the gradient of sum(da^2 + db^2)."""
    op = Ops(echo=echo)
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.named_var(np.array([0.0850, 0.3296, 0.9888, 0.6494]), "b")
    l0 = op.sum(op.mul(op.add(a, b), b), name="L0")
    da, db = op.grad(l0, [a, b])
    l1 = op.sum(op.add(op.mul(da, da), op.mul(db, db)), name="L1")
    op.grad(l1, [a, b])
    return op, a, b


def main(argv: Sequence[str] | None = None) -> int:
    """Print the seed program's trace (plain, as recorded, or coloured with --rich)."""
    parser = argparse.ArgumentParser(
        prog="simplegrad",
        description="Run the seed program (grad of grad of sum((a + b) * b)) and print its "
                    "v-numbered trace.")
    parser.add_argument("--rich", action="store_true", help="colour the trace by role")
    args = parser.parse_args(argv)
    op, a, b = seed_program(echo=not args.rich)
    if args.rich:
        op.print_trace()
    print(f"d{a.name} = {format_value(a.grad.value)}")
    print(f"d{b.name} = {format_value(b.grad.value)}")
    return 0
