"""The notebook view reads in light and dark themes, and shows its explanations inline.

Oracles: WCAG 2 contrast ratios computed here from the palettes' hex colours (text against
every fill of its own palette), the pictures' fills (the light palette must be them), and the
explained derivation (`op.format_trace(explain=True, raw=False)`), whose comments the inline
notes must be.
"""

from __future__ import annotations

import html
import re

from simplegrad.cli import seed_program
from simplegrad.engine import html as view
from simplegrad.engine.render import LEAF_FILL, ORDER_FILLS


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of a #rrggbb colour."""
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _variables(palette: str) -> dict[str, str]:
    return dict(re.findall(r"--sg-([\w-]+): (#[0-9a-f]{6});", palette))


def test_contrast_is_computed_as_wcag_says():
    assert round(_contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(_contrast("#777777", "#ffffff"), 2) == 4.48


def test_text_reads_on_every_fill_of_both_palettes():
    for palette in (view.LIGHT, view.DARK):
        colours = _variables(palette)
        fills = [v for k, v in colours.items() if k.startswith("o") or k == "leaf"]
        assert len(fills) == len(ORDER_FILLS) + 1
        for fill in fills:
            assert _contrast(colours["text"], fill) >= 7.0, (palette, fill)   # WCAG AAA
            assert _contrast(colours["muted"], fill) >= 3.0, (palette, fill)


def test_the_light_palette_is_the_pictures_fills_and_the_dark_one_differs():
    light, dark = _variables(view.LIGHT), _variables(view.DARK)
    assert [light[f"o{k}"] for k in range(len(ORDER_FILLS))] == list(ORDER_FILLS)
    assert light["leaf"] == LEAF_FILL
    assert all(dark[k] != light[k] for k in light)


def test_every_theme_switch_sets_a_whole_palette_and_no_colour_is_inline():
    page = seed_program(echo=False)[0]._repr_html_()
    style, body = page.split("</style>", 1)
    assert "@media (prefers-color-scheme: dark)" in style
    assert 'body[data-jp-theme-light="false"]' in style and 'data-jp-theme-light="true"' in style
    assert style.count(view.DARK) == 2 and style.count(view.LIGHT) == 2
    assert not re.search(r"#[0-9a-fA-F]{6}", body), "a colour outside the palettes"
    used = set(re.findall(r'class="[^"]*\b(sg-o\d|sg-leaf)\b', body))
    assert {"sg-o0", "sg-o1", "sg-o2", "sg-leaf"} <= used
    for css in used:
        assert f".sg-derivation .{css} {{background: var(--{css})}}" in style


def test_explanations_are_inline_behind_a_toggle_and_are_the_explained_trace():
    op = seed_program(echo=False)[0]
    page = op._repr_html_()
    assert page.count('class="sg-notes"') == 1 and "checked" in page.split('class="sg-notes"')[1]
    assert ".sg-notes:checked ~ details .sg-note {display: inline}" in page
    notes = [html.unescape(n) for n in re.findall(r'<span class="sg-note">([^<]*)</span>', page)]
    pruned = op.format_trace(explain=True, raw=False).splitlines()
    explained = [line.split("    ", 1)[1] for line in pruned if "    # " in line]
    assert notes and set(notes) <= set(explained)
    assert "# accumulation of dL0/db" in notes


def test_a_program_display_has_no_toggle_without_explanations():
    op, a, b = seed_program(echo=False)
    page = op.program([a, b], [a.grad, b.grad])._repr_html_()
    assert 'class="sg-notes"' not in page and "sg-o2" in page
