"""The exceptions simplegrad raises, each a subclass of the builtin a caller would expect, and
the warnings it gives.

Every error is raised before anything is recorded, so a failed call leaves the
tape exactly as it was. A warning is given by ``warn``: on every occurrence, with a stable
message and attributed to the caller's line, so Python's warning filters decide repeats (the
default shows it once per line).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np


class SimplegradError(Exception):
    """Base class of every error raised by simplegrad."""


class ShapeError(SimplegradError, ValueError):
    """Shapes that do not broadcast, multiply or match what an operation needs."""


class LinAlgError(SimplegradError, ValueError):
    """A matrix the operation cannot take: singular, not positive definite, and the like."""


class AxisError(ShapeError, np.exceptions.AxisError):
    """An axis out of range for the array it names.

    Also numpy's ``AxisError`` (itself both a ValueError and an IndexError), so code written
    for numpy catches it where it caught numpy's.
    """


class GraphError(SimplegradError, ValueError):
    """Misuse of the tape: variables of another Ops, or a gradient asked of the wrong thing."""


class DTypeError(SimplegradError, TypeError):
    """A value whose dtype simplegrad cannot differentiate (object, strings), or a complex value
    given to a primitive that takes only real ones (floor, arctan2, comparisons)."""


class ArgumentError(SimplegradError, TypeError):
    """An argument of the wrong kind, such as a number where a Variable is needed."""


class OutOfBoundsError(SimplegradError, IndexError):
    """An index outside the variable it reads."""


class NotDifferentiableError(SimplegradError, TypeError):
    """A derivative was asked of a rule that cannot give it (for example, a raw-numpy backward)."""


class GradientCheckError(SimplegradError, AssertionError):
    """A derivative disagrees with finite differences beyond the stated tolerances."""


class MaterializeError(SimplegradError, RuntimeError):
    """A primitive would pull a lazy array (a dask array) into memory to compute; pass
    ``materialize=True`` to allow it."""


class TapeGrowthWarning(UserWarning):
    """An Ops reused across training steps keeps every step's entries and arrays alive."""


class DisconnectedWarning(UserWarning):
    """A derivative is zero because the output does not depend on what is differentiated."""


class ConversionWarning(UserWarning):
    """``float(v)`` or ``int(v)`` of a Variable with a gradient history: the number is a
    constant, so nothing computed from it is differentiated through ``v``."""


class FormatError(SimplegradError, ValueError):
    """A saved program that cannot be read: malformed, truncated, too large or inconsistent."""


class ReplayError(SimplegradError, ValueError):
    """A recorded program replayed at inputs where a Python decision it was recorded through
    (``if v > 0:``, ``int(v)``) goes the other way: its answer would be the recorded branch's."""


class MissingToolError(SimplegradError, RuntimeError):
    """An optional outside program (Graphviz's ``dot``) is not installed or failed."""


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the innermost caller outside simplegrad."""
    frame, level = sys._getframe(0), 1
    while frame is not None and (frame.f_globals.get("__name__", "") + ".").startswith(
            "simplegrad."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
