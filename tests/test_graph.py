"""Programs and tapes as networkx graphs, their statistics, DOT text and pictures.

Oracles: the program's own counts (nodes = inputs + constants + entries, one edge per distinct
(argument, entry) pair), the seed program's structure counted by hand, and DOT read back by
networkx's pydot reader when pydot is installed (else a line-by-line structural check).
"""

from __future__ import annotations

import re
import shutil

import networkx as nx
import numpy as np
import pytest

import simplegrad as sg
from simplegrad.cli import seed_program


@pytest.fixture
def seed():
    op, a, b = seed_program(echo=False)
    return op, a, b, op.program([a, b], [a.grad, b.grad])


def test_program_graph_counts_and_attributes(seed):
    _, _, _, prog = seed
    g = prog.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert g.number_of_nodes() == len(prog.inputs) + len(prog.constants) + len(prog) == 20
    pairs = {(r, i) for i, n in enumerate(prog.nodes) for r in n.args}
    assert g.number_of_edges() == len(pairs) == 30
    assert nx.is_directed_acyclic_graph(g)
    v0 = g.nodes["v0"]
    assert (v0["primitive"], v0["role"], v0["order"], v0["shape"]) == ("add", "forward", 0, (4,))
    assert v0["label"] == "v0 = a + b"
    assert g.nodes["a"]["role"] == "input" and g.nodes["v2"]["role"] == "constant"   # a seed
    assert g.nodes["v3"]["role"] == "gradient"          # the seed spread over a's shape
    assert g.nodes["v4"]["role"] == "gradient" and g.nodes["v4"]["order"] == 1
    assert g.nodes["v25"]["order"] == 2 and g.nodes["v25"]["output"]
    assert g.edges["a", "v0"]["position"] == 0 and g.edges["b", "v0"]["position"] == 1
    assert g.graph["outputs"] == ["v20", "v25"]
    roles = {r: sum(1 for _, d in g.nodes(data="role") if d == r)
             for r in ("input", "constant", "forward", "gradient")}
    assert roles == {"input": 2, "constant": 2, "forward": 1, "gradient": 15}


def test_a_value_read_twice_is_one_edge_with_both_positions():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name="x")
    g = op.program(x, x * x).to_networkx()
    assert g.number_of_edges() == 1
    assert g.edges["x", "v0"]["positions"] == (0, 1)


def test_tape_graph(seed):
    op, a, b, _ = seed
    g = op.to_networkx()
    entries = [k for k, d in g.nodes(data="primitive") if d is not None]
    assert len(entries) == len(op.tape) == 26
    # the seeds v2, v10 are leaves of the tape, constants of the graph
    assert g.nodes["v2"]["role"] == "constant" and g.nodes["a"]["role"] == "input"
    assert g.nodes["L1"]["order"] == 1 and g.nodes["v12"]["order"] == 2
    assert g.number_of_edges() == sum(len({id(x) for x in v.inputs}) for v in op.tape)
    only = op.to_networkx(a.grad)          # the entries a.grad needs
    assert set(only) >= {"v20", "v14", "v3", "v2"} and "v25" not in only
    with pytest.raises(sg.GraphError, match="Variables of this Ops"):
        op.to_networkx(sg.Ops().var(1.0))


def test_stats_by_hand(seed):
    _, _, _, prog = seed
    s = prog.stats()
    assert s.entries == 16                  # the two seeds' spreads (v3, v11) are entries
    assert s.by_primitive == {"mul": 8, "add": 6, "expand": 2}
    assert s.by_order == {0: 1, 1: 4, 2: 11}
    # longest chain: v3 v5 v6 v12 v14 v18 v22 v25 (8 entries); the first level is v0, v3,
    # v11, the second v4, v5 -> widest 3
    assert s.depth == 8 and s.width == 3
    # at most 6 vectors of 4 float64 alive at once while running in tape order
    assert s.peak_bytes == 6 * 32
    assert str(s).startswith("16 entries (mul 8, add 6, expand 2); order 0: 1, order 1: 4, "
                             "order 2: 11")


def test_stats_of_a_chain_and_peak_memory():
    op = sg.Ops()
    x = op.var(np.zeros(1000), name="x")
    y = x.sin().cos().exp()                  # each entry frees the one before
    s = op.program(x, y).stats()
    assert (s.depth, s.width, s.peak_bytes) == (3, 1, 2 * 8000)
    z = x.sin() + x.cos() + x.exp()          # three independent entries first
    s = op.program(x, z).stats()
    assert (s.depth, s.width, s.peak_bytes) == (3, 3, 3 * 8000)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # pydot's use of pyparsing
def test_dot_text(seed):
    _, _, _, prog = seed
    dot = prog.to_dot(raw=True)
    assert dot.startswith("digraph program {") and dot.rstrip().endswith("}")
    nodes = re.findall(r'^  "([^"]+)" \[label=', dot, flags=re.M)
    edges = re.findall(r'^  "([^"]+)" -> "([^"]+)" \[label="([\d,]+)"\];', dot, flags=re.M)
    assert len(nodes) == 20 and len(edges) == 30
    assert '"v0" [label="v0 = a + b", fillcolor="#ffffff"]' in dot
    assert 'fillcolor="#d5f2d5"' in dot.split('"v4" [')[1].split("\n")[0]    # order 1: green
    assert "penwidth=2.5" in dot.split('"v25" [')[1].split("\n")[0]          # an output
    try:
        import pydot  # noqa: F401
    except ImportError:
        return
    back = nx.nx_pydot.read_dot(__import__("io").StringIO(dot))
    shown = [e for e in back.edges(data=True) if e[2].get("style") != "invis"]
    assert back.number_of_nodes() == 20 and len(shown) == 30
    assert {(u, v) for u, v, d in back.edges(data=True) if d.get("style") == "invis"} == \
        {("a", "b")}                                        # keeps the inputs in order


def test_dot_escapes_quotes():
    op = sg.Ops()
    x = op.var([1.0, 2.0], name='x"y')
    dot = op.program(x, x.sin()).to_dot()
    assert '"x\\"y"' in dot


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_render(seed, tmp_path, suffix):
    _, _, _, prog = seed
    path = prog.render(tmp_path / f"seed{suffix}", raw=True)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data
    if suffix == ".svg":
        assert b"v25 = v22 + v20" in data


def test_render_without_dot(seed, tmp_path, monkeypatch):
    _, _, _, prog = seed
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(sg.MissingToolError, match="install the graphviz package"):
        prog.render(tmp_path / "seed.svg")
    with pytest.raises(sg.ArgumentError, match="must end in .svg or .png"):
        prog.render(tmp_path / "seed.pdf")
