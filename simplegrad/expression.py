"""Expressions of the ``simplegrad trace`` command, read with ``ast`` against a whitelist.

``parse`` checks the whole tree before anything runs: the names given by ``--var``, numbers,
``+ - * / ** @``, unary minus, indexing a value with literal indices, and calls of simplegrad
primitives by name with literal keyword arguments. ``Evaluator`` walks the checked tree calling
the primitives of an Ops; nothing reaches ``eval`` or ``exec``.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

from .engine.ops import Ops
from .engine.variable import Variable
from .primitives.core import REGISTRY


class UsageError(Exception):
    """An expression or command line that cannot run (the command's exit code 2)."""


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

    def __init__(self, op: Ops, env: dict[str, Variable]):
        self.op = op
        self.env = env

    def eval(self, node: ast.AST) -> Any:
        """The value of a node (a Variable or a number)."""
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise UsageError(f"{node.id} is a primitive: call it, as in {node.id}(a)")
            return self.env[node.id]
        if isinstance(node, ast.Constant):
            return node.value
        return self.step(node)(None)

    def step(self, node: ast.AST) -> Callable[[str | None], Any]:
        """The node's last operation as a function of the name of its result; its inputs are
        evaluated (and recorded) now."""
        op = self.op
        try:
            if isinstance(node, ast.BinOp):
                x, y = self.eval(node.left), self.eval(node.right)
                method = getattr(op, OPERATORS[type(node.op)])
                return lambda name: method(x, y, name=name)
            if isinstance(node, ast.UnaryOp):
                x = self.eval(node.operand)
                if isinstance(node.op, ast.UAdd):
                    return lambda name: x
                return lambda name: op.neg(x, name=name) if isinstance(x, Variable) else -x
            if isinstance(node, ast.Subscript):
                x, index = self.eval(node.value), _literal(node.slice, "an index")
                if not isinstance(x, Variable):
                    raise UsageError("only a value computed from the variables can be indexed")
                return lambda name: op.getitem(x, index, name=name)
            if isinstance(node, ast.Call):
                args = [_literal(a, "a tuple argument") if isinstance(a, ast.Tuple) else
                        self.eval(a) for a in node.args]
                kwargs = {k.arg: _literal(k.value, "a keyword") for k in node.keywords}
                method = getattr(op, node.func.id)
                return lambda name: _call(method, node.func.id, args, kwargs, name)
        except RecursionError:
            raise UsageError("the expression nests too deeply") from None
        raise UsageError(f"{type(node).__name__} is not allowed in an expression")


def _call(method: Callable, fname: str, args: list, kwargs: dict, name: str | None) -> Any:
    params = [p for p in inspect.signature(method).parameters.values() if p.name != "name"]
    most = len([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
    if len(args) > most and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise UsageError(f"{fname}(...) takes at most {most} argument(s), got {len(args)}")
    try:
        inspect.signature(method).bind(*args, **kwargs, name=name)
    except TypeError as e:      # a missing argument, an unknown keyword
        raise UsageError(f"{fname}(...): {e}") from None
    return method(*args, **kwargs, name=name)
