"""The documentation site: `mkdocs build --strict` builds every page of mkdocs.yml's nav with
its pictures, and headless Chromium renders the built home page with the picture drawn (each
skipped cleanly where MkDocs or Chromium is not installed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_derivations_browser import _png_pixels, figures

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = ROOT / "mkdocs.yml"


def nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order."""
    nav = MKDOCS.read_text().split("\nnav:\n", 1)[1]
    return re.findall(r"^\s*- (?:.*: )?(\S+\.md)\s*$", nav, flags=re.M)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once with `mkdocs build --strict` into a scratch directory."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    out = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--config-file",
         str(MKDOCS), "--site-dir", str(out)], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.mark.slow
def test_the_site_builds_strict_with_every_page_and_picture(site):
    for page in nav_pages():
        built = site / ("index.html" if page == "index.md" else page[:-3] + "/index.html")
        assert built.is_file(), page
    for page, picture in [("index.html", "demo_derivation.svg"),
                          ("graphs/index.html", "demo_program.svg"),
                          ("graphs/index.html", "demo_derivation.svg"),
                          ("derivations/index.html", "notebook_view.png")]:
        prefix = "" if page == "index.html" else "../"
        assert f'src="{prefix}{picture}"' in (site / page).read_text(), (page, picture)
        assert (site / picture).is_file()


@pytest.mark.slow
def test_chromium_renders_the_home_page_with_its_picture(site, tmp_path):
    browser = figures.browser()
    if browser is None:
        pytest.skip("Chromium is not installed")
    png = tmp_path / "home.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path}/profile", "--window-size=1000,1300",
                    f"--screenshot={png}", (site / "index.html").as_uri()],
                   capture_output=True, timeout=120, check=True)
    width, height, pixels = _png_pixels(png.read_bytes())
    assert (width, height) == (1000, 1300)
    # the picture's fills (inputs, order 1, order 2: the SVG's own colours) and the theme's
    # indigo header, whose exact shade differs between versions of the theme
    assert {(0xd2, 0xf3, 0xf7), (0xd5, 0xf2, 0xd5), (0xd6, 0xe2, 0xfb)} <= pixels
    assert any(r < 0x50 and 0x40 < g < 0x60 and b > 0xa0 for r, g, b in pixels)
