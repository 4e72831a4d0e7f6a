"""The documentation site as a reader's browser shows it: headless Chromium (through
Playwright) opens the home page, the derivations page and a transform page of the built site,
served over HTTP, takes a screenshot of each and checks that it rendered with no console error,
every picture loaded, the code blocks fit their boxes, and the palette toggle switches to the
dark scheme. Marked slow; skipped cleanly where Playwright or a Chromium is not installed (the
Chromium Playwright downloads, else the system's ``chromium``, as Debian's package installs
it). ``SG_SCREENSHOTS=DIR`` keeps the screenshots there to look at."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["", "derivations/", "transforms/"]
# a system Chromium run headless, alone: no GPU, no network of its own, a fresh profile
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The site built with `mkdocs build --strict`, served on a free local port."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path_factory.mktemp("screens") / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
         str(site)], capture_output=True, text=True, cwd=ROOT, check=False, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium, or a skip naming what is missing."""
    sync_api = pytest.importorskip("playwright.sync_api")
    manager = sync_api.sync_playwright().start()
    system = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        chromium = manager.chromium.launch(headless=True)
        context = chromium.new_context()
    except sync_api.Error as e:
        if system is None:
            manager.stop()
            pytest.skip("no Chromium: neither Playwright's (playwright install chromium) nor "
                        f"a system one ({str(e).splitlines()[0]})")
        chromium = None
        try:
            context = manager.chromium.launch_persistent_context(
                str(tmp_path_factory.mktemp("profile")), executable_path=system,
                headless=True, args=FLAGS)
        except sync_api.Error as e2:
            manager.stop()
            pytest.skip(f"{system} does not start headless ({str(e2).splitlines()[0]})")
    yield context
    context.close()
    if chromium is not None:
        chromium.close()
    manager.stop()


def _keep(shot: Path, name: str) -> None:
    """Copy a screenshot to ``$SG_SCREENSHOTS`` when it is set."""
    where = os.environ.get("SG_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(where) / f"{name}.png")


@pytest.mark.parametrize("page", PAGES, ids=["home", "derivations", "transforms"])
def test_the_page_renders_without_console_errors(browser, served, page, tmp_path):
    tab = browser.new_page()
    tab.set_viewport_size({"width": 1280, "height": 900})
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(served + page, wait_until="networkidle")
    shot = tmp_path / "page.png"
    tab.screenshot(path=str(shot), full_page=True)
    _keep(shot, page.strip("/") or "home")
    assert shot.stat().st_size > 20_000            # a page, not a blank
    assert not errors, errors
    broken = tab.evaluate("Array.from(document.images)"
                          ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)")
    assert not broken, broken
    # code blocks of at most 88 characters scroll nowhere at 1280 px
    cut = tab.evaluate("Array.from(document.querySelectorAll('pre > code'))"
                       ".filter(c => c.scrollWidth > c.clientWidth + 1).length")
    assert cut == 0
    tab.close()


def test_the_palette_toggle_switches_to_dark(browser, served):
    tab = browser.new_page()
    tab.emulate_media(color_scheme="light")
    tab.goto(served, wait_until="networkidle")
    scheme = "document.body.getAttribute('data-md-color-scheme')"
    assert tab.evaluate(scheme) == "default"
    tab.click("label[for='__palette_1']")
    assert tab.evaluate(scheme) == "slate"
    tab.close()
