"""Stage 7, graph: NetworkX multigraph of notes, tags and their links, saved as node-link JSON.

Edge kinds: "link" and "embed" (note → note or attachment), "tag" (note → tag node) and
"related" (semantic neighbours, stored in both directions, weight = cosine).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import networkx as nx
import numpy as np

from compiler.notes.records import Note, ResolvedLink

_BLOCK = 1024  # rows per block in the neighbour search: bounded memory on large vaults


def semantic_neighbours(vectors: Mapping[str, np.ndarray], min_cosine: float, limit: int) -> dict[str, list[tuple[str, float]]]:
    """Returns, for each path, up to `limit` other paths with cosine ≥ `min_cosine`, best first.

    Cosines are rounded to 4 places before comparing so that float noise between a cached
    and a fresh embedding cannot reorder ties: pages stay byte-identical after a rebuild.
    """
    paths = sorted(vectors)
    if len(paths) < 2:
        return {p: [] for p in paths}
    matrix = np.vstack([_unit(vectors[p]) for p in paths])
    result: dict[str, list[tuple[str, float]]] = {}
    for start in range(0, len(paths), _BLOCK):
        sims = np.round(matrix[start:start + _BLOCK] @ matrix.T, 4)
        for row, sim in enumerate(sims):
            me = start + row
            sim[me] = -1.0
            keep = min(limit, len(sim) - 1)
            candidates = np.argpartition(-sim, keep)[:keep + 1] if keep + 1 < len(sim) else np.arange(len(sim))
            top = sorted(candidates, key=lambda j: (-sim[j], j))[:limit]  # ties by path: paths are sorted
            result[paths[me]] = [(paths[j], float(sim[j])) for j in top if sim[j] >= min_cosine]
    return result


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


def load_graph(path: Path) -> nx.MultiDiGraph:
    """Returns the saved graph, or an empty one when there is none yet."""
    if not path.is_file():
        return nx.MultiDiGraph()
    return nx.node_link_graph(json.loads(path.read_text(encoding="utf-8")), edges="links", multigraph=True,
                              directed=True)
