"""``import simplegrad`` loads only the core: the applications and the rarely used program tools
are imported on first use, under the same public names."""

from __future__ import annotations

import subprocess
import sys

import pytest

import simplegrad as sg

LAZY = ["simplegrad.nn", "simplegrad.optim", "simplegrad.distributed",
        "simplegrad.program.load", "simplegrad.program.compare", "simplegrad.program.symbolic",
        "simplegrad.transforms.sparse", "simplegrad.transforms.odeint"]


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\n"
                          "print(' '.join(m for m in sys.modules if m.startswith('simplegrad')))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_the_import_leaves_the_applications_for_later():
    loaded = _loaded_after("import simplegrad")
    assert "simplegrad.engine.ops" in loaded
    assert not loaded & set(LAZY)


def test_the_first_use_imports_them():
    loaded = _loaded_after("import simplegrad as sg\nsg.nn.Linear\nsg.spy")
    assert {"simplegrad.nn", "simplegrad.nn.layers", "simplegrad.transforms.sparse"} <= loaded


@pytest.mark.parametrize("name", sg.__all__)
def test_every_public_name_resolves_and_is_listed(name):
    assert getattr(sg, name) is not None
    assert name in dir(sg)


def test_the_lazy_names_are_the_modules_own():
    from simplegrad import nn, optim
    from simplegrad.program.load import load_program
    from simplegrad.transforms.sparse import sparse_jacobian
    assert sg.nn is nn and sg.optim is optim
    assert sg.load_program is load_program and sg.sparse_jacobian is sparse_jacobian


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        sg.nothing_here  # noqa: B018
