"""The graph store: what it holds is `build_graph`'s graph, note by note rewrites equal a whole
write, and a search's question about the edges between its hits gets NetworkX's answer."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import networkx as nx

from compiler.notes.graph import build_graph, load_graph
from compiler.notes.graph_store import read_graph, save_graph, stored_links, ties
from compiler.notes.records import Link, Note, ResolvedLink

PATHS = ["a.md", "B/ñandú \"q\".md", "c.md", "d\\e.md", "Ω/z.qmd", "f.md"]


def random_graph(rng: random.Random) -> tuple[dict[str, Note], list[ResolvedLink], dict[str, list[tuple[str, float]]]]:
    notes = {p: Note(path=p, sha256="0" * 64, title=rng.choice((p, "Tïtle \"x\"\n", "#tag?")),
                     tags=tuple(rng.sample(("ops", "x/y", "ünï"), rng.randrange(3)))) for p in PATHS}
    links = [ResolvedLink(s, t, Link(t or "gone", rng.randrange(9), rng.choice(("wikilink", "embed", "markdown"))),
                          "broken" if not t else "ok")
             for s in PATHS for t in rng.sample([*PATHS, "pic.png", "", "a.md"], 3)]
    neighbours = {p: [(o, rng.choice((0.5, 0.81, 1 / 3, 1e-05, 0.0))) for o in rng.sample(PATHS, 2) if o != p]
                  for p in PATHS}
    return notes, links, neighbours


def same_graph(a: nx.MultiDiGraph, b: nx.MultiDiGraph) -> bool:
    return (sorted(a.nodes(data=True)) == sorted(b.nodes(data=True))
            and sorted(a.edges(keys=True, data=True)) == sorted(b.edges(keys=True, data=True)))


def test_the_store_holds_what_build_graph_makes(tmp_path: Path) -> None:
    for seed in range(20):
        notes, links, neighbours = random_graph(random.Random(seed))
        path = tmp_path / f"{seed}.sqlite"
        assert save_graph(path, notes, links, neighbours, "k", last_key="", changed=None) == len(notes)
        assert same_graph(load_graph(path), build_graph(list(notes.values()), links, neighbours))


def test_rewriting_the_changed_notes_equals_writing_all(tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "graph.sqlite"
    notes, links, neighbours = random_graph(rng)
    save_graph(path, notes, links, neighbours, "k0", last_key="", changed=None)
    for step in range(1, 30):
        new_notes, new_links, new_neighbours = random_graph(rng)
        kept = {p for p in PATHS if rng.random() < 0.9}
        # a note added or gone is a change; what did not change stays as it was, as the spine guarantees
        changed = set(rng.sample(PATHS, rng.randrange(len(PATHS)))) | (kept ^ set(notes))
        new_notes = {p: new_notes[p] if p in changed else notes[p] for p in sorted(kept)}
        new_links = [l for l in new_links if l.source in changed] + [l for l in links if l.source not in changed]
        new_neighbours = {p: new_neighbours[p] if p in changed else neighbours.get(p, []) for p in new_notes}
        written = save_graph(path, new_notes, new_links, new_neighbours, f"k{step}", last_key=f"k{step - 1}",
                             changed=changed)
        assert written == len(changed & set(new_notes))
        whole = tmp_path / f"whole{step}.sqlite"
        save_graph(whole, new_notes, new_links, new_neighbours, "k", last_key="", changed=None)
        assert read_graph(path) == read_graph(whole)
        notes, links, neighbours = new_notes, new_links, new_neighbours


def test_a_store_of_another_build_or_unreadable_is_written_whole(tmp_path: Path) -> None:
    notes, links, neighbours = random_graph(random.Random(1))
    path = tmp_path / "graph.sqlite"
    save_graph(path, notes, links, neighbours, "old", last_key="", changed=None)
    fewer = {p: notes[p] for p in PATHS[:2]}
    kept = [l for l in links if l.source in fewer]
    assert save_graph(path, fewer, kept, {}, "new", last_key="not what it holds", changed=set()) == 2
    assert {p for p, _ in read_graph(path)[0]} == set(fewer)
    path.write_bytes(b"not a database at all" * 100)
    assert save_graph(path, fewer, kept, {}, "new2", last_key="new", changed=set()) == 2
    assert same_graph(load_graph(path), build_graph(list(fewer.values()), kept, {}))


def test_the_json_it_replaces_is_removed(tmp_path: Path) -> None:
    (tmp_path / "graph.json").write_text("{}")
    save_graph(tmp_path / "graph.sqlite", {}, [], {}, "k", last_key="", changed=None)
    assert not (tmp_path / "graph.json").exists()


def test_ties_answer_as_networkx_would(tmp_path: Path) -> None:
    notes, links, neighbours = random_graph(random.Random(7))
    path = tmp_path / "graph.sqlite"
    save_graph(path, notes, links, neighbours, "k", last_key="", changed=None)
    reference = build_graph(list(notes.values()), links, neighbours)
    ends, others = PATHS[:2], [*PATHS[2:], "pic.png", "missing.md"]
    expected = {}
    for a, b in itertools.product(ends, others):
        weights = [data["weight"] for x, y in ((a, b), (b, a)) if reference.has_edge(x, y)
                   for data in reference.get_edge_data(x, y).values() if data["kind"] != "tag"]
        if weights:
            expected[(a, b)] = max(weights)
    assert expected and ties(path, ends, others) == expected


def test_no_store_or_an_unreadable_one_has_no_ties(tmp_path: Path) -> None:
    assert ties(tmp_path / "graph.sqlite", ["a.md"], ["b.md"]) == {}
    assert load_graph(tmp_path / "graph.sqlite").number_of_nodes() == 0
    (tmp_path / "graph.sqlite").write_bytes(b"garbage" * 1000)
    assert ties(tmp_path / "graph.sqlite", ["a.md"], ["b.md"]) == {}


def test_the_links_of_the_notes_not_skipped_come_back_as_they_were_resolved(tmp_path: Path) -> None:
    notes, links, neighbours = random_graph(random.Random(11))
    links.append(ResolvedLink("a.md", "c.md", Link("C", 4, "wikilink", "Part", "", "shown"), "ambiguous",
                              ("c.md", "sub/C.md")))
    links.sort(key=lambda r: (r.source, r.link.line, r.link.target))
    path = tmp_path / "graph.sqlite"
    save_graph(path, notes, links, neighbours, "k1", last_key="", changed=None)
    assert stored_links(path, "k1", ()) == links  # broken and ambiguous ones too, in their order
    assert stored_links(path, "k1", {"a.md", "c.md"}) == [l for l in links if l.source not in {"a.md", "c.md"}]
    assert stored_links(path, "another build", ()) is None
    assert stored_links(tmp_path / "none.sqlite", "k1", ()) is None
    path.write_bytes(b"garbage" * 1000)
    assert stored_links(path, "k1", ()) is None
