"""The figures the docs quote, regenerated: run this after a change that could move them.

1. Hutch++ against Hutchinson (docs/checks.md, "Trace estimators"): the variance of each
   estimator of tr(A) over many seeded trials, on the docs' matrix (100 x 100, rank 5 plus
   0.01 I, 30 matrix-vector products) and on a flat spectrum (eigenvalues spread evenly in
   [1, 2]), where Hutch++ loses: its sketch finds no dominant directions and leaves a third of
   the budget for the residual.
2. Checkpointing (docs/custom.md, "Checkpointing"): the traced peak memory of the forward and a
   value-only backward of a 64-step tanh chain (4000 entries wide, 3 entries per step) without
   and with 8 checkpointed blocks.
3. The forward_vs_reverse table (docs/examples.md) comes from
   ``python examples/forward_vs_reverse.py``; its timings move with the machine.
4. ``--pictures`` (needs Graphviz): the docs' pictures, docs/demo_program.svg (the demo's
   grad-of-grad program) and docs/demo_derivation.svg (the same, simplified); the pictures
   of docs/step-by-step.md (the programs its code blocks end each step with) and one picture
   for each transform page (``PAGE_PICTURES``); with Chromium installed,
   docs/notebook_view.png, the demo's derivation as a notebook shows it, rendered by
   headless Chromium.

5. ``--notebook`` (needs the ``[notebook]`` extra): examples/derivations.ipynb executed in a
   fresh kernel and saved with its outputs, as a reader first opens it.

Every figure is printed as the docs word it. ``--quick`` uses fewer trials (the tests).

Run: python benchmarks/readme_figures.py [--quick] [--pictures]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

import simplegrad as sg


def variance_ratio(A: np.ndarray, samples: int, trials: int, seed: int = 0) -> float:
    """Var(Hutchinson) / Var(Hutch++) of tr(A) estimates, each from ``samples`` products."""
    rng = np.random.default_rng(seed)
    n = A.shape[0]
    h = [sg.hutchinson_trace(lambda v: A @ v, n, samples=samples, rng=rng)
         for _ in range(trials)]
    hpp = [sg.hutchpp_trace(lambda v: A @ v, n, samples=samples, rng=rng)
           for _ in range(trials)]
    return float(np.var(h, ddof=1) / np.var(hpp, ddof=1))


def low_rank_matrix() -> np.ndarray:
    """The docs' matrix: U U^T + 0.01 I with U 100 x 5 (seed 0)."""
    U = np.random.default_rng(0).normal(size=(100, 5))
    return U @ U.T + 0.01 * np.eye(100)


def flat_matrix(n: int = 100) -> np.ndarray:
    """A symmetric matrix whose eigenvalues are spread evenly over [1, 2] (seed 0)."""
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(n, n)))
    return (Q * np.linspace(1.0, 2.0, n)) @ Q.T


def _chain(x, steps: int):
    for _ in range(steps):
        x = (x * 0.9 + 0.1).tanh()
    return x


def checkpoint_peaks(blocks: int = 8, per_block: int = 8, size: int = 4000) -> tuple:
    """Traced peak bytes of the forward and value-only backward, plain and checkpointed."""
    peaks = []
    for checkpointed in (False, True):
        step = (sg.checkpoint(lambda x: _chain(x, per_block)) if checkpointed
                else (lambda x: _chain(x, per_block)))
        tracemalloc.start()
        try:
            op = sg.Ops()
            x = op.var(np.linspace(-1.0, 1.0, size))
            y = x
            for _ in range(blocks):
                y = step(y)
            op.grad(y.sum(), x, create_graph=False)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    return tuple(peaks)


def figures(quick: bool = False) -> dict[str, float]:
    """The docs' figures: variance ratios and checkpoint peaks (MB)."""
    trials = 400 if quick else 4000
    plain, ckpt = checkpoint_peaks()
    return {"hutchpp_low_rank": variance_ratio(low_rank_matrix(), 30, trials),
            "hutchpp_flat": variance_ratio(flat_matrix(), 30, trials),
            "checkpoint_plain_mb": plain / 1e6, "checkpoint_mb": ckpt / 1e6}


DOCS = Path(__file__).resolve().parents[1] / "docs"


def pictures(folder: Path = DOCS) -> list[Path]:
    """Draw the docs' pictures of the seed's grad-of-grad program (needs Graphviz)."""
    from simplegrad.cli import seed_program
    op, a, b = seed_program(echo=False)
    grad2 = op.program([a, b], [a.grad, b.grad])
    drawn = [grad2.render(folder / "demo_program.svg", raw=True),
             grad2.render(folder / "demo_derivation.svg"),
             data_model(folder / "data_model.svg")]
    drawn += [prog.render(folder / name) for name, prog in step_programs().items()]
    drawn += [make().render(folder / name) for name, make in PAGE_PICTURES.items()]
    if browser() is not None:
        drawn.append(screenshot(op._repr_html_(), folder / "notebook_view.png", 760, 410))
    return drawn


# ---------------------------------------------------------------- the pages' pictures

STEP_PICTURES = {"step_forward.svg": "forward", "step_gradient.svg": "gradient",
                 "step_second_forward.svg": "second_forward", "step_grad2.svg": "grad2",
                 "step_derivation.svg": "derivation"}


def step_programs() -> dict[str, sg.Program]:
    """Picture file -> the program docs/step-by-step.md ends that step with (its code blocks
    run in order, as the tests run them)."""
    import contextlib
    import io
    import re
    text = (DOCS / "step-by-step.md").read_text()
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            exec(compile(block, "step-by-step.md", "exec"), namespace)  # noqa: S102
    return {name: namespace[var] for name, var in STEP_PICTURES.items()}


def grad_picture() -> sg.Program:
    """sg.grad of sum(sin(x^2)), recorded on the caller's tape (docs/transforms.md)."""
    op = sg.Ops()
    x = op.var(np.array([1.0, 2.0]), name="x")
    return op.program([x], [sg.grad(lambda x: (x * x).sin().sum())(x)])


def hessian_picture() -> sg.Ops:
    """sg.hessian of x^2 y + y^3 in two scalars, as its derivation prints it
    (docs/transforms.md)."""
    return sg.trace(sg.hessian(lambda x, y: x**2 * y + y**3, (0, 1)), 0.5, 2.0)


def jvp_picture() -> sg.Program:
    """sg.jvp of tanh(x) x: the value and its tangent (docs/forward-taylor.md)."""
    op = sg.Ops()
    x, t = op.var(0.5, name="x"), op.var(1.0, name="t")
    return op.program([x, t], list(sg.jvp(lambda x: x.tanh() * x, (x,), (t,))))


def vmap_picture() -> sg.Program:
    """Per-example gradients of tanh(w . x) in w, by sg.vmap(sg.grad) (docs/vmap.md)."""
    op = sg.Ops()
    w, X = op.var(np.full(3, 0.5), name="w"), op.var(np.arange(6.0).reshape(2, 3), name="X")
    per = sg.vmap(sg.grad(lambda w, x: (w * x).sum().tanh()), in_axes=(None, 0))(w, X)
    return op.program([w, X], [per])


def custom_picture() -> sg.Program:
    """The gradient of softplus(x) x with softplus's custom rule (docs/custom.md)."""
    @sg.custom_vjp
    def softplus(x):
        return x.relu() + ((-x.abs()).exp() + 1).log()

    softplus.defvjp(lambda g, out, x: g * x.sigmoid())
    op = sg.Ops()
    x = op.var(0.3, name="x")
    return op.program([x], [sg.grad(lambda x: softplus(x) * x)(x)])


def loop_picture() -> sg.Program:
    """A fori_loop of squarings (x -> x^8) and its gradient, each loop one box holding its
    body (docs/loops.md)."""
    def square(i, c):
        return c * c

    op = sg.Ops()
    x = op.var(1.1, name="x")
    y = sg.fori_loop(0, 3, square, x)
    dy = op.grad(y, x, name="dy")
    return op.program([x], [y, dy])


PAGE_PICTURES = {"transforms_grad.svg": grad_picture, "transforms_hessian.svg": hessian_picture,
                 "forward_jvp.svg": jvp_picture, "vmap_grad.svg": vmap_picture,
                 "custom_softplus.svg": custom_picture, "loop_program.svg": loop_picture}


def data_model_dot() -> str:
    """DOT text of the data model, drawn from a live recording of ``tanh(x @ W).sum()``: the
    Ops and its tape, the entries (plain records: primitive, input entries, shape, the values
    their rules read), the Variables the user holds (handles: value, entry, Ops), and two
    primitive records with the facts they carry."""
    op = sg.Ops()
    x, W = op.var(np.ones((2, 3)), name="x"), op.var(np.ones((3, 2)), name="W")
    z = x @ W
    h = z.tanh()
    L = h.sum()
    handles = {"x": x, "W": W, "h": h, "L": L}     # z is dropped: its value goes with it
    del z
    lines = ['digraph data_model {', 'rankdir=TB; node [fontname="Helvetica", fontsize=10];',
             'edge [fontname="Helvetica", fontsize=9];',
             'subgraph cluster_ops { label="Ops  (op = sg.Ops())"; style=rounded; '
             'color="#888888";',
             'tape [shape=box, style="rounded,filled", fillcolor="#f2f2f2", '
             'label="Tape\nentries, events, v-counter"];']
    entries = [x.node, W.node, *op.tape]
    for e in entries:
        what = "leaf" if e.prim is None else e.prim.name
        kept = "keeps its value" if e.raw is not None else "value freed (no rule reads it)"
        fill = "#d2f3f7" if e.prim is None else "#ffffff"
        lines.append(f'e{id(e)} [shape=record, style=filled, fillcolor="{fill}", '
                     f'label="{{Entry {e.name}|{what}|shape {tuple(e.shape)}|{kept}}}"];')
    lines.append("}")
    for e in op.tape:
        lines.append(f"tape -> e{id(e)} [style=dotted, arrowhead=none];")
        for i, a in enumerate(e.inputs):
            if isinstance(a, sg.Entry):
                lines.append(f'e{id(e)} -> e{id(a)} [label="input {i}"];')
    for name, v in handles.items():
        lines.append(f'v_{name} [shape=box, style="rounded,filled", fillcolor="#fff2cc", '
                     f'label="Variable {name}\n(the user\'s handle)\nvalue, entry, Ops"];')
        lines.append(f'v_{name} -> e{id(v.node)} [color="#b58900", label="entry"];')
    lines.append('v_L -> tape [color="#b58900", style=dashed, label="Ops"];')
    for prim in (sg.REGISTRY["matmul"], sg.REGISTRY["tanh"]):
        linear = "none" if prim.linear is None else prim.linear.kind
        rules = ", ".join(r for r, f in (("vjp", prim.vjp), ("jvp", prim.jvp),
                                          ("batch", prim.batch), ("Taylor", prim.taylor))
                          if f is not None and f != ())
        lines.append(f'p_{prim.name} [shape=record, style=filled, fillcolor="#e6d6fb", '
                     f'label="{{Primitive {prim.name}|rules: {rules}|saves {prim.saves}|'
                     f'linear: {linear}|shape rule, print, numpy, SymPy forms}}"];')
    for e in op.tape:
        if e.prim.name in ("matmul", "tanh"):
            lines.append(f"e{id(e)} -> p_{e.prim.name} [style=dashed, label=\"prim\"];")
    lines.append("}")
    return "\n".join(lines)


def data_model(path: Path) -> Path:
    """Render ``data_model_dot`` to an SVG with Graphviz's ``dot``."""
    subprocess.run(["dot", "-Tsvg", "-o", str(path)], input=data_model_dot(), text=True,
                   check=True, timeout=60)
    return Path(path)


def run_notebook(path: Path = DOCS.parent / "examples" / "derivations.ipynb") -> Path:
    """Execute a notebook in a fresh kernel (this checkout's simplegrad) and save it with its
    outputs."""
    import os

    import nbclient
    import nbformat
    root = str(path.resolve().parents[1])
    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": root}}).execute(env=env)
    nbformat.write(nb, path)
    return path


def browser() -> str | None:
    """A Chromium (or Chrome) executable on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html: str, path: Path, width: int = 900, height: int = 1100) -> Path:
    """Render an HTML fragment (a notebook display) to a PNG with headless Chromium."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head>"
                        f"<body style='background:white'>{html}</body></html>")
        subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={tmp}/profile",
                        f"--window-size={width},{height}", f"--screenshot={path}",
                        page.as_uri()], capture_output=True, timeout=120, check=True)
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    """Print every figure as the docs quote it (and draw the pictures when asked)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer trials, for the tests")
    parser.add_argument("--pictures", action="store_true", help="redraw docs/*.svg")
    parser.add_argument("--notebook", action="store_true",
                        help="execute examples/derivations.ipynb and save its outputs")
    args = parser.parse_args(argv)
    if args.notebook:
        print(f"executed {run_notebook()}")
    if args.pictures:
        for path in pictures():
            print(f"drew {path}")
    f = figures(args.quick)
    print(f"Hutch++'s variance is about {f['hutchpp_low_rank']:.3g} times lower than "
          "Hutchinson's (100x100 rank-5-plus-noise matrix, 30 products)")
    print(f"on a flat spectrum (eigenvalues evenly in [1, 2]) Hutch++ loses: its variance is "
          f"about {1 / f['hutchpp_flat']:.2g} times Hutchinson's")
    print(f"checkpoint: the peak traced memory of the backward drops from about "
          f"{f['checkpoint_plain_mb']:.1f} MB to {f['checkpoint_mb']:.1f} MB")
    print("forward_vs_reverse table: python examples/forward_vs_reverse.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
