"""What records instead: one table, for what users reach for that has no rule on Variables.

numpy dispatch (numpy_api.py: a numpy function or ufunc without a rule, a Variable converted
to an array, a library such as scipy.special converting one) and the cast to integers
(shape.py) end their refusals with ``instead(name)``, so every message names the recorded
alternative first.
"""

from __future__ import annotations

# What records instead, for what users reach for that has no rule, in one table: numpy's
# functions and ufunc methods by name, other libraries' functions by their public name (found
# in the calling frames when they convert a Variable with np.asarray, as scipy.special's do),
# and the conversions themselves ("array": a Variable where numpy wants an array; "index": a
# cast to integers or bools). ``.value`` appears only where dropping the dependence is the
# point: an index, a histogram, printing.
NEAREST = {
    "nansum": "np.sum(x, where=~np.isnan(x))",
    "nanmean": "np.sum(x, where=m) / np.sum(m) with m = ~np.isnan(x)",
    "nanmax": "np.max(x, where=~np.isnan(x), initial=-np.inf)",
    "nanmin": "np.min(x, where=~np.isnan(x), initial=np.inf)",
    "nanmedian": "np.median(x[mask]) with a constant mask of the entries kept",
    "nanquantile": "np.quantile(x[mask], q) with a constant mask of the entries kept",
    "nanpercentile": "np.percentile(x[mask], q) with a constant mask of the entries kept",
    "average": "np.sum(x * w, axis) / np.sum(w, axis)",
    "ptp": "np.max(x, axis) - np.min(x, axis)",
    "cumulative_sum": "np.cumsum(x, axis)",
    "cumulative_prod": "np.cumprod(x, axis)",
    "interp": "op.where over the linear pieces, or np.take with recorded indices",
    "unique": "np.unique(x.value) (values only: it has no derivative)",
    "histogram": "np.histogram(x.value) (values only: it has no derivative)",
    "searchsorted": "np.searchsorted(a, x.value) (integer positions: no derivative)",
    "rot90": "np.flip and np.swapaxes (op.flip, op.swapaxes)",
    "fliplr": "np.flip(x, axis=1)",
    "flipud": "np.flip(x, axis=0)",
    "eig": "np.linalg.eigh for symmetric matrices",
    "add.reduce": "np.sum(x, axis)",
    "multiply.reduce": "np.prod(x, axis)",
    "maximum.reduce": "np.max(x, axis)",
    "minimum.reduce": "np.min(x, axis)",
    "logaddexp.reduce": "x.logsumexp(axis=) or sg.logsumexp(x, axis=)",
    "add.accumulate": "np.cumsum(x, axis)",
    "multiply.accumulate": "np.cumprod(x, axis)",
    "scipy.special.logsumexp": "sg.logsumexp(a, axis=, b=, keepdims=) (scipy's signature) or "
                               "a.logsumexp(axis=)",
    "scipy.special.softmax": "x.softmax(axis=)",
    "scipy.special.log_softmax": "x.log_softmax(axis=)",
    "scipy.special.expit": "x.sigmoid()",
    "array": "np.stack([...]) to build an array of Variables (np.concatenate, np.where), "
             "x.at[i].set(v) to write one into another",
    "index": "x.argmax(), x.argsort(), or np.floor(x.value).astype(int) for an index "
             "(indices come from values: floor has zero gradient, so taking it from x.value "
             "loses nothing); to differentiate, cast to float16, float32 or float64",
}


def instead(name: str) -> str:
    """The tail of a refusal of ``name``: what records instead, from NEAREST, or where to look."""
    hint = NEAREST.get(name)
    if hint is not None:
        return f"; what records instead: {hint}"
    return ("; see \"numpy functions that record\" (docs/numpy.md) for what records, or write "
            "it with op.<primitive> methods (x.value is the plain value, no gradient through it)")
