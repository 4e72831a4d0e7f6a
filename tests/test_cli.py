"""The demo command prints exactly the seed program's lines (grad-map lines as sets)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from simplegrad.cli import main
from tests.test_trace import SEED_OUTPUT, comparable


def test_main_prints_the_seed_output(capsys: pytest.CaptureFixture) -> None:
    assert main([]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert comparable(printed) == comparable(SEED_OUTPUT.splitlines())


def test_rich_mode_prints_the_same_lines(capsys: pytest.CaptureFixture) -> None:
    assert main(["--rich"]) == 0
    printed = capsys.readouterr().out.splitlines()
    # the trace, then a table of the blocks by derivative order, then the gradients
    table = printed.index(next(line for line in printed if "derivative blocks" in line))
    trace = printed[:table] + printed[-2:]
    assert comparable(trace) == comparable(SEED_OUTPUT.splitlines())
    assert any("dL1" in line and " 2 " in line for line in printed[table:])


def test_python_dash_m_runs_the_demo() -> None:
    done = subprocess.run([sys.executable, "-m", "simplegrad"], capture_output=True, text=True,
                          check=True)
    assert comparable(done.stdout.splitlines()) == comparable(SEED_OUTPUT.splitlines())
