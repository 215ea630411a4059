"""The token-vector cache (late interaction): int8 matrices in an append-only file, found by slicing.

Beside the embedding cache's SQLite file (`embeddings.sqlite`):

    table token_rows_i8     key (64 bits of sha256(model, text hash)) → model, text hash, and
                            where the text's matrix lies in the file (byte offset, byte length)
    table token_file_i8     one row: the file's name and its committed end
    embeddings.tokens.UID.i8    the matrices back to back, no header, memory-mapped to read

Why not a BLOB per text, as before: a recall reads the matrices of about 1,000 texts (its
candidates and their conversational neighbours), and SQLite found each behind a 64-character
text key and read it from overflow pages, then numpy wrapped it: ~10 ms of a 60 ms recall at
50,000 memories. Here a lookup is an integer key and a matrix is a view of the mapped file.

Writes append after the committed end and fsync, then commit the rows that name the new bytes, all
inside one SQLite write transaction: it serialises writers, and each appends at the end it read
inside it. A crash in between leaves bytes past the end, never read, cut off by the next write.
The file is derived like the rest of the cache: missing or shorter than its end, it reads as
empty (the texts are embedded again), and the next write starts a new file under a new name, so
a reader still mapping the old one never reads new bytes at old offsets.

A cache written before this file existed keeps its matrices as BLOBs in `token_vectors_i8`: the
first writable open moves them into the file (one transaction, then the table is dropped); a
read-only open (a search of a vault not compiled since) reads them there.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from compiler.core.derived_sqlite import connect_derived, connect_readonly
from compiler.core.errors import DERIVED, full_disk_guard
from compiler.index.cache import EmbeddingCache

ROWS = "token_rows_i8"  # a new name when the stored form changes
FILE = "token_file_i8"
LEGACY = "token_vectors_i8"  # the BLOB table of older caches
_SQL_BATCH = 500  # SQLite caps the variables of one statement
_MOVE_BATCH = 2048  # legacy rows moved per append: bounded memory


class TokenVectorCache:
    """int8 token-vector matrices keyed by (model identity, text hash); `EmbeddingCache`'s
    get_many / known / put_many / close, each matrix flat (the caller knows its width)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self._path, self._folder = path, path.parent
        self._mapped: tuple[str, np.ndarray] = ("", np.zeros(0, dtype=np.int8))  # file name, its committed bytes
        self._legacy: EmbeddingCache | None = None
        if readonly:  # a search: never writes, works on a read-only vault; a missing table reads as empty
            self._db = connect_readonly(path)
            self._db.isolation_level = None
            self._absent = not _exists(self._db, ROWS)
            if _exists(self._db, LEGACY):
                self._legacy = EmbeddingCache(path, LEGACY, np.int8, readonly=True)
            return
        self._absent = False
        with full_disk_guard(path, "the embedding cache", after=DERIVED):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = connect_derived(path)
            self._db.isolation_level = None  # transactions are explicit: a write spans the file and the rows
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {ROWS} (key INTEGER PRIMARY KEY, model TEXT NOT NULL, "
                             "text_sha TEXT NOT NULL, start INTEGER NOT NULL, size INTEGER NOT NULL)")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {FILE} (name TEXT NOT NULL, end INTEGER NOT NULL)")
            if _exists(self._db, LEGACY):
                self._migrate()

    # -- reading -------------------------------------------------------------------------------

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found, data = self._lookup(model, hashes)
        matrices = {sha: data[start:start + size] for sha, (start, size) in found.items()}
        if self._legacy is not None and len(matrices) < len(set(hashes)):
            matrices.update(self._legacy.get_many(model, [h for h in hashes if h not in matrices]))
        return matrices

    def known(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Returns which of `hashes` are cached (and readable)."""
        found = set(self._lookup(model, hashes)[0])
        if self._legacy is not None:
            found |= self._legacy.known(model, [h for h in hashes if h not in found])
        return found

    def _lookup(self, model: str, hashes: Sequence[str]) -> tuple[dict[str, tuple[int, int]], np.ndarray]:
        """Returns ({text hash: (offset, length)} of the cached ones, the mapped file), both of one
        read transaction: the rows name bytes of the file it names."""
        empty: tuple[dict[str, tuple[int, int]], np.ndarray] = ({}, self._mapped[1])
        if self._absent or not hashes:
            return empty
        by_key = {_key(model, sha): sha for sha in set(hashes)}
        keys = sorted(by_key)
        try:
            self._db.execute("BEGIN")
            state = self._db.execute(f"SELECT name, end FROM {FILE}").fetchone()
            data = self._data(*state) if state is not None else None
            if data is None:
                return empty
            found = {}
            for first in range(0, len(keys), _SQL_BATCH):
                batch = keys[first:first + _SQL_BATCH]
                for key, owner, sha, start, size in self._db.execute(
                        f"SELECT key, model, text_sha, start, size FROM {ROWS} "
                        f"WHERE key IN ({','.join('?' * len(batch))})", batch):
                    if owner == model and sha == by_key[key]:  # 64 bits can collide: the row says whose it is
                        found[sha] = (start, size)
            return found, data
        finally:
            if self._db.in_transaction:
                self._db.execute("COMMIT")

    def _data(self, name: str, end: int) -> np.ndarray | None:
        """Returns the first `end` bytes of file `name`, mapped (again only when it grew or was
        replaced); None when the file is missing or shorter (deleted: the cache reads as empty)."""
        if self._mapped[0] == name and len(self._mapped[1]) >= end:
            return self._mapped[1]
        path = self._folder / name
        try:
            if path.stat().st_size < end:
                return None
        except FileNotFoundError:
            return None
        # A plain view of the map: slicing a np.memmap runs its Python __getitem__ (~10 µs a text).
        data = np.zeros(0, dtype=np.int8)
        if end:
            data = np.memmap(path, dtype=np.int8, mode="r", shape=(end,)).view(np.ndarray)
        self._mapped = (name, data)
        return data

    # -- writing ---------------------------------------------------------------------------------

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        if items:
            self._append(model, ((sha, np.asarray(m).astype(np.int8).tobytes()) for sha, m in items.items()))

    def _append(self, model: str, items: Iterable[tuple[str, bytes]], *, replace: bool = True) -> None:
        """Appends (text hash, matrix bytes) items after the committed end and names them, in one
        write transaction (the caller may hold it open: `_migrate`)."""
        items = list(items)
        needed = sum(len(blob) + 100 for _, blob in items)
        own = not self._db.in_transaction
        with full_disk_guard(self._path, "the embedding cache", needed=needed, after=DERIVED):
            try:
                if own:
                    self._db.execute("BEGIN IMMEDIATE")
                name, end = self._writable_file()
                rows, offset = [], end
                for sha, blob in items:
                    rows.append((_key(model, sha), model, sha, offset, len(blob)))
                    offset += len(blob)
                _write_after(self._folder / name, end, b"".join(blob for _, blob in items))
                verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"  # a move never overwrites newer rows
                self._db.executemany(f"{verb} INTO {ROWS} VALUES (?, ?, ?, ?, ?)", rows)
                self._db.execute(f"UPDATE {FILE} SET end = ?", (offset,))
                if own:
                    self._db.execute("COMMIT")
            except BaseException:
                if own and self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        if own:
            self._unlink_stale(name)

    def _writable_file(self) -> tuple[str, int]:
        """Returns (the file's name, its committed end) inside a write transaction; a cache without
        a file, or whose file was deleted or cut short, starts a new (empty) one under a new name."""
        state = self._db.execute(f"SELECT name, end FROM {FILE}").fetchone()
        if state is not None and self._data(*state) is not None:
            return state
        name = f"{self._path.stem}.tokens.{uuid.uuid4().hex[:12]}.i8"
        self._db.execute(f"DELETE FROM {ROWS}")
        self._db.execute(f"DELETE FROM {FILE}")
        self._db.execute(f"INSERT INTO {FILE} VALUES (?, 0)", (name,))
        return name, 0

    def _unlink_stale(self, current: str) -> None:
        """Removes the files no longer named (their rows are gone; a reader mapping one keeps it)."""
        for stale in self._folder.glob(f"{self._path.stem}.tokens.*.i8"):
            if stale.name != current:
                stale.unlink(missing_ok=True)

    def _migrate(self) -> None:
        """Moves the matrices of the BLOB table an older engram wrote into the file and drops the
        table, in one write transaction, checked again inside it: two processes opening the old
        cache at once move it once."""
        db = self._db
        with full_disk_guard(self._path, "the embedding cache", after=DERIVED):
            try:
                db.execute("BEGIN IMMEDIATE")
                if _exists(db, LEGACY):
                    reader = db.execute(f"SELECT model, text_sha, vector FROM {LEGACY} ORDER BY model")
                    while batch := reader.fetchmany(_MOVE_BATCH):
                        for model in dict.fromkeys(m for m, _, _ in batch):
                            self._append(model, [(s, v) for m, s, v in batch if m == model], replace=False)
                    db.execute(f"DROP TABLE {LEGACY}")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        state = db.execute(f"SELECT name FROM {FILE}").fetchone()
        if state is not None:
            self._unlink_stale(state[0])

    def close(self) -> None:
        self._db.close()
        if self._legacy is not None:
            self._legacy.close()


def _key(model: str, sha: str) -> int:
    """Returns the row key of (model, text hash): the hash's first 64 bits (it is a sha256 already)
    mixed with the model's, as SQLite's signed integer."""
    return ((int(sha[:16], 16) ^ _salt(model)) ^ _SIGN) - _SIGN


_SIGN = 1 << 63


@functools.lru_cache(maxsize=16)
def _salt(model: str) -> int:
    return int.from_bytes(hashlib.sha256(model.encode()).digest()[:8], "big")


def _exists(db: object, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None  # type: ignore[attr-defined]


def _write_after(path: Path, end: int, blob: bytes) -> None:
    """Writes `blob` after the first `end` bytes of `path` (cutting whatever a crash left past them)
    and fsyncs: durable before the transaction that names it commits."""
    fresh = not path.exists()
    with open(path, "ab") as handle:  # never truncates on open: readers may be mapping it
        handle.truncate(end)
        handle.write(blob)
        handle.flush()
        os.fsync(handle.fileno())
    if fresh:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
