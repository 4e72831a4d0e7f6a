"""The documentation pages read well at a laptop's width and in a user's words: every line of a
code block fits in 88 characters (so nothing is cut off at 1280 px), and no page names the
project's internal documents ("seed 002", "the seed's program") where it means the demo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(DOCS.glob("*.md"))
WIDTH = 88

# the internal names; "seed" alone stays, as the cotangent a sweep starts from ("the seed of
# ones", `seed=`), which is what autodiff texts call it
JARGON = [r"\bseed 0\d\d\b", r"\bseed's\b", r"\bseed program\b", r"\bseed document\b",
          r"\bthe seed:", r"\bas in the seed\b"]


def code_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, text) of every line inside a fenced code block of the page."""
    inside, found = False, []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside:
            found.append((number, line))
    return found


def test_code_lines_finds_the_lines_of_a_fenced_block(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n```python\nx = 1\n```\nmore\n    ```\n    y\n    ```\n")
    assert code_lines(page) == [(3, "x = 1"), (7, "    y")]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_code_blocks_fit_in_88_characters(page):
    long = [f"{page.name}:{n} ({len(text)})" for n, text in code_lines(page) if len(text) > WIDTH]
    assert not long, f"code lines over {WIDTH} characters: {long}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_pages_use_no_internal_seed_names(page):
    text = page.read_text()
    hits = [m.group(0) for pattern in JARGON for m in re.finditer(pattern, text, flags=re.I)]
    assert not hits, f"{page.name} names internal documents: {hits} (say 'the demo')"


def test_the_jargon_patterns_catch_what_they_are_for():
    said = "seed 003's exercise; the seed's trace; the seed program; seed=ones; the seed of ones"
    hits = [m.group(0) for pattern in JARGON for m in re.finditer(pattern, said, flags=re.I)]
    assert hits == ["seed 003", "seed's", "seed program"]


def paragraphs(page: Path) -> list[list[str]]:
    """The prose paragraphs of a page (code blocks, lists, tables and headings left out)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    found = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip().splitlines()
        if lines and not lines[0].lstrip().startswith(("|", "-", "1.", "#", "<!--", "![")):
            found.append(lines)
    return found


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_paragraphs_are_at_most_ten_lines(page):
    long = [f"{page.name}: {len(p)} lines from {p[0][:50]!r}" for p in paragraphs(page)
            if len(p) > 10]
    assert not long, long
