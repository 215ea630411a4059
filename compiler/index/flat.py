"""The flat vector store: exact cosine search over a memory-mapped row file, without Chroma.

Chroma's embedded client writes its SQLite file and HNSW segments on every open, even to read
(chroma-core/chroma#1438), and importing chromadb was most of a cold query's time. So in the
embedded mode each collection lives here, in `.engram/cache/flat/`, and Chroma is a mirror that
compile brings in step (`compiler.index.vector_index`):

    NAME.sqlite     id → row, each row's document and metadata (JSON), the rows not yet mirrored
                    to Chroma, and the store's state: committed rows, width, row file, generation
    NAME.GEN.f32    the rows: float32 unit vectors back to back, no header

Reads open the SQLite file with `mode=ro` and memory-map the row file: a read writes not a byte
and not an mtime. Every live row is scored (brute force, exact: the ranking can only be better
than HNSW's), which takes milliseconds at 50,000 rows.

Writes (the caller holds the vault's writer lock) only append. The new rows go after the
committed ones and are fsync'd; then one SQLite transaction (synchronous=NORMAL: see `_writer`)
points the ids at them and raises the committed row count. A crash in between leaves rows past the count: never read, cut off by
the next write. An overwritten or deleted id leaves a dead row; when dead rows outnumber live
ones (and COMPACT_MIN), the same transaction copies the live rows to a new file and names it
(readers that mapped the old one keep reading it; it is unlinked after the commit). So a write
costs its own rows, and compaction is amortised over the writes that made the dead rows.

A process keeps what it read (the row ids, the map) per store, keyed by the store's identity and
generation: the MCP server reloads only after another process wrote, and its own writes update
it in place.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.errors import DERIVED, CorruptDataError, InputError, full_disk_guard
from compiler.core.files import fsync_folder, write_after
from compiler.index.blas import one_thread
from compiler.index.flat_query import best_of, matching, query_rows, unit_rows
from compiler.index.flat_rows import (
    EMPTY,
    SCHEMA,
    SQL_BATCH,
    Snapshot,
    advance_snapshot,
    checked_state,
    load_snapshot,
    map_rows,
    read_state,
    select,
    set_state,
)
from compiler.index.vectors import VectorHit

FOLDER = "flat"  # in .engram/cache
COMPACT_MIN = 1024  # dead rows tolerated whatever the live count: small stores are never rewritten
_QUERY_BLOCK = 256  # query rows scored at once: 256 × 50,000 × 4 bytes = 51 MB
_BUSY_SECONDS = 60.0


def store_path(cache_dir: Path, name: str) -> Path:
    """Returns the SQLite file of collection `name`; the store exists when this file does."""
    return cache_dir / FOLDER / f"{name}.sqlite"


def stores(cache_dir: Path) -> list[FlatStore]:
    """Returns every flat store under `cache_dir`, by name."""
    return [FlatStore(cache_dir, p.stem) for p in sorted((cache_dir / FOLDER).glob("*.sqlite"))]


class FlatStore:
    """One collection: query / query_many / vectors / count like `VectorStore`, and append-only writes.

    Missing or unreadable, it reads as empty (`usable()` tells which); the first write creates it.
    """

    def __init__(self, cache_dir: Path, name: str) -> None:
        self.name = name
        self.path = store_path(cache_dir, name)
        self._folder = self.path.parent
        self._db: sqlite3.Connection | None = None
        self._writable = False
        # (first row, vectors, metadatas) of the rows the write in progress appends
        self._appended: tuple[int, np.ndarray, list[dict[str, Any]]] | None = None

    # -- reading ---------------------------------------------------------------------------

    def usable(self) -> bool:
        """True when the store exists and reads (a fresh clone or an old cache has none)."""
        return self._snapshot() is not EMPTY

    def count(self) -> int:
        return self._snapshot().live

    def query(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None) -> list[VectorHit]:
        """Returns up to `n` nearest rows (of those matching `where`), best first, with their cosine."""
        with self._reading() as (db, snap):
            if n <= 0 or not snap.live:
                return []
            query = query_rows(vector[None, :], snap.dim, self.path)[0]
            if where is None:
                candidates = np.flatnonzero(snap.alive)
                with one_thread():
                    scores = (snap.whole(self._folder) @ query)[candidates]
            else:  # only the matching rows are scored, from their kept matrix: a project is a 20th of the store
                group = matching(db, snap.groups, where)
                keep = group.live(snap.alive)
                matrix = snap.vectors_of(group)
                candidates = group.rows[keep]
                with one_thread():
                    scores = (matrix @ query)[keep]
            best = best_of(scores, n)
            ids = [snap.ids[r] for r in candidates[best]]
            found = {i: (d, m) for i, d, m in select(db, "id, document, metadata", ids)}
        return [VectorHit(i, float(c), json.loads(found[i][1]), found[i][0])  # type: ignore[index]
                for i, c in zip(ids, scores[best]) if i in found]

    def query_many(self, vectors: np.ndarray, n: int, where: dict[str, Any] | None = None
                   ) -> list[list[tuple[str, float]]]:
        """Returns, for each row of `vectors`, up to `n` nearest (id, cosine) of the rows matching
        `where` (all rows without it), best first.

        With `where`, only the matching rows are read and scored: resolving a write against its
        own project's memories costs that project's rows, not the whole store's (a single query
        read all 77 MB of a 50,000-row store)."""
        with self._reading() as (db, snap):
            if not snap.live or len(vectors) == 0:
                return [[] for _ in range(len(vectors))]
            queries = query_rows(vectors, snap.dim, self.path)
            group = None if where is None else matching(db, snap.groups, where)
        keep = snap.alive if group is None else group.live(snap.alive)
        rows = np.flatnonzero(keep) if group is None else group.rows[keep]
        if not len(rows):
            return [[] for _ in range(len(vectors))]
        # rows ascending: ties go by row
        matrix = snap.whole(self._folder) if group is None else snap.vectors_of(group)
        found: list[list[tuple[str, float]]] = []
        for start in range(0, len(queries), _QUERY_BLOCK):
            block = queries[start:start + _QUERY_BLOCK]
            if group is None:
                scores = block @ matrix.T
                scores[:, ~snap.alive] = -np.inf
            else:
                with one_thread():  # a few rows: waking BLAS threads cost 10× the product on a busy machine
                    scores = (matrix @ block.T).T[:, keep]
            for row in scores:
                top = best_of(row, min(n, len(rows)))
                found.append([(snap.ids[r], float(row[k])) for k, r in  # type: ignore[misc]
                              zip(top, top if where is None else rows[top])])
        return found

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Returns the stored (unit) vector of each known id, read in one step (`Snapshot.take`): one
        copy of a row at a time cost ~7 µs each, most of reading a few hundred."""
        snap = self._snapshot()
        row_of = snap.row_of
        known = [(i, r) for i in ids if (r := row_of.get(i)) is not None]
        if not known:
            return {}
        rows = np.fromiter((r for _, r in known), dtype=np.int64, count=len(known))
        order = np.argsort(rows, kind="stable")
        matrix = np.empty((len(rows), snap.dim), dtype=np.float32)
        matrix[order] = snap.take(rows[order])  # take wants the rows ascending
        return dict(zip((i for i, _ in known), matrix))

    def ids(self) -> list[str]:
        return sorted(self._snapshot().row_of)

    def records(self, ids: Sequence[str]) -> dict[str, tuple[np.ndarray, str, dict[str, Any]]]:
        """Returns (vector, document, metadata) of each known id: what a mirror copies."""
        with self._reading() as (db, snap):
            return {i: (snap.row(snap.row_of[i]), d, json.loads(m))
                    for i, d, m in select(db, "id, document, metadata", ids) if i in snap.row_of}

    def unmirrored(self) -> tuple[bool, list[str]]:
        """Returns (whether Chroma must be rebuilt whole, the ids changed since it was last in step)."""
        try:
            with self._reading() as (db, _):
                if db is None:
                    return False, []
                everything = bool(read_state(db).get("mirror_all", 1))
                return everything, [i for (i,) in db.execute("SELECT id FROM unmirrored ORDER BY id")]
        except sqlite3.DatabaseError:
            return True, []

    def _snapshot(self) -> Snapshot:
        with self._reading() as (_, snap):
            return snap

    @contextmanager
    def _reading(self) -> Iterator[tuple[sqlite3.Connection | None, Snapshot]]:
        """Yields (the connection, the current snapshot) inside one read transaction: a writer cannot
        commit (nor unlink a compacted file) between reading the state and mapping the rows."""
        db = self._connection()
        if db is None:
            yield None, EMPTY
            return
        try:
            db.execute("BEGIN")
            snap = load_snapshot(db, self.path, self._folder)
        except (sqlite3.DatabaseError, OSError, ValueError, KeyError, TypeError):
            if db.in_transaction:
                db.execute("ROLLBACK")
            yield None, EMPTY  # damaged: reads as empty, and the next reset rebuilds it
            return
        try:
            yield db, snap
        finally:
            if db.in_transaction:
                db.execute("COMMIT")

    def _connection(self) -> sqlite3.Connection | None:
        if self._db is None:
            if not self.path.is_file():
                return None
            try:
                self._db = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                           isolation_level=None, timeout=_BUSY_SECONDS, check_same_thread=False)
            except sqlite3.Error:
                return None
        return self._db


    # -- writing (the caller holds the writer lock) ---------------------------------------------

    def add(self, ids: Sequence[str], vectors: np.ndarray, documents: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        """Writes (or overwrites) rows: appended after the committed ones, then committed in one transaction."""
        if not len(ids):
            return
        last = {i: k for k, i in enumerate(ids)}  # an id given twice: its last row wins, like an upsert
        keep = sorted(last.values())
        unit = unit_rows(np.asarray(vectors, dtype=np.float32)[keep])
        items = [(ids[k], documents[k], json.dumps(metadatas[k], sort_keys=True, ensure_ascii=False)) for k in keep]
        needed = unit.nbytes + sum(len(d) + len(m) for _, d, m in items)
        with self._writing(needed) as (db, state, changes):
            dim = int(state["dim"]) or unit.shape[1]
            if unit.shape[1] != dim:
                raise InputError(f"the store holds {dim}-dimensional vectors, not {unit.shape[1]} "
                                 "(a new model: run `engram compile`)", path=str(self.path))
            rows = int(state["rows"])
            replaced = sum(1 for _ in select(db, "id", [i for i, _, _ in items]))  # their old rows die
            write_after(self._folder / str(state["file"]), rows * dim * 4, np.ascontiguousarray(unit, dtype=np.float32).tobytes())
            self._appended = (rows, unit, [metadatas[k] for k in keep])
            db.executemany("INSERT INTO items (id, row, document, metadata) VALUES (?, ?, ?, ?) ON CONFLICT (id) "
                           "DO UPDATE SET row = excluded.row, document = excluded.document, metadata = excluded.metadata",
                           [(i, rows + k, d, m) for k, (i, d, m) in enumerate(items)])
            db.executemany("INSERT OR IGNORE INTO unmirrored VALUES (?)", [(i,) for i, _, _ in items])
            set_state(db, rows=rows + len(items), dim=dim, dead=int(state["dead"]) + replaced)
            changes.update((i, rows + k) for k, (i, _, _) in enumerate(items))

    def delete_ids(self, ids: Sequence[str]) -> None:
        if not len(ids) or not self.path.is_file():
            return
        with self._writing() as (db, state, changes):
            dead = int(state["dead"])
            for start in range(0, len(ids), SQL_BATCH):
                batch = list(ids[start:start + SQL_BATCH])
                dead += db.execute(f"DELETE FROM items WHERE id IN ({','.join('?' * len(batch))})", batch).rowcount
            set_state(db, dead=dead)
            db.executemany("INSERT OR IGNORE INTO unmirrored VALUES (?)", [(i,) for i in ids])
            changes.update((i, None) for i in ids)

    def delete_paths(self, paths: Sequence[str]) -> None:
        """Deletes the rows whose metadata `path` is one of `paths` (a note's sections)."""
        if not len(paths) or not self.path.is_file():
            return
        db = self._writer()
        found: list[str] = []
        for start in range(0, len(paths), SQL_BATCH):
            batch = list(paths[start:start + SQL_BATCH])
            found += [i for (i,) in db.execute("SELECT id FROM items WHERE json_extract(metadata, '$.path') "
                                               f"IN ({','.join('?' * len(batch))})", batch)]
        self.delete_ids(found)

    def reset(self) -> None:
        """Drops every row (a new model makes them all meaningless); Chroma is then rebuilt whole.

        The rows move to a new (empty) file: a file others may have mapped is never cut short."""
        try:
            with self._writing() as (db, state, _):
                db.execute("DELETE FROM items")
                db.execute("DELETE FROM unmirrored")
                set_state(db, rows=0, dead=0, dim=0, mirror_all=1, file=f"{self.name}.{int(state['generation']) + 1}.f32")
        except (sqlite3.DatabaseError, CorruptDataError, KeyError, ValueError):  # damaged: start over (it is derived)
            self.close()
            for path in [self.path, self.path.with_name(self.path.name + "-journal"), *self._row_files()]:
                path.unlink(missing_ok=True)
            self._writer()

    def mirrored(self, everything: bool, ids: Sequence[str]) -> None:
        """Records that Chroma holds `ids` as this store does (and, with `everything`, all of it)."""
        with self._writing(bump=False) as (db, _, _):
            for start in range(0, len(ids), SQL_BATCH):
                batch = list(ids[start:start + SQL_BATCH])
                db.execute(f"DELETE FROM unmirrored WHERE id IN ({','.join('?' * len(batch))})", batch)
            if everything:
                set_state(db, mirror_all=0)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db, self._writable = None, False

    def _writer(self) -> sqlite3.Connection:
        if not self._writable:
            self.close()
            with full_disk_guard(self.path, "the vector index", after=DERIVED):
                self._folder.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, isolation_level=None, timeout=_BUSY_SECONDS, check_same_thread=False)
                # NORMAL, not FULL: FULL synced the rollback journal twice and the file once on every
                # commit, most of a one-memory write's I/O. NORMAL syncs each once, at the moments that
                # keep the file consistent (SQLite: corruption only on old filesystems, at a very unlucky
                # instant); the rows a commit names are fsync'd before it, and the store is derived: a
                # damaged one reads as empty and is rebuilt. OFF would leave a power cut free to corrupt it.
                db.execute("PRAGMA synchronous=NORMAL")
                try:
                    db.execute("BEGIN IMMEDIATE")
                    for statement in SCHEMA.split(";"):  # not executescript: it would commit
                        if statement.strip():
                            db.execute(statement)
                    if not read_state(db):
                        set_state(db, uid=uuid.uuid4().hex, generation=0, rows=0, dead=0, dim=0,
                             file=f"{self.name}.0.f32", mirror_all=1)
                    db.execute("COMMIT")
                except BaseException:
                    db.close()
                    raise
            self._db, self._writable = db, True
        return self._db  # type: ignore[return-value]

    @contextmanager
    def _writing(self, needed: int = 0, bump: bool = True
                 ) -> Iterator[tuple[sqlite3.Connection, dict[str, Any], dict[str, int | None]]]:
        """One write transaction: yields (connection, state, changes: id → its new row, None when
        deleted, filled by the caller); bumps the generation, compacts when dead rows outnumber
        live ones, commits, then unlinks the row files no longer named."""
        db = self._writer()
        changes: dict[str, int | None] = {}
        self._appended = None
        with full_disk_guard(self.path, "the vector index", needed=needed, after=DERIVED):
            db.execute("BEGIN IMMEDIATE")
            try:
                try:
                    before = checked_state(db)
                except KeyError as error:  # reads see it as empty, so every caller resets it before writing
                    raise CorruptDataError(f"{error.args[0]}; delete it and run `engram compile`",
                                           path=str(self.path)) from error
                yield db, before, changes
                if bump:
                    set_state(db, generation=int(before["generation"]) + 1)
                    self._compact_if_due(db)
                after = read_state(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # a failed COMMIT (a full disk) may have rolled back already
                    db.execute("ROLLBACK")
                raise
        if bump:
            appended, self._appended = self._appended, None
            advance_snapshot(self.path, self._folder, before, after, changes, appended)
        for stale in self._row_files():
            if stale.name != str(after["file"]):
                stale.unlink(missing_ok=True)


    def _compact_if_due(self, db: sqlite3.Connection) -> None:
        """Copies the live rows to a new file when dead ones outnumber them (and COMPACT_MIN)."""
        state = read_state(db)
        rows, dim, generation, dead = (int(state[k]) for k in ("rows", "dim", "generation", "dead"))
        if dead <= max(rows - dead, COMPACT_MIN):  # counted as they die: no scan per write
            return
        order = list(db.execute("SELECT id, row FROM items ORDER BY row"))
        old = map_rows(self._folder / str(state["file"]), rows, dim)
        name = f"{self.name}.{generation}.f32"
        with open(self._folder / name, "wb") as handle:
            handle.writelines(old[[r for _, r in order[start:start + 4096]]].tobytes()  # bounded memory
                              for start in range(0, len(order), 4096))
            handle.flush()
            os.fsync(handle.fileno())
        fsync_folder(self._folder)
        db.executemany("UPDATE items SET row = ? WHERE id = ?", [(k, i) for k, (i, _) in enumerate(order)])
        set_state(db, rows=len(order), dead=0, file=name)

    def _row_files(self) -> list[Path]:
        pattern = re.compile(rf"{re.escape(self.name)}\.\d+\.f32")
        return [p for p in self._folder.glob(f"{self.name}.*.f32") if pattern.fullmatch(p.name)]
