"""The saved vault graph as a search reads it: `graph.json` without NetworkX.

`compiler.notes.graph` writes node-link JSON through NetworkX; a query only asks whether two notes
are linked and how. Importing NetworkX for that was a tenth of a cold `engram query`, so the
file is read here with `json` into the three questions `hybrid_search` asks, answered as a
NetworkX MultiDiGraph would (`tests/notes/test_saved_graph.py` checks that they agree).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class SavedGraph:
    """has_node / has_edge / get_edge_data of a directed multigraph, from its node-link data."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._nodes = {node["id"] for node in data.get("nodes", [])}
        self._edges: dict[tuple[str, str], dict[Any, dict[str, Any]]] = {}
        for link in data.get("links", []):
            attributes = {k: v for k, v in link.items() if k not in ("source", "target", "key")}
            edges = self._edges.setdefault((link["source"], link["target"]), {})
            edges[link.get("key", len(edges))] = attributes

    def has_node(self, node: str) -> bool:
        return node in self._nodes

    def has_edge(self, source: str, target: str) -> bool:
        return (source, target) in self._edges

    def get_edge_data(self, source: str, target: str) -> dict[Any, dict[str, Any]] | None:
        """Returns {key: attributes} of the edges from `source` to `target`, or None."""
        return self._edges.get((source, target))


def load_graph(path: Path) -> SavedGraph:
    """Returns the saved graph, or an empty one when there is none yet."""
    if not path.is_file():
        return SavedGraph({})
    return SavedGraph(json.loads(path.read_text(encoding="utf-8")))
