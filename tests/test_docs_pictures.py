"""The docs' pictures of programs are drawn from the programs the pages describe: every picture
of docs/step-by-step.md and of the transform pages is one `benchmarks/readme_figures.py
--pictures` draws, and each drawn box holds a line of that program as it prints (the raw
recorded form or the derivation), so a picture cannot drift from its page's code."""

from __future__ import annotations

import html
import importlib.util
import re
from pathlib import Path

import pytest

import simplegrad as sg

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _script():
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "benchmarks" / "readme_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIGURES = _script()


def drawn_lines(svg: Path) -> list[str]:
    """The `name = expression` lines a picture's boxes show."""
    texts = [html.unescape(t).replace("\xa0", " ")      # (Graphviz keeps runs of spaces so)
             for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg.read_text())]
    return [t for t in texts if re.match(r"^\w+ = ", t)]


def pictures_of(page: str) -> set[str]:
    """The .svg files a page shows."""
    return set(re.findall(r"!\[[^\]]*\]\(([\w.-]+\.svg)\)", (DOCS / page).read_text()))


def test_every_page_picture_is_one_the_script_draws():
    drawn = set(FIGURES.STEP_PICTURES) | set(FIGURES.PAGE_PICTURES)
    shown = set().union(*(pictures_of(p) for p in ("step-by-step.md", "transforms.md",
                                                  "forward-taylor.md", "vmap.md", "custom.md",
                                                  "loops.md")))
    assert shown == drawn
    for name in drawn:
        assert (DOCS / name).is_file(), name


def test_each_transform_page_and_architecture_shows_a_picture():
    for page in ("transforms.md", "forward-taylor.md", "vmap.md", "custom.md",
                 "architecture.md", "step-by-step.md"):
        assert pictures_of(page), page
    assert len(pictures_of("step-by-step.md")) == 5


def _programs() -> dict:
    programs = dict(FIGURES.step_programs())
    programs.update({name: make() for name, make in FIGURES.PAGE_PICTURES.items()})
    return programs


@pytest.mark.parametrize("name", sorted(set(FIGURES.STEP_PICTURES) | set(FIGURES.PAGE_PICTURES)))
def test_each_picture_draws_its_program(name):
    prog = _programs()[name]
    if isinstance(prog, sg.Ops):        # a derivation's picture: its printed lines
        printed = set(prog.format_trace(raw=False).splitlines())
    else:
        printed = set(prog.format(raw=True).splitlines()) | set(prog.format().splitlines())
    boxes = drawn_lines(DOCS / name)
    if isinstance(prog, sg.Ops):        # (an input's ellipse adds its shape and dtype)
        boxes = [re.sub(r"\s+\[[\d, ]*\] \w+$", "", b) for b in boxes]
    assert boxes, f"{name} draws no entries"
    stale = [b for b in boxes if b not in printed]
    assert not stale, f"{name} is out of date (redraw with readme_figures.py --pictures): {stale}"


def test_a_picture_of_another_program_is_caught():
    prog = FIGURES.step_programs()["step_forward.svg"]
    printed = set(prog.format(raw=True).splitlines()) | set(prog.format().splitlines())
    assert [b for b in drawn_lines(DOCS / "transforms_grad.svg") if b not in printed]
