"""Compile stage graph: each note's related notes by meaning, and which notes' edges the graph
store (`compiler.notes.graph_store`: links, tags and related edges) must write again.

The related notes need every note's mean vector. `related.sqlite` beside `graph.sqlite`
(`compiler.pipeline.related_store`) keeps them (scaled to length 1) with the lists of the build
that wrote it, a row per note, so after an edit only the edited notes' means are computed and only
the lists they can change are read, computed again and written (exact: `update_related`). The store
names the notes it was made for (a digest of their paths and hashes): one that does not match the
last build's notes is not used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.core.settings import Settings
from compiler.notes.graph import (
    Neighbours,
    cosines,
    neighbours_of,
    semantic_neighbours,
    unit_matrix,
)
from compiler.notes.records import Note
from compiler.pipeline.related_store import (
    RelatedLists,
    holders,
    load_lists,
    load_means,
    save_related,
)


def related_notes(notes: Mapping[str, Note], vectors: Mapping[str, np.ndarray], settings: Settings) -> Neighbours:
    """Returns each note's most similar notes, comparing the mean of each note's section vectors."""
    means = {p: note_mean(n, vectors) for p, n in notes.items() if n.section_count}
    return semantic_neighbours(means, settings.related_min_cosine, settings.related_max)


def note_mean(note: Note, vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.mean([vectors[f"{note.path}#{i}"] for i in range(len(note.sections))], axis=0)


def notes_digest(notes: Mapping[str, Note]) -> str:
    """Names a set of notes by their paths and bytes: what the related notes store (`related.sqlite`) was computed from."""
    return hashlib.sha256(repr(sorted((p, n.sha256) for p, n in notes.items())).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Related:
    """The related notes of a build, and how they differ from the last build's."""

    neighbours: Mapping[str, Sequence[tuple[str, float]]]  # every note's list (compiler.pipeline.related_store.RelatedLists)
    # the notes whose list differs from the last build's (those gone too); None when the store held
    # no lists of the last build's notes to compare with (every list was computed)
    changed: set[str] | None
    holding: set[str]  # the notes whose list holds a note that got a new mean (edited, new, renamed)


def update_related(store: Path, last_digest: str, notes: Mapping[str, Note], digest: str, moved: Collection[str],
                   vectors: Mapping[str, np.ndarray], settings: Settings) -> Related:
    """Returns the related notes of `notes` (`related_notes(notes, vectors, settings)`, exact),
    reading only the vectors of the `moved` notes (edited, new, renamed) when `store` holds the
    means of the last build's notes (named by `last_digest`, `notes_digest` of them; `digest`
    names `notes`), and only the stored lists that can change; then brings the store up to date.

    A list changes only when its note moved, it held a note that moved or is gone (computed again
    in full: that note may have fallen out, letting in one not kept), or a moved note's cosine with
    its note reaches its floor (merged: every cosine it holds is as it was). The moved rows'
    cosines come from the moved rows (the product is symmetric): as `updated_neighbours`."""
    paths = sorted(p for p, n in notes.items() if n.section_count)
    saved = load_means(store, _key(last_digest, settings))
    if saved is None:
        return _all_related(store, notes, paths, digest, vectors, settings)
    old_paths, old_matrix, old_floors = saved
    old_rows = {p: i for i, p in enumerate(old_paths)}
    rows = {p: i for i, p in enumerate(paths)}
    moved = {p for p in paths if p in moved or p not in old_rows}
    gone = [p for p in old_paths if p not in rows]
    matrix = _matrix(rows, old_rows, old_matrix, {p: note_mean(notes[p], vectors) for p in moved})
    floors = old_floors[[old_rows.get(p, 0) for p in paths]] if len(old_paths) else np.zeros(len(paths), np.float32)
    again = moved | (holders(store, moved | set(gone)) & rows.keys())
    lists = neighbours_of((rows[p] for p in again), paths, matrix, settings.related_min_cosine, settings.related_max)
    fresh = sorted(rows[p] for p in moved)
    offers: dict[str, list[tuple[str, float]]] = {}
    if fresh:
        sims = cosines(matrix[fresh], matrix)
        reach = (sims >= floors[None, :]).any(axis=0)
        reach[[rows[p] for p in again]] = False
        for i in np.flatnonzero(reach).tolist():
            offers[paths[i]] = [(paths[j], float(sims[k, i])) for k, j in enumerate(fresh)
                                if sims[k, i] >= settings.related_min_cosine]
    before = load_lists(store, again | offers.keys())
    for path, offered in offers.items():
        lists[path] = sorted([*before.get(path, []), *offered], key=lambda near: (-near[1], near[0]))[:settings.related_max]
    changed = {p for p, near in lists.items() if near != before.get(p, [])}
    save_related(store, _key(digest, settings), matrix, rows, {p: lists[p] for p in changed | moved},
                 {p: _floor(lists[p], settings) for p in changed | moved}, means=moved, gone=gone, whole=False)
    holding = {p for p, near in lists.items() if any(other in moved for other, _ in near)}
    return Related(RelatedLists(store, paths, lists), changed | set(gone), holding)


def _all_related(store: Path, notes: Mapping[str, Note], paths: Sequence[str], digest: str,
                 vectors: Mapping[str, np.ndarray], settings: Settings) -> Related:
    """Computes every list (no usable store) and writes the store whole."""
    means = {p: note_mean(notes[p], vectors) for p in paths}
    neighbours = semantic_neighbours(means, settings.related_min_cosine, settings.related_max)
    matrix = unit_matrix([means[p] for p in paths], 0)
    rows = {p: i for i, p in enumerate(paths)}
    save_related(store, _key(digest, settings), matrix, rows, neighbours,
                 {p: _floor(near, settings) for p, near in neighbours.items()}, means=paths, gone=(), whole=True)
    return Related(neighbours, None, set())


def _matrix(rows: Mapping[str, int], old_rows: Mapping[str, int], old_matrix: np.ndarray,
            means: Mapping[str, np.ndarray]) -> np.ndarray:
    """Returns the unit means of the notes at `rows` (path → row): the stored rows, but those of
    `means` (computed now). The stored rows are the bytes a rebuild would compute."""
    units = {p: unit_matrix([mean], 0)[0] for p, mean in means.items()}
    if not rows:
        return old_matrix[:0]
    if len(old_matrix):
        matrix = old_matrix[[old_rows.get(p, 0) for p in rows]]  # a copy: fancy indexing
    else:  # the last build had no note with a section: every row is new
        first = next(iter(units.values()))
        matrix = np.zeros((len(rows), len(first)), first.dtype)
    for path, unit in units.items():
        matrix[rows[path]] = unit
    return matrix


def every_list(neighbours: Mapping[str, Sequence[tuple[str, float]]]) -> Mapping[str, Sequence[tuple[str, float]]]:
    """Returns `neighbours` with every list in memory: the stored ones read in one pass, not one by one."""
    return neighbours.whole() if isinstance(neighbours, RelatedLists) else neighbours


def _floor(near: Sequence[tuple[str, float]], settings: Settings) -> float:
    """The cosine a note must reach to enter a list: its last one when it is full, else the minimum."""
    return near[-1][1] if len(near) >= settings.related_max and near else settings.related_min_cosine


def graph_changes(same_paths: bool, edited: Collection[str], related: Related) -> set[str] | None:
    """Returns the notes whose edges may differ from the last build's graph, None for all of them.

    Every edge starts at a note. While the vault holds the same note and attachment paths
    (`same_paths`), the links of a note that was not edited resolve as they did, so its edges move
    only with its related list; any other change (a path added, removed or renamed, no related
    lists saved to compare with) may move any note's links."""
    if not same_paths or related.changed is None:
        return None
    return set(edited) | related.changed


def _key(digest: str, settings: Settings) -> str:
    return json.dumps([digest, settings.related_min_cosine, settings.related_max])
