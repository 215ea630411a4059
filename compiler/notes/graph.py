"""Stage 7, graph: NetworkX multigraph of notes, tags and their links (saved by `compiler.notes.graph_store`).

Edge kinds: "link" and "embed" (note → note or attachment), "tag" (note → tag node) and
"related" (semantic neighbours, stored in both directions, weight = cosine).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from compiler.notes.graph_store import read_graph
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


def load_graph(path: Path) -> nx.MultiDiGraph:
    """Returns the graph `compiler.notes.graph_store` saved at `path` as `build_graph` made it (an
    empty one when there is none yet): for a person or a tool that wants NetworkX's algorithms."""
    notes, edges = read_graph(path)
    graph = nx.MultiDiGraph()
    graph.add_nodes_from((note, {"kind": "note", "title": title}) for note, title in notes)
    for source, target, kind, weight in edges:
        if target not in graph:
            graph.add_node(target, kind="tag" if kind == "tag" else "attachment")
        graph.add_edge(source, target, key=kind, kind=kind, weight=weight)
    return graph
