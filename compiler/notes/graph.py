"""Stage 7, graph: NetworkX multigraph of notes, tags and their links, saved as node-link JSON.

Edge kinds: "link" and "embed" (note → note or attachment), "tag" (note → tag node) and
"related" (semantic neighbours, stored in both directions, weight = cosine).
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from compiler.notes.records import Note, ResolvedLink

_BLOCK = 1024  # rows per block in the neighbour search: bounded memory on large vaults


Neighbours = dict[str, list[tuple[str, float]]]  # path → (other path, cosine), best first


def semantic_neighbours(vectors: Mapping[str, np.ndarray], min_cosine: float, limit: int) -> Neighbours:
    """Returns, for each path, up to `limit` other paths with cosine ≥ `min_cosine`, best first.

    Cosines are rounded to 4 places before comparing so that float noise between a cached
    and a fresh embedding cannot reorder ties: pages stay byte-identical after a rebuild.
    Ties are broken by path, also at the cut-off (every tied candidate is looked at).
    """
    paths = sorted(vectors)
    matrix = unit_matrix([vectors[p] for p in paths], len(next(iter(vectors.values()))) if paths else 0)
    return neighbours_of(range(len(paths)), paths, matrix, min_cosine, limit)


def unit_matrix(vectors: Sequence[np.ndarray], dimension: int) -> np.ndarray:
    """Returns the vectors, each scaled to length 1, as the rows of one matrix."""
    return np.vstack([_unit(v) for v in vectors]) if len(vectors) else np.zeros((0, dimension), np.float32)


def neighbours_of(rows: Iterable[int], paths: Sequence[str], matrix: np.ndarray, min_cosine: float,
                  limit: int) -> Neighbours:
    """Returns the neighbours of the paths at `rows` (indexes into `paths` and `matrix`), compared
    with every other row of `matrix`."""
    wanted = sorted(rows)
    result: Neighbours = {}
    for start in range(0, len(wanted), _BLOCK):
        block = wanted[start:start + _BLOCK]
        sims = cosines(matrix[block], matrix)
        for row, me in enumerate(block):
            result[paths[me]] = _best(sims[row], me, paths, min_cosine, limit)
    return result


def cosines(rows: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Returns the cosines (4 places) of unit `rows` against unit `matrix`. Always a matrix product
    of two or more rows: one row would go through another BLAS routine (a vector product) whose
    sums can differ in the last bit, and an incremental update must see the rebuild's values."""
    padded = rows if len(rows) > 1 else np.vstack([rows, rows])
    return np.round(padded @ matrix.T, 4)[:len(rows)]


def _best(sim: np.ndarray, me: int, paths: Sequence[str], min_cosine: float, limit: int) -> list[tuple[str, float]]:
    """Returns the best `limit` entries of one row of cosines (not `me`), ≥ `min_cosine`, ties by path."""
    sim = sim.copy()
    sim[me] = -np.inf
    if limit <= 0:
        return []
    floor = np.float32(min_cosine) if limit >= len(sim) else max(np.partition(sim, len(sim) - limit)[len(sim) - limit],
                                                                 np.float32(min_cosine))
    found = np.flatnonzero(sim >= floor)
    found = found[sim[found] >= min_cosine]
    order = np.lexsort((found, -sim[found]))[:limit]  # paths are sorted: index order is path order
    return [(paths[j], float(sim[j])) for j in found[order]]


def updated_neighbours(previous: Mapping[str, Sequence[tuple[str, float]]], paths: Sequence[str], matrix: np.ndarray,
                       moved: Iterable[str], min_cosine: float, limit: int) -> Neighbours:
    """Returns `semantic_neighbours` of the rows of `matrix`, given `previous`, the neighbours of
    the last build, when only the paths in `moved` got new vectors (or are new, or are gone).

    Exact, not approximate: a path's list is computed again in full when it is moved or its last
    list held a moved path (that one may have fallen out, letting in one we did not keep). Any
    other list lost nothing, since every cosine in it is as it was, so its new top is the best of
    it and the moved paths' new cosines with it (those come from the moved rows: the product is
    symmetric). `tests/notes/test_incremental_neighbours.py` compares this with a full rebuild.
    """
    moved = set(moved)
    index = {p: i for i, p in enumerate(paths)}
    again = {i for i, p in enumerate(paths) if p in moved or p not in previous
             or any(other in moved or other not in index for other, _ in previous[p])}
    result = neighbours_of(again, paths, matrix, min_cosine, limit)
    fresh = sorted(index[p] for p in moved if p in index)
    if not fresh:
        return {p: result[p] if i in again else list(previous[p]) for i, p in enumerate(paths)}
    sims = cosines(matrix[fresh], matrix)
    for i, path in enumerate(paths):
        if i in again:
            continue
        offered = [(paths[j], float(sims[k, i])) for k, j in enumerate(fresh) if sims[k, i] >= min_cosine]
        merged = sorted([*previous[path], *offered], key=lambda near: (-near[1], near[0]))
        result[path] = merged[:limit]
    return {p: result[p] for p in paths}


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def build_graph(notes: Sequence[Note], links: Sequence[ResolvedLink],
                neighbours: Mapping[str, Sequence[tuple[str, float]]]) -> nx.MultiDiGraph:
    """Returns the vault graph. Node ids: note paths, attachment paths, and "#tag" for tags."""
    graph = nx.MultiDiGraph()
    for note in sorted(notes, key=lambda n: n.path):
        graph.add_node(note.path, kind="note", title=note.title)
        for tag in note.tags:
            graph.add_node(f"#{tag}", kind="tag")
            graph.add_edge(note.path, f"#{tag}", key="tag", kind="tag", weight=1.0)
    for link in links:
        if link.status == "broken" or link.target == link.source:
            continue
        if link.target not in graph:
            graph.add_node(link.target, kind="attachment")
        kind = "embed" if link.link.kind == "embed" else "link"
        graph.add_edge(link.source, link.target, key=kind, kind=kind, weight=1.0)
    for path, near in sorted(neighbours.items()):
        for other, cosine in near:
            graph.add_edge(path, other, key="related", kind="related", weight=cosine)
    return graph


def graph_json(graph: nx.MultiDiGraph) -> str:
    """Returns deterministic node-link JSON (sorted nodes and edges)."""
    data = nx.node_link_data(graph, edges="links")
    data["nodes"] = sorted(data["nodes"], key=lambda n: n["id"])
    data["links"] = sorted(data["links"], key=lambda e: (e["source"], e["target"], e["key"]))
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def graph_text(notes: Sequence[Note], links: Sequence[ResolvedLink],
               neighbours: Mapping[str, Sequence[tuple[str, float]]]) -> str:
    """Returns `graph_json(build_graph(notes, links, neighbours))`, the same bytes, without NetworkX."""
    return "".join(graph_pieces(notes, links, neighbours))


def graph_pieces(notes: Sequence[Note], links: Sequence[ResolvedLink],
                 neighbours: Mapping[str, Sequence[tuple[str, float]]]) -> Iterator[str]:
    """Yields `graph_text` in pieces, so a caller can write 180 MB (100,000 notes) without holding it.

    The node-link JSON is indented, and an indented `json.dumps` runs the encoder in Python: for
    10,000 notes that took 8 s, most of a compile after one edit. Here each node and edge is a
    flat record, so its lines are put together from the encoded values. The graph is built with
    NetworkX's rules (a node or an edge added twice keeps the last attributes given).
    """
    nodes: dict[str, dict[str, object]] = {}
    edges: dict[tuple[str, str, str], float] = {}  # (source, target, key) → weight; the kind is the key
    # Inlined, not a helper per edge: at 100,000 notes there are 860,000 edges.
    for note in sorted(notes, key=lambda n: n.path):
        nodes.setdefault(note.path, {}).update(kind="note", title=note.title)
        for tag in note.tags:
            nodes.setdefault(f"#{tag}", {}).update(kind="tag")
            edges[(note.path, f"#{tag}", "tag")] = 1.0
    for link in links:
        if link.status == "broken" or link.target == link.source:
            continue
        if link.target not in nodes:
            nodes[link.target] = {"kind": "attachment"}
        nodes.setdefault(link.source, {})
        edges[(link.source, link.target, "embed" if link.link.kind == "embed" else "link")] = 1.0
    for path, near in sorted(neighbours.items()):
        nodes.setdefault(path, {})
        for other, cosine in near:
            nodes.setdefault(other, {})
            edges[(path, other, "related")] = cosine
    # Every id once through the encoder; the edges' keys and kinds are plain words.
    encoded = {node: _text(node) for node in nodes}

    def record(node: str, fields: Mapping[str, object]) -> str:
        lines = [f"   {_text(k)}: {encoded[node] if k == 'id' else _text(fields[k])}" for k in sorted({"id", *fields})]
        return "  {\n" + ",\n".join(lines) + "\n  }"

    # Every edge has the same five fields: one format, not a sort of its fields per edge.
    # Few distinct weights (1.0, and cosines rounded to 4 places): each formatted once. Not zero:
    # 0.0 and -0.0 are one key and two texts.
    numbers = {w: _number(w) for w in set(edges.values()) if w}

    def edge_record(edge: tuple[tuple[str, str, str], float]) -> str:
        (s, t, k), w = edge
        return (f'  {{\n   "key": "{k}",\n   "kind": "{k}",\n   "source": {encoded[s]},\n   "target": {encoded[t]},'
                f'\n   "weight": {numbers[w] if w else _number(w)}\n  }}')

    yield '{\n "directed": true,\n "graph": {},\n "links": '
    yield from _listed(sorted(edges.items()), edge_record)
    yield ',\n "multigraph": true,\n "nodes": '
    yield from _listed(sorted(nodes), lambda node: record(node, nodes[node]))
    yield "\n}\n"


_CHUNK = 2000  # records per piece: few pieces, none large


def _listed(items: Sequence[Any], record: Callable[[Any], str]) -> Iterator[str]:
    """Yields the indented JSON list of `items`' records, a few thousand records per piece."""
    if not items:
        yield "[]"
        return
    yield "[\n"
    for start in range(0, len(items), _CHUNK):
        yield (",\n" if start else "") + ",\n".join(record(item) for item in items[start:start + _CHUNK])
    yield "\n ]"


def _text(value: object) -> str:
    """Returns `json.dumps(value, ensure_ascii=False)`; a string goes straight to the encoder's C
    function (json.dumps builds an encoder per call: 600,000 calls at 100,000 notes)."""
    return encode_basestring(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _number(value: float) -> str:
    """Returns a float as `json.dumps` writes it (its repr when finite), without the encoder's cost."""
    return repr(float(value)) if math.isfinite(value) else json.dumps(value)


def load_graph(path: Path) -> nx.MultiDiGraph:
    """Returns the saved graph, or an empty one when there is none yet."""
    if not path.is_file():
        return nx.MultiDiGraph()
    return nx.node_link_graph(json.loads(path.read_text(encoding="utf-8")), edges="links", multigraph=True,
                              directed=True)
