"""Compile stage graph: each note's related notes by meaning, and `graph.json` (links and related edges)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from compiler.core.files import atomic_write
from compiler.core.settings import Settings
from compiler.notes.graph import build_graph, graph_json, semantic_neighbours
from compiler.notes.records import Note, ResolvedLink

Neighbours = dict[str, list[tuple[str, float]]]  # note path → (related note path, cosine), best first


def related_notes(notes: Mapping[str, Note], vectors: Mapping[str, np.ndarray], settings: Settings) -> Neighbours:
    """Returns each note's most similar notes, comparing the mean of each note's section vectors."""
    means = {p: np.mean([vectors[f"{p}#{i}"] for i in range(len(n.sections))], axis=0)
             for p, n in notes.items() if n.sections}
    return semantic_neighbours(means, settings.related_min_cosine, settings.related_max)


def save_graph(path: Path, notes: Mapping[str, Note], links: Sequence[ResolvedLink], neighbours: Neighbours) -> bool:
    """Writes the note graph to `path` unless it already holds those bytes; returns whether it wrote."""
    data = graph_json(build_graph(list(notes.values()), links, neighbours)).encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return False
    atomic_write(path, data)
    return True
