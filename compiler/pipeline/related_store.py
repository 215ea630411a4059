"""Related notes on disk: `related.sqlite` beside `graph.sqlite`, a row per note.

A row holds the note's mean section vector (scaled to length 1, as raw bytes), its related list
as the last build made it and the cosine a note must reach to enter that list (its `floor`); a
second table says which lists hold which note. After an edit `compiler.pipeline.graph.update_related`
reads every mean (the neighbour search compares the edited notes with all of them) and the floors,
but only the lists it may change, and writes only the rows that moved. It was `related.npz`, read
and written whole: 3.3 s CPU of a compile after one edit at 100,000 notes.

The store is derived data (compiler.core.derived_sqlite): the `key` it records names the notes it
was made for (`notes_digest`) and the settings; a key that does not match the last build's notes
(a crash between this and the build state, a rebuild) or a file SQLite cannot read makes the
caller compute every list and write the store whole.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import closing
from pathlib import Path

import numpy as np

from compiler.core.derived_sqlite import connect_derived
from compiler.core.errors import full_disk_guard
from compiler.core.space import is_disk_full

SCHEMA = ("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
          # near: the list as JSON [[path, cosine], ...], best first; floor: what an offered note must reach
          "CREATE TABLE IF NOT EXISTS notes (path TEXT PRIMARY KEY, floor REAL NOT NULL, near TEXT NOT NULL, "
          "mean BLOB NOT NULL)",
          "CREATE TABLE IF NOT EXISTS holds (other TEXT NOT NULL, source TEXT NOT NULL, "
          "PRIMARY KEY (other, source)) WITHOUT ROWID")
LAYOUT = "1"  # recorded with the key: a store of another layout is written whole
_BATCH = 500  # paths per `IN (…)`: under SQLite's limit of bound values

Near = list[tuple[str, float]]


def related_store(graph: Path) -> Path:
    """Returns where the related notes of the graph store at `graph` live."""
    return graph.with_name("related.sqlite")


def load_means(path: Path, key: str) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """Returns (paths sorted, their unit means as the rows of one matrix, their floors as float32)
    when the store holds the notes named by `key`; else None (missing, other notes, unreadable)."""
    if not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            meta = dict(db.execute("SELECT key, value FROM meta"))
            if meta.get("key") != f"{LAYOUT} {key}":
                return None
            dtype, width = json.loads(meta["shape"])
            rows = db.execute("SELECT path, floor, mean FROM notes").fetchall()
    except (sqlite3.Error, ValueError, KeyError, TypeError):
        return None
    rows.sort(key=lambda row: row[0])
    matrix = np.frombuffer(b"".join(row[2] for row in rows), dtype=np.dtype(dtype)).reshape(len(rows), width)
    return [row[0] for row in rows], matrix, np.array([row[1] for row in rows], np.float32)


def load_lists(path: Path, paths: Collection[str]) -> dict[str, Near]:
    """Returns the stored related list of each of `paths` the store holds."""
    found: dict[str, Near] = {}
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
        for batch in _batches(sorted(paths)):
            query = f"SELECT path, near FROM notes WHERE path IN ({','.join('?' * len(batch))})"
            found.update((p, _decode(near)) for p, near in db.execute(query, batch))
    return found


def holders(path: Path, others: Collection[str]) -> set[str]:
    """Returns the notes whose stored list holds one of `others`."""
    found: set[str] = set()
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
        for batch in _batches(sorted(others)):
            query = f"SELECT source FROM holds WHERE other IN ({','.join('?' * len(batch))})"
            found.update(source for (source,) in db.execute(query, batch))
    return found


def save_related(path: Path, key: str, matrix: np.ndarray, rows: Mapping[str, int], lists: Mapping[str, Near],
                 floors: Mapping[str, float], *, means: Collection[str], gone: Collection[str], whole: bool) -> None:
    """Writes the lists of `lists` (with their `floors`), the means of the notes in `means` (row
    `rows[p]` of `matrix`) and drops the notes `gone`; with `whole`, the store is emptied first and
    every note of `rows` must be in `lists` and `means`. Records `key`, for the notes as they are now."""
    with full_disk_guard(path, "the related notes", after="the next compile writes them again"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name("related.npz").unlink(missing_ok=True)  # what this store replaces
        try:
            _save(path, key, matrix, rows, lists, floors, means, gone, whole)
        except sqlite3.DatabaseError as error:
            if is_disk_full(error, path) or not whole:  # a damaged file on an update: the caller starts over
                raise
            for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):  # unreadable: made again
                stale.unlink(missing_ok=True)
            _save(path, key, matrix, rows, lists, floors, means, gone, whole)


def _save(path: Path, key: str, matrix: np.ndarray, rows: Mapping[str, int], lists: Mapping[str, Near],
          floors: Mapping[str, float], means: Collection[str], gone: Collection[str], whole: bool) -> None:
    with closing(connect_derived(path)) as db, db:
        for statement in SCHEMA:
            db.execute(statement)
        if whole:
            db.execute("DELETE FROM notes")
            db.execute("DELETE FROM holds")
        else:
            for batch in _batches(sorted({*gone, *lists})):
                marks = ",".join("?" * len(batch))
                db.execute(f"DELETE FROM holds WHERE source IN ({marks})", batch)
            db.executemany("DELETE FROM notes WHERE path = ?", ((p,) for p in sorted(gone)))
        db.executemany("INSERT OR REPLACE INTO notes VALUES (?, ?, ?, ?)",
                       ((p, floors[p], _encode(lists[p]), matrix[rows[p]].tobytes()) for p in sorted(means)))
        db.executemany("UPDATE notes SET floor = ?, near = ? WHERE path = ?",
                       ((floors[p], _encode(near), p) for p, near in sorted(lists.items()) if p not in means))
        db.executemany("INSERT INTO holds VALUES (?, ?)",
                       ((other, p) for p, near in sorted(lists.items()) for other, _ in near))
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       (("key", f"{LAYOUT} {key}"), ("shape", json.dumps([matrix.dtype.str, matrix.shape[1]]))))


def _encode(near: Near) -> str:
    return json.dumps(near, ensure_ascii=False, separators=(",", ":"))  # a float's repr: read back exactly


def _decode(text: str) -> Near:
    return [(other, cosine) for other, cosine in json.loads(text)]


def _batches(paths: Sequence[str]) -> Iterator[Sequence[str]]:
    for start in range(0, len(paths), _BATCH):
        yield paths[start:start + _BATCH]


class RelatedLists(Mapping[str, Near]):
    """Every note's related list: those this build computed in memory, the others read from the
    store when first asked for (a page rendered after an edit asks for a few of 100,000)."""

    def __init__(self, path: Path, paths: Sequence[str], known: Mapping[str, Near]) -> None:
        self._path, self._order, self._known = path, paths, dict(known)
        self._paths = frozenset(paths)

    def __getitem__(self, note: str) -> Near:
        found = self._known.get(note)
        if found is None:
            if note not in self._paths:
                raise KeyError(note)
            found = self._known[note] = load_lists(self._path, [note]).get(note, [])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, note: object) -> bool:
        return note in self._paths

    def whole(self) -> dict[str, Near]:
        """Returns every list as a dict, the stored ones read in one pass (a build that renders every page)."""
        missing = [p for p in self._order if p not in self._known]
        if missing:
            with closing(sqlite3.connect(f"{self._path.resolve().as_uri()}?mode=ro", uri=True)) as db:
                stored = dict(db.execute("SELECT path, near FROM notes"))
            self._known.update((p, _decode(stored[p])) for p in missing)
        return {p: self._known[p] for p in self._order}
