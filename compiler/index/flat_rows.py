"""A flat store's files as a process reads them (compiler.index.flat): the SQLite file (its schema,
its state, the rows by id) and the row file, memory-mapped, held per store and generation as a
`Snapshot` that this process's own writes bring forward in place."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compiler.index import flat_query
from compiler.index.flat_query import Group, grown

SQL_BATCH = 500  # SQLite caps the variables of one statement
STATE_KEYS = ("uid", "generation", "rows", "dead", "dim", "file", "mirror_all")
TAIL_MAX = 4096  # rows a process keeps in memory after its own appends before it maps the file again

SCHEMA = """
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, row INTEGER NOT NULL, document TEXT NOT NULL,
                                  metadata TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS unmirrored (id TEXT PRIMARY KEY);
CREATE INDEX IF NOT EXISTS items_path ON items (json_extract(metadata, '$.path'), id);
CREATE INDEX IF NOT EXISTS items_project ON items (json_extract(metadata, '$.project'), row);
CREATE INDEX IF NOT EXISTS items_project_kind ON items (json_extract(metadata, '$.project'),
                                                        json_extract(metadata, '$.kind'), row);
"""  # the indexes (covering): what compile deletes by (a note's sections), recall filters on (a project)
# and a write resolves against (its project and kind). A store made before one of them gets it on
# its next write; until then a read of it filters the slow way, with the same answer.


@dataclass
class Snapshot:
    """What a reader sees of a store at one generation."""

    key: tuple[str, int] = ("", -1)  # (the store's identity, generation)
    file: str = ""
    dim: int = 0
    mapped: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))  # the first rows
    # The rows this process appended since it mapped the file, kept in memory: mapping the file
    # again on every write made the next read fault in every page it touched (12 ms for one
    # project's 2,500 rows of a 50,000-row store). Mapped again once the tail grows (TAIL_MAX).
    tail: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    ids: list[str | None] = field(default_factory=list)  # per row; None for a dead row
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    row_of: dict[str, int] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)  # the rows of each `where` asked (flat_query.matching)
    clock: int = 0  # counts the groups' queries: which matrix was used least recently

    @property
    def live(self) -> int:
        return len(self.row_of)

    def whole(self, folder: Path) -> np.ndarray:
        """Returns every row as one matrix, the file mapped again first if there is a tail: a full
        scan then computes the same floats a fresh read does."""
        if len(self.tail):
            self.mapped = map_rows(folder / self.file, len(self.ids), self.dim)  # before the tail goes: see take
            self.tail = np.zeros((0, self.dim), dtype=np.float32)
        return self.mapped

    def take(self, rows: np.ndarray) -> np.ndarray:
        """Returns the vectors of `rows` (ascending), as one matrix."""
        split = int(np.searchsorted(rows, len(self.mapped)))
        if split == len(rows):
            return self.mapped[rows]
        return np.vstack([self.mapped[rows[:split]], self.tail[rows[split:] - len(self.mapped)]])

    def vectors_of(self, group: Group) -> np.ndarray:
        """Returns the vectors of `group`'s rows as one matrix: kept with the group (gathered on
        first use) while this store's kept matrices stay within GROUP_CACHE_BYTES, the least
        recently used ones dropped first; gathered for this query alone past that."""
        self.clock += 1
        group.used = self.clock
        if group.matrix is not None:
            return group.matrix
        matrix = np.ascontiguousarray(self.take(group.rows), dtype=np.float32)
        if group not in self.groups.values():
            return matrix  # a where that is not kept (not on text values)
        kept = sorted((g for g in self.groups.values() if g.matrix is not None), key=lambda g: g.used)
        total = sum(g.nbytes for g in kept) + matrix.nbytes
        for old in kept:
            if total <= flat_query.GROUP_CACHE_BYTES:
                break
            total -= old.nbytes
            old.matrix = None
        if total <= flat_query.GROUP_CACHE_BYTES:
            group.matrix = matrix
        return matrix

    def row(self, row: int) -> np.ndarray:
        return np.array(self.mapped[row] if row < len(self.mapped) else self.tail[row - len(self.mapped)])


EMPTY = Snapshot()
SEEN: dict[str, Snapshot] = {}  # store file → what this process last read of it


def load_snapshot(db: sqlite3.Connection, path: Path, folder: Path) -> Snapshot:
    """Returns the snapshot of the store at `path` (its row files in `folder`) at the generation `db`
    reads: the one this process already holds when it is current, else read and mapped now."""
    state = checked_state(db)
    key = (str(state["uid"]), int(state["generation"]))
    seen = SEEN.get(str(path))
    if seen is not None and seen.key == key:
        return seen
    rows, dim, file = int(state["rows"]), int(state["dim"]), str(state["file"])
    ids: list[str | None] = [None] * rows
    for row, item in db.execute("SELECT row, id FROM items"):
        ids[row] = item
    snap = Snapshot(key, file, dim, map_rows(folder / file, rows, dim), np.zeros((0, dim), np.float32), ids)
    snap.alive = np.array([i is not None for i in ids], dtype=bool)
    snap.row_of = {i: r for r, i in enumerate(ids) if i is not None}
    SEEN[str(path)] = snap
    return snap


def advance_snapshot(path: Path, folder: Path, before: dict[str, Any], after: dict[str, Any],
                     changes: dict[str, int | None], appended: tuple[int, np.ndarray, list[dict[str, Any]]] | None
                     ) -> None:
    """Brings this process's snapshot from `before` to `after` with the changes it just wrote
    (O(changes), not O(store)); a snapshot from another generation, or a new row file, is dropped.
    `appended`: (first row, vectors, metadatas) of the rows the write appended, None if none."""
    key = str(path)
    seen = SEEN.pop(key, None)
    if seen is None or seen.key != (str(before["uid"]), int(before["generation"])) or after["file"] != seen.file:
        return
    rows, dim = int(after["rows"]), int(after["dim"])
    seen.ids.extend([None] * (rows - len(seen.ids)))
    seen.alive = np.concatenate([seen.alive, np.zeros(rows - len(seen.alive), dtype=bool)])
    for item, row in changes.items():
        old = seen.row_of.pop(item, None)
        if old is not None:
            seen.ids[old], seen.alive[old] = None, False
        if row is not None:
            seen.ids[row], seen.alive[row], seen.row_of[item] = item, True, row
    seen.key, seen.dim = (str(after["uid"]), int(after["generation"])), dim
    have = len(seen.mapped) + len(seen.tail)
    if rows != have:
        # Only this write's own append (right after the rows seen) can be extended in memory.
        follows = appended is not None and appended[0] == have and have + len(appended[1]) == rows
        if follows:
            for group in seen.groups.values():
                group.extend(have, appended[1], appended[2])  # type: ignore[index]
        else:
            seen.groups = {}
        if (follows and len(seen.mapped) and seen.mapped.shape[1] == dim
                and len(seen.tail) + len(appended[1]) <= TAIL_MAX):  # type: ignore[index]
            seen.tail = grown(seen.tail, appended[1])  # type: ignore[index]
        else:
            seen.mapped, seen.tail = map_rows(folder / seen.file, rows, dim), np.zeros((0, dim), np.float32)
    SEEN[key] = seen


def read_state(db: sqlite3.Connection) -> dict[str, Any]:
    return dict(db.execute("SELECT key, value FROM state"))


def checked_state(db: sqlite3.Connection) -> dict[str, Any]:
    """Returns the state, raising KeyError when a key is missing (a damaged store: it reads as empty)."""
    state = read_state(db)
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        raise KeyError(f"the store's state lacks {', '.join(missing)}")
    return state


def set_state(db: sqlite3.Connection, **values: Any) -> None:
    db.executemany("INSERT OR REPLACE INTO state VALUES (?, ?)", list(values.items()))


def select(db: sqlite3.Connection | None, columns: str, ids: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    assert db is not None
    for start in range(0, len(ids), SQL_BATCH):
        batch = list(ids[start:start + SQL_BATCH])
        yield from db.execute(f"SELECT {columns} FROM items WHERE id IN ({','.join('?' * len(batch))})", batch)


def map_rows(path: Path, rows: int, dim: int) -> np.ndarray:
    """Maps the committed rows of a row file, read-only; rows past them (a torn append) are not mapped."""
    if rows == 0 or dim == 0:
        return np.zeros((0, dim), dtype=np.float32)
    if path.stat().st_size < rows * dim * 4:
        raise ValueError(f"{path}: shorter than its committed rows")
    return np.memmap(path, dtype=np.float32, mode="r", shape=(rows, dim))
