"""Expressions of the ``simplegrad trace`` command, read with ``ast`` against a whitelist.

``parse`` checks the whole tree before anything runs: the names given by ``--var``, numbers,
``+ - * / ** @``, unary minus, indexing a value with literal indices, and calls of simplegrad
primitives by name with literal keyword arguments. ``Evaluator`` walks the checked tree calling
the primitives of an Ops; nothing reaches ``eval`` or ``exec``.

Numbers are Python's: arithmetic on constants alone is done exactly in Python (``2**64`` is
18446744073709551616, never an int64 that wrapped), and a constant that meets a variable must
be a float64 exactly (an int that is not: ``UsageError``, exit 2) and finite (``1e999``:
``MathError``, exit 1), named as written. A primitive that fails (a ``MemoryError`` included)
is reported with its name and its arguments as a ``MathError``.
"""

from __future__ import annotations

import ast
import inspect
import io
import math
import operator
import tokenize
from collections.abc import Callable
from typing import Any

from .engine.ops import Ops
from .engine.variable import Variable
from .errors import SimplegradError
from .primitives.core import REGISTRY


class UsageError(Exception):
    """An expression or command line that cannot run (the command's exit code 2)."""


class MathError(ArithmeticError):
    """An expression whose value cannot be computed or is not finite (exit code 1)."""


FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow}
MAX_BITS = 1100         # an int constant with more bits than this is beyond float64

OPERATORS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
             ast.MatMult: "matmul"}
REFUSED = {ast.Attribute: "attribute access (such as a.__class__)", ast.Lambda: "a lambda",
           ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
           ast.DictComp: "a comprehension", ast.GeneratorExp: "a comprehension",
           ast.NamedExpr: "an assignment", ast.Compare: "a comparison (call greater(a, b))",
           ast.BoolOp: "and/or", ast.IfExp: "a conditional expression",
           ast.Starred: "unpacking (*args)", ast.Await: "await", ast.JoinedStr: "an f-string"}


def parse(expr: str, names: set[str]) -> ast.Expression:
    """EXPR as a checked syntax tree: anything outside the whitelist is a UsageError."""
    _check_tokens(expr)
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise UsageError(f"cannot parse the expression {expr!r}: {e}") from None
    nodes = list(ast.walk(tree))
    for node in nodes:          # the refused kinds first, for the clearest message
        if type(node) in REFUSED:
            raise UsageError(f"{REFUSED[type(node)]} is not allowed in an expression")
    for node in nodes:
        _check(node, names)
    return tree


def _check_tokens(expr: str) -> None:
    """Refuse, before Python's parser warns about them on stderr, a number run into a name
    (``8or``) and a backslash in a string."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expr).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return              # the parser says what is wrong
    for a, b in zip(tokens, tokens[1:]):
        if a.type == tokenize.NUMBER and b.type == tokenize.NAME and a.end == b.start:
            raise UsageError(f"cannot parse the expression {expr!r}: the number {a.string} "
                             f"runs into {b.string!r}")
        if a.type == tokenize.STRING and "\\" in a.string:
            raise UsageError(f"the string {a.string} is not allowed (no backslashes)")


def _check(node: ast.AST, names: set[str]) -> None:
    kind = type(node)
    if kind is ast.Name:
        if node.id.startswith("__"):
            raise UsageError(f"the name {node.id} is refused (dunder names are not allowed)")
        if node.id not in names and node.id not in REGISTRY:
            raise UsageError(f"unknown name {node.id!r}: give it with --var {node.id}=...")
    elif kind is ast.Call:
        f = node.func
        if not isinstance(f, ast.Name) or f.id not in REGISTRY or not hasattr(Ops, f.id):
            what = f.id if isinstance(f, ast.Name) else ast.unparse(f)
            raise UsageError(f"{what}(...) is refused: only simplegrad primitives can be "
                             f"called (exp, tanh, sum, matmul, where, ...: the {len(REGISTRY)} "
                             "names of sg.REGISTRY)")
        for k in node.keywords:
            if k.arg is None or k.arg.startswith("__") or k.arg == "name":
                raise UsageError(f"the keyword argument {k.arg or '**'} is not allowed")
            _literal(k.value, f"{f.id}'s keyword {k.arg}")
    elif kind is ast.Subscript:
        _literal(node.slice, "an index")
    elif kind is ast.Constant:
        if type(node.value) not in (int, float):
            raise UsageError(f"the constant {node.value!r} is not a number")
    elif kind is ast.BinOp and type(node.op) not in OPERATORS:
        raise UsageError(f"the operator {type(node.op).__name__} is not allowed (use + - * / "
                         "** @)")
    elif kind is ast.UnaryOp and type(node.op) not in (ast.USub, ast.UAdd):
        raise UsageError(f"the operator {type(node.op).__name__} is not allowed")
    elif kind not in (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load, ast.keyword, ast.Slice,
                      ast.Tuple, *OPERATORS, ast.USub, ast.UAdd):
        raise UsageError(f"{kind.__name__} is not allowed in an expression")


def _literal(node: ast.AST, what: str) -> Any:
    """The value of a literal (numbers, None, True/False, tuples, slices, ...)."""
    if isinstance(node, ast.Slice):
        return slice(*[None if p is None else _literal(p, what)
                       for p in (node.lower, node.upper, node.step)])
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e, what) for e in node.elts)
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return Ellipsis
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        raise UsageError(f"{what} must be a literal, got {ast.unparse(node)!r}") from None
    return tuple(value) if isinstance(value, list) else value


class Evaluator:
    """Evaluates a checked tree by calling the Ops' primitives."""

    def __init__(self, op: Ops, env: dict[str, Variable], source: str | None = None):
        self.op = op
        self.env = env
        self.source = source        # the expression's text, to name constants as written

    def text(self, node: ast.AST) -> str:
        """A node as written in the expression."""
        found = None if self.source is None else ast.get_source_segment(self.source, node)
        return found if found is not None else ast.unparse(node)

    def eval(self, node: ast.AST) -> Any:
        """The value of a node (a Variable or a number)."""
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise UsageError(f"{node.id} is a primitive: call it, as in {node.id}(a)")
            return self.env[node.id]
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            folded = self.fold(node)
            if folded is not None:
                return folded
        return self.step(node)(None)

    def fold(self, node: ast.AST) -> int | float | None:
        """A constant sub-expression's value, computed exactly in Python; None when it
        involves a variable."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp):
            x = self.fold(node.operand)
            return None if x is None else -x if isinstance(node.op, ast.USub) else x
        if not isinstance(node, ast.BinOp) or type(node.op) not in FOLD:
            return None
        x, y = self.fold(node.left), self.fold(node.right)
        if x is None or y is None:
            return None
        text = self.text(node)
        if type(node.op) is ast.Pow and type(x) is int and type(y) is int and y > 0 and \
                abs(x) > 1 and (abs(x).bit_length() - 1) * y > MAX_BITS:
            raise UsageError(f"the constant {text} is beyond the range of float64")
        try:
            value = FOLD[type(node.op)](x, y)
        except ZeroDivisionError:
            raise MathError(f"the constant {text} divides by zero") from None
        except OverflowError:
            raise MathError(f"the constant {text} is not finite (it overflows float64)") from None
        if type(value) is complex:
            raise MathError(f"the constant {text} is not a real number")
        return value

    def operand(self, node: ast.AST) -> Any:
        """An operand of a primitive: a Variable, or a number checked to be a finite float64."""
        value = self.eval(node)
        if isinstance(value, Variable):
            return value
        return checked_constant(value, self.text(node))

    def step(self, node: ast.AST) -> Callable[[str | None], Any]:
        """The node's last operation as a function of the name of its result; its inputs are
        evaluated (and recorded) now."""
        op = self.op
        try:
            if isinstance(node, ast.BinOp):
                x, y = self.operand(node.left), self.operand(node.right)
                fname = OPERATORS[type(node.op)]
                method = getattr(op, fname)
                return lambda name: _run(fname, method, [x, y], {}, name)
            if isinstance(node, ast.UnaryOp):
                x = self.operand(node.operand)
                if isinstance(node.op, ast.UAdd):
                    return lambda name: x
                return lambda name: _run("neg", op.neg, [x], {}, name) \
                    if isinstance(x, Variable) else -x
            if isinstance(node, ast.Subscript):
                x, index = self.eval(node.value), _literal(node.slice, "an index")
                if not isinstance(x, Variable):
                    raise UsageError("only a value computed from the variables can be indexed")
                return lambda name: _run("getitem", op.getitem, [x, index], {}, name)
            if isinstance(node, ast.Call):
                fname = node.func.id
                args = [_literal(a, "a tuple argument") if isinstance(a, ast.Tuple) else
                        self.operand(a) for a in node.args]
                kwargs = {k.arg: _keyword(fname, k) for k in node.keywords}
                method = getattr(op, fname)
                return lambda name: _call(method, fname, args, kwargs, name)
        except RecursionError:
            raise UsageError("the expression nests too deeply") from None
        raise UsageError(f"{type(node).__name__} is not allowed in an expression")


def checked_constant(value: Any, text: str) -> Any:
    """A number that meets a variable: an int exactly a float64 (else UsageError; as that
    float beyond int64) or a finite float (else MathError)."""
    if type(value) is int:
        try:
            exact = float(value) == value
        except OverflowError:
            exact = False
        if not exact:
            raise UsageError(f"the constant {text} is not exactly a float64 (values are "
                             "float64); write it as a float")
        if not -2**63 <= value < 2**63:     # beyond int64, numpy would wrap it: its float
            return float(value)
    elif type(value) is float and not math.isfinite(value):
        raise MathError(f"the constant {text} is not finite ({value})")
    return value


def _keyword(fname: str, k: ast.keyword) -> Any:
    """A keyword argument's literal; ints beyond int64 and non-finite floats refused."""
    value = _literal(k.value, f"{fname}'s keyword {k.arg}")
    for v in value if isinstance(value, tuple) else (value,):
        if type(v) is int and not -2**63 <= v < 2**63:
            raise UsageError(f"{fname}(...): the keyword {k.arg}={ast.unparse(k.value)} is out "
                             "of range (beyond int64)")
        if type(v) is float and not math.isfinite(v):
            raise MathError(f"{fname}(...): the keyword {k.arg}={ast.unparse(k.value)} is not "
                            "finite")
    return value


def _describe(fname: str, method: Callable, args: list, kwargs: dict) -> str:
    """The call as ``fname(param=value, ...)``: Variables by name and shape."""
    def show(v: Any) -> str:
        return f"{v.name} with shape {v.shape}" if isinstance(v, Variable) else repr(v)[:60]
    try:
        bound = inspect.signature(method).bind(*args, **kwargs).arguments
        parts = [f"{k}={show(v)}" for k, v in bound.items()]
    except TypeError:
        parts = [show(v) for v in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
    return f"{fname}({', '.join(parts)})"


def _run(fname: str, method: Callable, args: list, kwargs: dict, name: str | None) -> Any:
    """Call a primitive; a failure that is not simplegrad's own error becomes a MathError
    naming the primitive and its arguments (a MemoryError too)."""
    try:
        return method(*args, **kwargs, name=name)
    except (UsageError, MathError, SimplegradError):
        raise
    except MemoryError as e:
        raise MathError(f"{_describe(fname, method, args, kwargs)}: not enough memory for the "
                        f"result ({str(e)[:120] or 'MemoryError'})") from None
    except Exception as e:      # numpy's and Python's, whatever their type
        raise MathError(f"{_describe(fname, method, args, kwargs)}: {type(e).__name__}: "
                        f"{str(e)[:200]}") from None


def _call(method: Callable, fname: str, args: list, kwargs: dict, name: str | None) -> Any:
    params = [p for p in inspect.signature(method).parameters.values() if p.name != "name"]
    most = len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
    if len(args) > most and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise UsageError(f"{fname}(...) takes at most {most} argument(s), got {len(args)}")
    try:
        inspect.signature(method).bind(*args, **kwargs, name=name)
    except TypeError as e:      # a missing argument, an unknown keyword
        raise UsageError(f"{fname}(...): {e}") from None
    return _run(fname, method, args, kwargs, name)
