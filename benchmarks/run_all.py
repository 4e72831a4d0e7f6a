"""Run every benchmark and write the table of same-run ratios that benchmarks/README.md shows.

Each peer benchmark (hessian, nth_derivative, mlp, hvp, taylor, batching, conv, habits,
jacobian_modes, jacobian_rev, fused, memory, chain_length, import_time, sparse_hessian,
laplacian, large_arrays, numba_first_call, scalar_chain) runs in its own
process in ``timing.MEASURING_ENV`` (BLAS on one thread, glibc's malloc thresholds fixed) and
appends its headline ratios to a JSON-lines file; overhead.py,
higher_order.py and swell.py run too (their checks must pass) and overhead's simplegrad /
PyTorch ratios (recorded, and the compiled gradient program per op) join the table. The table
goes to benchmarks/results.md and replaces the part of benchmarks/README.md between its
``results`` markers; the full output of every script goes to benchmarks/results.txt.
Run: python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from timing import MEASURING_ENV

HERE = Path(__file__).resolve().parent
PEERS = ("hessian", "nth_derivative", "mlp", "hvp", "taylor", "batching", "conv", "habits",
         "jit_cost", "jacobian_modes", "jacobian_rev", "fused", "memory", "chain_length",
         "import_time", "sparse_hessian", "laplacian", "large_arrays", "numba_first_call",
         "scalar_chain")
COLUMNS = ("simplegrad", "numpy (by hand)", "torch eager", "torch.func", "autograd", "JAX jit",
           "JAX eager")
BEGIN, END = "<!-- results: begin -->", "<!-- results: end -->"
ENV = {**os.environ, **MEASURING_ENV}


def run(script: str, args: list[str], log: list[str]) -> str:
    """Run one script, keep its output for results.txt; exit if it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / f"{script}.py"), *args], env=ENV,
                          capture_output=True, text=True, cwd=HERE)
    seconds = time.perf_counter() - t0
    log.append(f"$ python benchmarks/{script}.py {' '.join(args)}   ({seconds:.1f} s)\n"
               f"{proc.stdout}{proc.stderr}")
    print(f"{script:16s} {seconds:6.1f} s  exit {proc.returncode}", flush=True)
    if proc.returncode != 0:
        print(proc.stdout + proc.stderr)
        sys.exit(f"run_all: {script}.py failed")
    return proc.stdout


def versions() -> str:
    """The libraries this run measured."""
    import numpy
    parts = [f"Python {platform.python_version()}", f"numpy {numpy.__version__}"]
    for name, label in (("torch", "PyTorch"), ("autograd", "HIPS autograd"), ("jax", "JAX")):
        with contextlib.suppress(metadata.PackageNotFoundError):
            parts.append(f"{label} {metadata.version(name)}")
    malloc = ("glibc malloc defaults" if "MALLOC_MMAP_THRESHOLD_" not in MEASURING_ENV
              else "glibc malloc thresholds fixed")
    return ", ".join(parts) + f"; {os.cpu_count()} cores, BLAS on one thread, {malloc}"


def _cell(ratio: float) -> str:
    """Two decimals, or one significant digit below 0.1 (0.003, not 0.00)."""
    return f"{ratio:.2f}" if ratio >= 0.095 else f"{ratio:.1g}"


def table(rows: list[dict]) -> str:
    """The markdown table: one row per workload, each cell a ratio to that row's unit."""
    head = "| workload | unit | target | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (3 + len(COLUMNS))]
    for r in rows:
        cells = [_cell(r["cols"][c]) if c in r["cols"] else "" for c in COLUMNS]
        lines.append(f"| {r['workload']} | {r['unit']} | {r['target']} | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats: under 3 minutes")
    args = parser.parse_args()
    quick = ["--quick"] if args.quick else []
    log: list[str] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = Path(tmp) / "rows.jsonl"
        for script in PEERS:
            run(script, [*quick, "--json", str(rows_file)], log)
        rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    out = run("overhead", ["--repeat", "7" if args.quick else "15"], log)
    found = dict(re.findall(r"simplegrad / torch, create_graph=(\w+): ([\d.]+)", out))
    for mode in ("False", "True"):
        if mode in found:
            rows.append({"workload": f"chain of 1000 elementwise ops, fwd+bwd, "
                                     f"create_graph={mode}", "unit": "torch eager",
                         "target": "simplegrad <= " + ("0.7" if mode == "False" else "1.0"),
                         "cols": {"simplegrad": float(found[mode]), "torch eager": 1.0}})
    found = re.search(r"sg.compile gradient program / torch eager fwd\+bwd, per op: ([\d.]+)",
                      out)
    if found:
        rows.append({"workload": "  its gradient program through sg.compile (fwd+bwd), per op",
                     "unit": "torch eager (create_graph=False)", "target": "simplegrad <= 0.35",
                     "cols": {"simplegrad": float(found.group(1)), "torch eager": 1.0}})
    run("higher_order", ["--repeat", "5" if args.quick else "15"], log)
    run("swell", quick, log)
    total = time.perf_counter() - t0
    text = table(rows)
    stamp = (f"Measured by `python benchmarks/run_all.py{' --quick' if args.quick else ''}` "
             f"in {total:.0f} s on {time.strftime('%Y-%m-%d', time.gmtime())}: {versions()}.")
    (HERE / "results.md").write_text(f"{stamp}\n\n{text}\n")
    (HERE / "results.txt").write_text("\n".join(log))
    readme = HERE / "README.md"
    if readme.exists():
        body = readme.read_text()
        if BEGIN in body and END in body:
            head, rest = body.split(BEGIN, 1)
            readme.write_text(f"{head}{BEGIN}\n{stamp}\n\n{text}\n{END}{rest.split(END, 1)[1]}")
    print(f"\n{stamp}\n\n{text}")


if __name__ == "__main__":
    main()
