"""The figures the README quotes are the ones benchmarks/readme_figures.py measures, and no
rich output of an example takes text in square brackets for markup."""

from __future__ import annotations

import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _script():
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "benchmarks" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures():
    return _script().figures(quick=True)


def test_hutchpp_figures_are_measured(figures):
    low = float(re.search(r"Hutch\+\+'s variance is about ([\d.e+]+) times lower", README)[1])
    flat = float(re.search(r"its variance is about ([\d.]+) times Hutchinson's", README)[1])
    assert figures["hutchpp_low_rank"] == pytest.approx(low, rel=0.25)
    assert 1 / figures["hutchpp_flat"] == pytest.approx(flat, rel=0.3)
    assert figures["hutchpp_flat"] < 1          # Hutch++ loses on a flat spectrum


def test_checkpoint_figures_are_measured(figures):
    found = re.search(r"drops from about ([\d.]+) MB to ([\d.]+) MB", README)
    assert figures["checkpoint_plain_mb"] == pytest.approx(float(found[1]), abs=0.3)
    assert figures["checkpoint_mb"] == pytest.approx(float(found[2]), abs=0.2)


def test_rich_consoles_print_square_brackets_as_written():
    from rich.console import Console
    for path in [*ROOT.glob("examples/*.py"), ROOT / "simplegrad" / "cli.py",
                 ROOT / "simplegrad" / "engine" / "render.py"]:
        for call in re.findall(r"Console\(([^)]*)\)", path.read_text()):
            assert "markup=False" in call, f"{path.name}: Console({call})"
    out = io.StringIO()
    Console(file=out, markup=False).print("pip install 'simplegrad[examples]'")
    assert "simplegrad[examples]" in out.getvalue()
