"""The ``simplegrad`` command: the seed demo, and ``simplegrad trace EXPR`` for any expression.

``simplegrad`` (or ``simplegrad demo``) replays the seed program with its trace.
``simplegrad trace EXPR --var a=... --wrt a --order N`` differentiates EXPR N times, as the
seed does: order 1 differentiates ``L0 = EXPR`` (summed when it is not a scalar), order k + 1
differentiates ``L_k``, the sum of the squares of the order-k gradients; it prints the
derivation pruned to the ``--wrt`` asked (``--raw``: the whole tape), then the gradients of the
last order. ``--derivative N`` asks for the N-th derivative instead (order k + 1 differentiates
the sum of the order-k gradients: d^N EXPR/da^N for a scalar a), ``--hessian`` for the
Hessian.

EXPR is read with ``ast`` and checked against a whitelist before anything runs (see
``simplegrad.expression``); nothing reaches ``eval`` or ``exec``.

Exit codes: 0 done, 2 a usage error (bad option, refused expression, an int constant that is
not exactly a float64), 1 a math error (shapes, domains, a value or constant that is not
finite, not enough memory: the message names the entry, constant or primitive and its
arguments); errors go to stderr, without a traceback, whatever their kind. A closed pipe
(``| head``) ends quietly.
"""

from __future__ import annotations

import argparse
import ast
import keyword
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from .engine.ops import Ops
from .engine.render import format_value
from .engine.variable import Variable
from .errors import SimplegradError
from .expression import Evaluator, MathError, UsageError, parse
from .primitives.core import REGISTRY

MAX_ORDER = 16      # --order and --derivative: the work nearly doubles with each order


def seed_program(echo: bool = True, ops: Ops | None = None) -> tuple[Ops, Variable, Variable]:
    """Run seed 002: L0 = sum((a + b) * b), its gradient, then the gradient of sum(da^2 + db^2).

    It records on ``ops`` when given (echo then follows that Ops' own setting).
    """
    op = Ops(echo=echo) if ops is None else ops
    a = op.named_var(np.array([0.4605, 0.4061, 0.9422, 0.3946]), "a")
    b = op.named_var(np.array([0.0850, 0.3296, 0.9888, 0.6494]), "b")
    l0 = op.sum(op.mul(op.add(a, b), b), name="L0")
    da, db = op.grad(l0, [a, b])
    l1 = op.sum(op.add(op.mul(da, da), op.mul(db, db)), name="L1")
    op.grad(l1, [a, b])
    return op, a, b


# ---------------------------------------------------------------- the command line

EPILOG = """examples:
  simplegrad                      the seed program's trace (same as: simplegrad demo)
  simplegrad --rich               the same, coloured by derivative order
  simplegrad trace "sum((a + b) * b)" --var a=0.4605,0.4061,0.9422,0.3946 \\
      --var b=0.0850,0.3296,0.9888,0.6494 --wrt a,b --order 2
  simplegrad trace "tanh(x) * x" --var x=0.5 --order 3 --simplify
  simplegrad trace "sin(x) * exp(x)" --var x=0.5 --derivative 4
  simplegrad trace "sum(a ** 3)" --var a=1,2 --hessian

exit codes: 0 done, 2 a usage error (a bad option or a refused expression),
1 a math error (shapes that do not fit, a value that is not finite)
"""

TRACE_HELP = """Differentiate EXPR and print its derivation, pruned to the --wrt asked
(--raw: the whole recorded tape), then the derivatives. L0 = EXPR (summed when
EXPR is not a scalar).

--derivative N: the N-th derivative. Order 1 differentiates L0; order k + 1
differentiates L_k = the sum over --wrt of sum(g) of the order-k gradients g.
For one scalar variable a this is d^N EXPR / da^N; for a vector a and an
elementwise EXPR it is the N-th derivative of each entry.
--hessian: the Hessian of L0 in the --wrt variables (one block per pair) and
its program.
--order N (the seed's program): order k + 1 differentiates L_k = the sum over
--wrt of sum(g * g) of the order-k gradients g.

EXPR may use: the names given by --var, numbers, + - * / ** @, unary minus,
indexing a value with literal indices (a[0], a[1:3]), and calls of simplegrad
primitives by name (exp, tanh, sum, maximum, where, matmul, ...) with literal
keyword arguments (sum(a, axis=0)). Anything else is refused."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simplegrad", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Reverse-mode autodiff whose gradients are recorded programs.",
        epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", metavar="{demo,trace}")
    demo = sub.add_parser("demo", help="the seed program: grad of grad of sum((a + b) * b) "
                          "(the default)", description="Run the seed program and print its "
                          "v-numbered trace, then the order-2 gradients.")
    demo.add_argument("--rich", action="store_true", help="colour the trace by derivative order")
    trace = sub.add_parser("trace", help="differentiate an expression and print its trace",
                           description=TRACE_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    trace.add_argument("expr", metavar="EXPR", help='the expression, e.g. "sum((a + b) * b)"')
    trace.add_argument("--var", action="append", default=[], metavar="NAME=VALUES",
                       help="a variable: a=0.5 (a scalar), a=1,2,3 (a vector), "
                            "a='1,2;3,4' (rows of a matrix); repeat for each")
    trace.add_argument("--wrt", metavar="A,B", help="differentiate in these variables "
                       "(default: all of them)")
    what = trace.add_mutually_exclusive_group()
    what.add_argument("--order", type=int, default=None, metavar="N",
                      help="the seed's iterated order: gradients of the sum of squares of the "
                           f"previous order's (default 1, at most {MAX_ORDER})")
    what.add_argument("--derivative", type=int, default=None, metavar="N",
                      help="the N-th derivative (several --wrt: the gradient of the sum of "
                           f"the previous order's gradients; N at most {MAX_ORDER})")
    what.add_argument("--hessian", action="store_true",
                      help="the Hessian of L0 in the --wrt variables, and its program")
    trace.add_argument("--raw", action="store_true",
                       help="print the whole recorded tape, not the derivation pruned to --wrt")
    trace.add_argument("--simplify", action="store_true",
                       help="print the last gradients' program simplified (sg.simplify) "
                            "instead of the whole trace")
    trace.add_argument("--explain", action="store_true",
                       help="say what each gradient entry differentiates")
    look = trace.add_mutually_exclusive_group()
    look.add_argument("--plain", action="store_true", help="plain text (the default)")
    look.add_argument("--rich", action="store_true", help="colour the trace by order")
    trace.add_argument("--dot", metavar="FILE", help="write the last gradients' program as "
                       "Graphviz DOT")
    trace.add_argument("--svg", metavar="FILE", help="draw it to an SVG file (needs Graphviz)")
    trace.add_argument("--save", metavar="FILE", help="save it (FILE.json and FILE.npz)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 done, 2 usage error, 1 math error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("demo", "trace", "-h", "--help"):
        args.insert(0, "demo")
    try:
        try:
            ns = _parser().parse_args(args)
        except SystemExit as e:     # --help (0) or argparse's usage message (2)
            return int(e.code or 0)
        if ns.command == "trace":
            return _trace(ns)
        return _demo(ns.rich)
    except BrokenPipeError:         # the reader went away (| head): stop quietly
        _silence_stdout()
        return 0
    except SystemExit:              # rich's console, when the pipe closes, silences stdout
        return 0                    # and exits (1); nothing failed
    except UsageError as e:
        print(f"simplegrad: error: {e}", file=sys.stderr)
        return 2
    except (SimplegradError, ArithmeticError, ValueError, OSError) as e:
        print(f"simplegrad: error: {_text(e)}", file=sys.stderr)
        return 1
    except MemoryError as e:
        print(f"simplegrad: error: not enough memory ({_text(e) or 'MemoryError'})",
              file=sys.stderr)
        return 1
    except RecursionError:
        print("simplegrad: error: the expression nests too deeply", file=sys.stderr)
        return 2
    except Exception as e:      # anything else: still a message, never a traceback
        print(f"simplegrad: error: {type(e).__name__}: {_text(e)}", file=sys.stderr)
        return 1


def _text(e: BaseException) -> str:
    """The error's message and the entry a sweep noted on it (``in the gradient of ...``)."""
    notes = [n.removeprefix("simplegrad: ") for n in getattr(e, "__notes__", ())
             if isinstance(n, str)]
    return "; ".join([str(e), *notes]) if notes and str(e) else str(e) or "; ".join(notes)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):     # no real file descriptor (a captured stream)
        pass


def _demo(rich: bool) -> int:
    op, a, b = seed_program(echo=not rich)
    if rich:
        op.print_trace(raw=True)        # the seed's own trace, coloured
    print(f"d{a.name} = {format_value(a.grad.value)}")
    print(f"d{b.name} = {format_value(b.grad.value)}")
    return 0


# ---------------------------------------------------------------- trace


def _trace(ns: argparse.Namespace) -> int:
    variables = dict(_variable(spec) for spec in ns.var)
    if not variables:
        raise UsageError("trace needs at least one --var NAME=VALUES")
    wrt = list(variables) if ns.wrt is None else [w.strip() for w in ns.wrt.split(",")]
    for w in wrt:
        if w not in variables:
            raise UsageError(f"--wrt names {w!r}, which is not a --var "
                             f"(there are {', '.join(variables)})")
    if len(set(wrt)) != len(wrt):
        raise UsageError(f"--wrt names a variable twice: {ns.wrt}")
    for flag in ("order", "derivative"):
        n = getattr(ns, flag)
        if n is not None and n < 1:
            raise UsageError(f"--{flag} must be at least 1, got {n}")
        if n is not None and n > MAX_ORDER:
            raise UsageError(f"--{flag} must be at most {MAX_ORDER}, got {n} (each order "
                             "differentiates the whole derivation before it)")
    tree = parse(ns.expr, set(variables))
    op = Ops()
    env = {name: op.named_var(value, name) for name, value in variables.items()}
    xs = [env[w] for w in wrt]
    with np.errstate(all="ignore"):     # a nan is reported below, where it first appears
        if ns.hessian:
            note, l0, grads, labels = _hessian(op, tree, env, wrt, ns.expr)
        else:
            note, l0 = _loss(op, tree, env, ns.expr)
            grads, labels = _derivatives(op, l0, xs, ns, set(variables))
    prog = op.program(xs, list(grads))
    if ns.simplify:
        from .program.simplify import simplify
        prog = simplify(prog)
    _show(op, prog, ns, note)
    for label, g in zip(labels, grads):
        print(f"{label} = {format_value(g.value)}")
    if ns.dot:
        with open(ns.dot, "w", encoding="utf-8") as f:
            f.write(prog.to_dot(raw=ns.raw))
    if ns.svg:
        prog.render(ns.svg, raw=ns.raw)
    if ns.save:
        prog.save(ns.save)
    for v in [l0, *grads]:
        found = op.find_nonfinite(v)
        if found is not None or not np.isfinite(v.value).all():
            where = found if found is not None else "it comes from a constant"
            print(f"simplegrad: error: {v.name} is not finite; {where}", file=sys.stderr)
            return 1
    return 0


def _variable(spec: str) -> tuple[str, np.ndarray]:
    name, sep, text = spec.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
        raise UsageError(f"--var {spec!r}: expected NAME=VALUES with NAME an identifier, "
                         "e.g. --var a=0.5,1.5")
    if name in REGISTRY:
        raise UsageError(f"--var {name}: the name of a primitive cannot be a variable")
    try:
        rows = [[float(t) for t in row.split(",")] for row in text.split(";")]
        value = np.array(rows[0] if len(rows) == 1 else rows, dtype=np.float64)
    except ValueError:
        raise UsageError(f"--var {spec!r}: VALUES must be numbers separated by commas (rows "
                         "of a matrix by semicolons, all of one length)") from None
    if not np.isfinite(value).all():
        raise MathError(f"--var {name}: a value that is not finite ({text.strip()})")
    return name, value[0] if value.shape == (1,) and "," not in text else value


def _derivatives(op: Ops, loss: Variable, xs: list[Variable], ns: argparse.Namespace,
                 taken: set[str]) -> tuple[list[Variable], list[str]]:
    """The gradients of --order N (the seed's) or --derivative N, the last order named."""
    n = ns.derivative or ns.order or 1
    prefix = "d" if n == 1 or ns.derivative is None else f"d{n}"
    labels = [f"{prefix}{x.name}" for x in xs]
    names = None if taken & set(labels) else labels     # never shadow a --var
    for k in range(1, n + 1):
        grads = op.grad(loss, xs, name=names if k == n else None)
        if k < n:
            loss = _sum_of_squares(op, grads, f"L{k}") if ns.derivative is None else \
                _sum_all(op, grads, f"L{k}")
    return grads, labels


def _hessian(op: Ops, tree: ast.Expression, env: dict, wrt: list[str], expr: str | None = None
             ) -> tuple[str | None, Variable, list[Variable], list[str]]:
    """The note on L0, L0, and the blocks of the Hessian of L0 in the --wrt variables (with
    their labels: ``H``, or ``H[a, b]`` per pair, as the pruned trace names their entries),
    recorded on ``op``."""
    from .transforms.jacobians import hessian
    found: list = []

    def f(*xs: Variable) -> Variable:
        found[:] = _loss(op, tree, {**env, **dict(zip(wrt, xs))}, expr)
        return found[1]

    blocks = hessian(f, tuple(range(len(wrt))))(*[env[w] for w in wrt])
    if len(wrt) == 1:
        return (*found, [op.reshape(blocks[0][0], blocks[0][0].shape, name="H")], ["H"])
    out = [blocks[i][j] for i in range(len(wrt)) for j in range(len(wrt))]
    return (*found, out, [f"H[{a}, {b}]" for a in wrt for b in wrt])


def _show(op: Ops, prog: Any, ns: argparse.Namespace, note: str | None) -> None:
    text = prog.format() if ns.simplify else None
    if ns.rich:
        from rich.console import Console
        console = Console(markup=False)
        if note:
            console.print(note, style="dim", markup=False)
        if text is not None:
            console.print(text, markup=False, highlight=False)
        else:
            op.print_trace(console, explain=ns.explain, raw=ns.raw)
        return
    if note:
        print(note)
    print(text if text is not None else op.format_trace(explain=ns.explain, raw=ns.raw))


def _loss(op: Ops, tree: ast.Expression, env: dict, expr: str | None = None
          ) -> tuple[str | None, Variable]:
    """L0: the expression (text ``expr``), recorded under that name when it is a scalar, else
    its sum."""
    top = tree.body
    if isinstance(top, (ast.Name, ast.Constant)):
        value = Evaluator(op, env, expr).eval(top)
        named = None
    else:
        run = Evaluator(op, env, expr).step(top)     # the last operation, its inputs evaluated
        with op.no_grad():
            probe = run(None)
        named = run("L0") if np.shape(getattr(probe, "raw", probe)) == () else None
        value = named if named is not None else run(None)
    if not isinstance(value, Variable):
        raise UsageError("the expression does not depend on any --var")
    if named is not None:
        return None, named
    note = None if value.shape == () else \
        f"# the expression has shape {value.shape}: L0 is its sum"
    return note, op.sum(value, name="L0")


def _sum_all(op: Ops, grads: Sequence[Variable], name: str) -> Variable:
    """sum(g1) + sum(g2) + ...: what the next order of --derivative differentiates."""
    if len(grads) == 1:
        return op.sum(grads[0], name=name)
    total = op.sum(grads[0])
    for g in grads[1:-1]:
        total = op.add(total, op.sum(g))
    return op.add(total, op.sum(grads[-1]), name=name)


def _sum_of_squares(op: Ops, grads: Sequence[Variable], name: str) -> Variable:
    """sum(g1 * g1 + g2 * g2 ...) as the seed writes it (a sum per gradient when shapes differ)."""
    squares = [op.mul(g, g) for g in grads]
    if len({g.shape for g in grads}) == 1:
        total = squares[0]
        for s in squares[1:]:
            total = op.add(total, s)
        return op.sum(total, name=name)
    sums = [op.sum(s) for s in squares]
    total = sums[0]
    for s in sums[1:-1]:
        total = op.add(total, s)
    return op.add(total, sums[-1], name=name)
