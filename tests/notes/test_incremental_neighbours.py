"""`updated_neighbours` (after an edit, only the lists it can change) equals `semantic_neighbours`
(every list from scratch), ties and cut-offs included."""

from __future__ import annotations

import random

import numpy as np
import pytest

from compiler.notes.graph import semantic_neighbours, unit_matrix, updated_neighbours


def vault_vectors(rng: random.Random, count: int) -> dict[str, np.ndarray]:
    # Few distinct small integers per dimension: many notes share a vector or a cosine, so ties
    # at the cut-off (which of two equal candidates makes the list) are common.
    return {f"n{rng.randrange(10**6):06d}.md": np.array([rng.choice((0, 1, 2)) for _ in range(6)], np.float32) + 0.01
            for _ in range(count)}


def incremental(previous: dict, vectors: dict, moved: set, min_cosine: float, limit: int) -> dict:
    paths = sorted(vectors)
    return updated_neighbours(previous, paths, unit_matrix([vectors[p] for p in paths], 6), moved, min_cosine, limit)


@pytest.mark.parametrize("seed", range(12))
def test_edits_additions_and_removals_give_the_full_rebuild(seed):
    rng = random.Random(seed)
    min_cosine, limit = rng.choice((0.0, 0.5, 0.9)), rng.choice((1, 3, 5))
    vectors = vault_vectors(rng, rng.randrange(3, 60))
    neighbours = semantic_neighbours(vectors, min_cosine, limit)
    for _ in range(4):
        moved: set[str] = set()
        for path in rng.sample(sorted(vectors), min(len(vectors) - 2, rng.randrange(1, 4))):
            action = rng.choice(("edit", "remove", "add"))
            if action == "edit":
                vectors[path] = vault_vectors(rng, 1).popitem()[1]
            elif action == "remove":
                del vectors[path]
            else:
                path, vectors[path] = vault_vectors(rng, 1).popitem()
            moved.add(path)
        neighbours = incremental(neighbours, vectors, moved, min_cosine, limit)
        assert neighbours == semantic_neighbours(vectors, min_cosine, limit)


def test_nothing_moved_keeps_every_list():
    vectors = vault_vectors(random.Random(3), 30)
    neighbours = semantic_neighbours(vectors, 0.2, 4)
    assert incremental(neighbours, vectors, set(), 0.2, 4) == neighbours


def test_ties_at_the_cut_off_go_to_the_first_path():
    one = np.array([1.0, 0.0], np.float32)
    vectors = {"a.md": one, "c.md": one, "b.md": one, "d.md": one}
    assert semantic_neighbours(vectors, 0.0, 2)["d.md"] == [("a.md", 1.0), ("b.md", 1.0)]
