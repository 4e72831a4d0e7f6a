"""``import simplegrad`` in a fresh process, against ``import numpy`` (its floor) and HIPS
autograd, measured in the same run.

Each module is imported in a new interpreter under ``-X importtime`` (its own cumulative
figure, the interpreter's start left out), the runs interleaved, the minimum of each kept
(the machine's noise only adds). Bytecode is written on the first run, as a user's install
has it. Target: <= 150 ms, printed beside the ratio to numpy's time in the same run.
Run: python benchmarks/import_time.py [--quick]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import util

import peers


def import_seconds(module: str) -> float:
    """Seconds ``import module`` takes in a new interpreter, by its own -X importtime line."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                          env=env, capture_output=True, text=True, check=True)
    top = [line for line in proc.stderr.splitlines()
           if re.match(rf"import time:\s+\d+ \|\s+\d+ \| {re.escape(module)}$", line)]
    return int(top[-1].split("|")[1]) * 1e-6


def main() -> None:
    p = peers.parser(__doc__)
    args = p.parse_args()
    rounds = peers.repeats(args, 7, 15)
    modules = ["numpy", "simplegrad"] + (["autograd"] if util.find_spec("autograd") else [])
    for m in modules:
        import_seconds(m)           # bytecode written, caches warm
    best = {m: import_seconds(m) for m in modules}
    for _ in range(rounds - 1):
        for m in modules:
            best[m] = min(best[m], import_seconds(m))
    base = best["numpy"]
    print(f"{'import':12s} {'ms':>8s} {'x numpy':>8s}")
    for m, t in best.items():
        print(f"{m:12s} {t * 1e3:8.1f} {t / base:8.2f}")
    sg_ms = best["simplegrad"] * 1e3
    print(f"import simplegrad: {sg_ms:.0f} ms (target <= 150), {best['simplegrad'] / base:.2f}x "
          "import numpy; autograd: " +
          (f"{best['autograd'] * 1e3:.0f} ms" if "autograd" in best else "n/a"))
    peers.emit(args, [{"workload": "import simplegrad (fresh process)", "unit": "import numpy",
                       "target": "simplegrad <= 150 ms",
                       "cols": {"simplegrad": best["simplegrad"] / base,
                                **({"autograd": best["autograd"] / base}
                                   if "autograd" in best else {})}}])


if __name__ == "__main__":
    main()
