"""Part of a tape as data: ``Program`` (extract, replay), simplify, compile, save and load,
graph export, and Jacobian accumulation."""

from ..primitives.rewrites import (
    COMMUTATIVE,
    Operand,
    constant_key,
    cse_key,
    describe_variable,
    operand_key,
    reduces_to,
    rewrite,
)
from .core import Builder, Program, extract
from .nodes import CONST, INPUT, NODE, Constant, Input, Node, Ref, ref_of, refs_of

__all__ = ["Ref", "Input", "Constant", "Node", "Program", "extract", "Builder", "ref_of", "refs_of",
           "CONST", "INPUT", "NODE",
           "COMMUTATIVE", "Operand", "constant_key", "cse_key", "describe_variable",
           "operand_key", "reduces_to", "rewrite"]
