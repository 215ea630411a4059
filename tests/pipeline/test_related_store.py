"""`update_related` with `related.sqlite` (only the rows an edit can change are read and written)
gives every note the related list a full computation gives, ties at the floor included, and names
exactly the lists that moved and those that hold a moved note."""

from __future__ import annotations

import random
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from compiler.core.settings import Settings
from compiler.pipeline.graph import every_list, notes_digest, related_notes, update_related
from compiler.pipeline.related_store import RelatedLists


@dataclass(frozen=True)
class Stub:
    """What the related notes read of a note: its path, its bytes' hash, how many sections it has."""

    path: str
    sha256: str
    sections: tuple[int, ...]

    @property
    def section_count(self) -> int:
        return len(self.sections)


def vector(rng: random.Random) -> np.ndarray:
    # Few distinct small integers per dimension: many equal cosines, so ties at a list's floor are common.
    return np.array([rng.choice((0, 1, 2)) for _ in range(6)], np.float32) + 0.01


def new_note(rng: random.Random, path: str, vectors: dict[str, np.ndarray]) -> Stub:
    count = rng.choice((0, 1, 1, 2, 3))  # a note without a section has no related list
    for i in range(count):
        vectors[f"{path}#{i}"] = vector(rng)
    return Stub(path, f"{rng.random()}", tuple(range(count)))


def lists_holding(neighbours, moved) -> set[str]:
    return {p for p, near in neighbours.items() if any(other in moved for other, _ in near)}


@pytest.mark.parametrize("seed", range(16))
def test_updates_give_the_full_computation(seed, tmp_path):
    rng = random.Random(seed)
    settings = Settings(related_min_cosine=rng.choice((0.0, 0.5, 0.9)), related_max=rng.choice((1, 2, 3, 5)))
    store = tmp_path / "related.sqlite"
    vectors: dict[str, np.ndarray] = {}
    notes = {p: new_note(rng, p, vectors) for p in (f"n{i:02d}.md" for i in range(rng.randrange(3, 40)))}
    last = update_related(store, "", notes, notes_digest(notes), notes, vectors, settings)
    assert last.changed is None and every_list(last.neighbours) == related_notes(notes, vectors, settings)
    for _ in range(6):
        before, full_before = dict(notes), related_notes(notes, vectors, settings)
        edited = set()
        for _ in range(rng.randrange(1, 4)):
            action = rng.choice(("edit", "edit", "add", "remove"))
            path = rng.choice(sorted(notes)) if action != "add" or not notes else f"n{rng.randrange(100):02d}.md"
            if action == "remove" and len(notes) > 2:
                del notes[path]
            else:
                notes[path] = new_note(rng, path, vectors)
            edited.add(path)
        related = update_related(store, notes_digest(before), notes, notes_digest(notes), edited, vectors, settings)
        full = related_notes(notes, vectors, settings)
        assert isinstance(related.neighbours, RelatedLists)
        assert {p: related.neighbours.get(p) for p in full} == full  # read one by one, from the store
        assert every_list(related.neighbours) == full
        moved = {p for p in edited if p in full}
        assert related.changed == {p for p in full.keys() | full_before.keys()
                                   if full.get(p, []) != full_before.get(p, [])} | (full_before.keys() - full.keys())
        assert related.holding == lists_holding(full, moved)


def test_a_store_of_other_notes_or_settings_is_not_used(tmp_path):
    rng = random.Random(1)
    vectors: dict[str, np.ndarray] = {}
    notes = {p: new_note(rng, p, vectors) for p in ("a.md", "b.md", "c.md", "d.md")}
    store = tmp_path / "related.sqlite"
    settings = Settings(related_min_cosine=0.0, related_max=2)
    update_related(store, "", notes, notes_digest(notes), notes, vectors, settings)
    assert update_related(store, "other notes", notes, notes_digest(notes), (), vectors, settings).changed is None
    other = Settings(related_min_cosine=0.0, related_max=3)
    found = update_related(store, notes_digest(notes), notes, notes_digest(notes), (), vectors, other)
    assert found.changed is None and every_list(found.neighbours) == related_notes(notes, vectors, other)
    found = update_related(store, notes_digest(notes), notes, notes_digest(notes), (), vectors, other)
    assert found.changed == set() and every_list(found.neighbours) == related_notes(notes, vectors, other)


def test_an_unreadable_store_is_written_again(tmp_path):
    rng = random.Random(2)
    vectors: dict[str, np.ndarray] = {}
    notes = {p: new_note(rng, p, vectors) for p in ("a.md", "b.md", "c.md")}
    store = tmp_path / "related.sqlite"
    settings = Settings(related_min_cosine=0.0, related_max=2)
    store.write_bytes(b"not a database")
    found = update_related(store, "", notes, notes_digest(notes), notes, vectors, settings)
    assert every_list(found.neighbours) == related_notes(notes, vectors, settings)
    assert not Path(f"{store}-wal").exists()  # every connection closed: the log checkpointed
    with closing(sqlite3.connect(store)) as db:
        assert db.execute("SELECT count(*) FROM notes").fetchone()[0] == sum(1 for n in notes.values() if n.sections)
