"""examples/derivations.ipynb runs in a real kernel (the [notebook] extra: nbclient, nbformat,
ipykernel; skipped without them), and its HTML outputs hold every entry and every link lands.
"""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "derivations.ipynb"
ROOT = str(NOTEBOOK.parents[1])


class _Anchors(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a":
            self.hrefs.append(attrs["href"])


@pytest.fixture(scope="module")
def executed():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": ROOT}})
    client.execute(env={**os.environ, "PYTHONPATH": path})   # this checkout's simplegrad
    return nb


def _outputs(nb, kind: str) -> list[str]:
    return ["".join(o["data"][kind]) if isinstance(o["data"][kind], list) else o["data"][kind]
            for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
            if "data" in o and kind in o["data"]]


def test_the_notebook_runs_without_errors(executed):
    errors = [o for cell in executed.cells if cell.cell_type == "code"
              for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors


def test_every_html_output_holds_its_entries_and_links_land(executed):
    pages = _outputs(executed, "text/html")
    assert len(pages) == 3              # the seed, the trace of grad(loss), a program
    ids_seen: set[str] = set()
    for page in pages:
        found = _Anchors(page)
        assert found.hrefs, "no links"
        assert all(h.startswith("#") and h[1:] in found.ids for h in found.hrefs)
        assert not found.ids & ids_seen     # displays never share an id
        ids_seen |= found.ids
    seed = pages[0]
    for name in ["a", "b", "v0", "v1", "L0", "v6", "v7", "v8", "v9", "L1", "v14", "v17",
                 "v18", "v25"]:     # the pruned seed derivation, line by line
        assert f'-{name}"' in seed, name
    assert seed.count("<details") == 3 and "order 2" in seed
    text = "".join(_outputs(executed, "text/plain")) + "".join(
        "".join(o.get("text", "")) for c in executed.cells if c.cell_type == "code"
        for o in c.get("outputs", []) if o.get("output_type") == "stream")
    assert "same outputs: True" in text and "accumulation of dL/dx" in text


def test_the_saved_notebook_opens_with_its_outputs(executed):
    saved = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in saved.cells if cell.cell_type == "code"]
    assert code and all(cell.get("outputs") and cell.get("execution_count") for cell in code), \
        "save it executed: python benchmarks/readme_figures.py --notebook"
    assert not [o for cell in code for o in cell.outputs if o.get("output_type") == "error"]
    # the same kinds of output as a fresh run, cell by cell (ids and values may differ; the
    # pictures need Graphviz where the notebook runs; a cell's prints may arrive as one stream
    # output or several, as the kernel flushes them)
    def kinds(cells):
        out = []
        for cell in cells:
            seen = [sorted(set(o.get("data", {"stream": 1})) - {"image/svg+xml"})
                    for o in cell.outputs]
            out.append([k for i, k in enumerate(seen)
                        if not (k == ["stream"] and i and seen[i - 1] == k)])
        return out
    assert kinds(code) == kinds(c for c in executed.cells if c.cell_type == "code")
