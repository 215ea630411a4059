"""Compile stage graph: each note's related notes by meaning, and which notes' edges the graph
store (`compiler.notes.graph_store`: links, tags and related edges) must write again.

The related notes need every note's mean vector. `related.npz` beside `graph.sqlite` keeps them
(scaled to length 1) with the neighbour lists of the build that wrote it, so after an edit only
the edited notes' means are computed and only the lists they can change are looked at again
(`compiler.notes.graph.updated_neighbours`, exact). The file names the notes it was made for (a
digest of their paths and hashes): one that does not match the last build's notes is not used.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np

from compiler.core.files import atomic_write
from compiler.core.settings import Settings
from compiler.notes.graph import (
    Neighbours,
    semantic_neighbours,
    unit_matrix,
    updated_neighbours,
)
from compiler.notes.records import Note


def related_notes(notes: Mapping[str, Note], vectors: Mapping[str, np.ndarray], settings: Settings) -> Neighbours:
    """Returns each note's most similar notes, comparing the mean of each note's section vectors."""
    means = {p: note_mean(n, vectors) for p, n in notes.items() if n.section_count}
    return semantic_neighbours(means, settings.related_min_cosine, settings.related_max)


def note_mean(note: Note, vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.mean([vectors[f"{note.path}#{i}"] for i in range(len(note.sections))], axis=0)


def notes_digest(notes: Mapping[str, Note]) -> str:
    """Names a set of notes by their paths and bytes: what `related.npz` was computed from."""
    return hashlib.sha256(repr(sorted((p, n.sha256) for p, n in notes.items())).encode("utf-8")).hexdigest()


def related_file(graph: Path) -> Path:
    return graph.with_name("related.npz")


def update_related(cache: Path, last_digest: str, notes: Mapping[str, Note], digest: str, moved: Collection[str],
                   vectors: Mapping[str, np.ndarray], settings: Settings) -> tuple[Neighbours, Neighbours | None]:
    """Returns (`related_notes(notes, vectors, settings)`, the neighbours of the last build's notes
    as `cache` held them, None when it held none), reading only the vectors of the `moved`
    notes (edited, new, renamed) when `cache` holds the means of the last build's notes (named by
    `last_digest`, `notes_digest` of them; `digest` names `notes`); then saves the cache for the next build."""
    saved = _load(cache, last_digest, settings)
    paths = sorted(p for p, n in notes.items() if n.section_count)
    old_neighbours = None
    if saved is None:
        means = {p: note_mean(notes[p], vectors) for p in paths}
        neighbours = semantic_neighbours(means, settings.related_min_cosine, settings.related_max)
        matrix = unit_matrix([means[p] for p in paths], 0)
    else:
        old_paths, old_matrix, old_neighbours = saved
        old_rows = {p: i for i, p in enumerate(old_paths)}
        moved = {p for p in paths if p in moved or p not in old_rows}
        rows = [unit_matrix([note_mean(notes[p], vectors)], 0)[0] if p in moved else old_matrix[old_rows[p]]
                for p in paths]
        matrix = np.vstack(rows) if rows else old_matrix[:0]
        gone = set(old_paths) - set(paths)
        neighbours = updated_neighbours(old_neighbours, paths, matrix, moved | gone, settings.related_min_cosine,
                                        settings.related_max)
    _save(cache, digest, settings, paths, matrix, neighbours)
    return neighbours, old_neighbours


def graph_changes(same_paths: bool, edited: Collection[str], neighbours: Neighbours,
                  last_neighbours: Neighbours | None) -> set[str] | None:
    """Returns the notes whose edges may differ from the last build's graph, None for all of them.

    Every edge starts at a note. While the vault holds the same note and attachment paths
    (`same_paths`), the links of a note that was not edited resolve as they did, so its edges move
    only with its related list; any other change (a path added, removed or renamed, no related
    lists saved to compare with) may move any note's links."""
    if not same_paths or last_neighbours is None:
        return None
    return set(edited) | {p for p in neighbours.keys() | last_neighbours.keys()
                          if neighbours.get(p, ()) != last_neighbours.get(p, ())}


def _key(digest: str, settings: Settings) -> str:
    return json.dumps([digest, settings.related_min_cosine, settings.related_max])


def _load(path: Path, digest: str, settings: Settings) -> tuple[list[str], np.ndarray, Neighbours] | None:
    """Returns (paths, unit means, neighbours) saved for the notes named by `digest`, else None."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != _key(digest, settings):
                return None
            paths, matrix = [str(p) for p in data["paths"]], data["matrix"]
            near, cosine = data["near"], data["cosine"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # missing, old or damaged: computed again
        return None
    # Python lists first: indexing the arrays one element at a time made 500,000 numpy scalars (100,000 notes).
    near_rows, cosine_rows = near.tolist(), cosine.tolist()
    neighbours = {p: [(paths[j], c) for j, c in zip(near_rows[i], cosine_rows[i]) if j >= 0] for i, p in enumerate(paths)}
    return paths, matrix, neighbours


def _save(path: Path, digest: str, settings: Settings, paths: Sequence[str], matrix: np.ndarray,
          neighbours: Neighbours) -> None:
    rows = {p: i for i, p in enumerate(paths)}
    width = max([len(v) for v in neighbours.values()] + [1])
    # Whole rows as lists, then one array each: assigning 500,000 elements one by one cost a second.
    listed = [neighbours.get(p, ()) for p in paths]
    near = np.array([[rows[other] for other, _ in found] + [-1] * (width - len(found)) for found in listed],
                    np.int32).reshape(len(paths), width)
    cosine = np.array([[c for _, c in found] + [0.0] * (width - len(found)) for found in listed],
                      np.float64).reshape(len(paths), width)  # holds every float the lists hold, as they are
    buffer = io.BytesIO()
    np.savez(buffer, key=np.array(_key(digest, settings)), paths=np.array(list(paths), dtype=str),
             matrix=matrix, near=near, cosine=cosine)
    atomic_write(path, buffer.getvalue(), durable=False)


