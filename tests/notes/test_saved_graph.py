"""The saved graph read without NetworkX answers what NetworkX answers on the same file."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import networkx as nx

from compiler.notes.graph import build_graph, graph_json
from compiler.notes.records import Link, Note, ResolvedLink
from compiler.notes.saved_graph import load_graph


def test_saved_graph_agrees_with_networkx(tmp_path: Path) -> None:
    notes = [Note(path=p, sha256="0" * 64, title=p, tags=tags) for p, tags in
             (("a.md", ("ops",)), ("b.md", ()), ("c.md", ("ops", "x/y")))]
    links = [ResolvedLink("a.md", "b.md", Link("b", 1, "wikilink"), "ok"),
             ResolvedLink("a.md", "b.md", Link("b", 3, "embed"), "ok"),
             ResolvedLink("b.md", "pic.png", Link("pic.png", 2, "embed"), "ok"),
             ResolvedLink("c.md", "", Link("gone", 1, "wikilink"), "broken")]
    path = tmp_path / "graph.json"
    path.write_text(graph_json(build_graph(notes, links, {"a.md": [("c.md", 0.81)], "c.md": [("a.md", 0.81)]})))
    saved = load_graph(path)
    reference = nx.node_link_graph(json.loads(path.read_text()), edges="links", multigraph=True, directed=True)
    nodes = [*reference.nodes, "missing.md"]
    for a, b in itertools.product(nodes, nodes):
        assert saved.has_node(a) == reference.has_node(a)
        assert saved.has_edge(a, b) == reference.has_edge(a, b)
        assert saved.get_edge_data(a, b) == reference.get_edge_data(a, b)
    assert saved.get_edge_data("a.md", "c.md") == {"related": {"kind": "related", "weight": 0.81}}


def test_a_missing_graph_is_empty(tmp_path: Path) -> None:
    graph = load_graph(tmp_path / "graph.json")
    assert not graph.has_node("a.md") and not graph.has_edge("a.md", "b.md")


def test_graph_text_writes_the_bytes_networkx_writes() -> None:
    import random

    from compiler.notes.graph import graph_text

    rng = random.Random(5)
    paths = ["a.md", "B/ñandú \"q\".md", "c.md", "d\\e.md", "Ω/z.qmd"]
    notes = [Note(path=p, sha256="0" * 64, title=rng.choice((p, "Tïtle \"x\"\n", "#tag?")),
                  tags=tuple(rng.sample(("ops", "x/y", "ünï"), rng.randrange(3)))) for p in paths]
    links = [ResolvedLink(s, t, Link(t or "gone", rng.randrange(9), rng.choice(("wikilink", "embed", "markdown"))),
                          "broken" if not t else "ok")
             for s in paths for t in rng.sample([*paths, "pic.png", "", "a.md"], 3)]
    neighbours = {p: [(o, rng.choice((0.5, 0.81, 1 / 3, 1e-05, 0.0, -0.0))) for o in rng.sample(paths, 2) if o != p] for p in paths}
    assert graph_text(notes, links, neighbours) == graph_json(build_graph(notes, links, neighbours))


def test_graph_text_of_no_notes_and_of_more_than_one_piece() -> None:
    from compiler.notes.graph import graph_text

    assert graph_text([], [], {}) == graph_json(build_graph([], [], {}))
    notes = [Note(path=f"n{i}.md", sha256="0" * 64, title=f"N {i}", tags=("t",)) for i in range(2100)]
    neighbours = {n.path: [(notes[0].path, 0.5)] for n in notes[1:]}
    assert graph_text(notes, [], neighbours) == graph_json(build_graph(notes, [], neighbours))
