"""The token-vector cache (late interaction): int8 matrices in an append-only file, found by slicing.

Beside the embedding cache's SQLite file (`embeddings.sqlite`):

    table token_rows_i8     key (64 bits of sha256(model, text hash)) → model, text hash, and
                            where the text's matrix lies in the file (byte offset, byte length)
    table token_file_i8     one row: the file's name and its committed end
    table token_usage_i8    what the last compile found: the file's name, its end then, the bytes
                            of texts still in use (`engram check` reports the dead share from it)
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
a reader still mapping the old one never reads new bytes at old offsets. A file's first `end`
bytes never change once committed: a mapped file is always right for the rows of its name.

Compaction (`compact`, run by compile, which knows every text still in use): the rows of replaced,
merged, forgotten or edited texts stay in the file, which only grew. When dead bytes pass a share
of it (and a floor), the live matrices are copied to a new file outside any transaction (other
processes keep reading and writing), then one short write transaction copies what was appended
meanwhile, renames the copy to its final name, points the rows at it and names it. A reader that
mapped the old file sees the new name in its next lookup and maps the new one; the old file is
unlinked only inside a later write transaction (by then no committed row names it), and a reader
that read the old name just before finds it gone and looks again. A crash leaves an unnamed file
(removed by the next write, or a `.part` by the next compaction), never a row naming wrong bytes.

A cache written before this file existed keeps its matrices as BLOBs in `token_vectors_i8`
(engram between 2026-11-30 and 2026-12-02): they are read there until the next compile moves
them into the file, a few thousand per transaction, so no writer waits long for the cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sqlite3
import time
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from compiler.core.derived_sqlite import connect_derived, connect_readonly
from compiler.core.errors import DERIVED, full_disk_guard
from compiler.core.files import fsync_folder, write_after
from compiler.index.token_bytes import FILE, USAGE, Usage, copy_pieces

ROWS = "token_rows_i8"  # a new name when the stored form changes
LEGACY = "token_vectors_i8"  # the BLOB table of older caches
COMPACT_SHARE = 0.5  # dead bytes, as a share of the file, past which compile rewrites it
COMPACT_MIN_BYTES = 64 << 20  # ... and at least this many: a small cache is never rewritten
_SQL_BATCH = 500  # SQLite caps the variables of one statement
_MOVE_BATCH = 2048  # legacy rows moved per transaction: ~10 MB, the write lock held 1.1 s at most at load 10


class TokenVectorCache:
    """int8 token-vector matrices keyed by (model identity, text hash); `EmbeddingCache`'s
    get_many / known / put_many / close, each matrix flat (the caller knows its width)."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self._path, self._folder = path, path.parent
        self._mapped: tuple[str, np.ndarray] = ("", np.zeros(0, dtype=np.int8))  # file name, its committed bytes
        self._readonly = readonly
        if readonly:  # a search: never writes, works on a read-only vault; a missing table reads as empty
            self._db = connect_readonly(path)
            self._db.isolation_level = None
            self._absent = not _exists(self._db, ROWS)
            self._legacy = _exists(self._db, LEGACY)
            return
        self._absent = False
        with full_disk_guard(path, "the embedding cache", after=DERIVED):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = connect_derived(path)
            self._db.isolation_level = None  # transactions are explicit: a write spans the file and the rows
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {ROWS} (key INTEGER PRIMARY KEY, model TEXT NOT NULL, "
                             "text_sha TEXT NOT NULL, start INTEGER NOT NULL, size INTEGER NOT NULL)")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {FILE} (name TEXT NOT NULL, end INTEGER NOT NULL)")
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {USAGE} (name TEXT NOT NULL, end INTEGER NOT NULL, "
                             "live INTEGER NOT NULL)")
            self._legacy = _exists(self._db, LEGACY)

    # -- reading -------------------------------------------------------------------------------

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found, data, legacy = self._lookup(model, hashes, blobs=True)
        matrices = {sha: data[start:start + size] for sha, (start, size) in found.items()}
        matrices.update({sha: np.frombuffer(blob, dtype=np.int8) for sha, blob in legacy.items()})
        return matrices

    def known(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Returns which of `hashes` are cached (and readable)."""
        found, _, legacy = self._lookup(model, hashes, blobs=False)
        return set(found) | set(legacy)

    def _lookup(self, model: str, hashes: Sequence[str], *, blobs: bool
                ) -> tuple[dict[str, tuple[int, int]], np.ndarray, dict[str, bytes]]:
        """Returns ({text hash: (offset, length)} of the cached ones, the mapped file, {text hash:
        BLOB (b"" without `blobs`)} of the others an older cache holds), all of one read
        transaction: the rows name bytes of the file it names. A file gone between reading its
        name and mapping it (a compaction's, just unlinked) is looked for again, once."""
        for last in (False, True):
            try:
                with self._reading():
                    found, data = self._rows(model, hashes)
                    if data is not None or last:
                        legacy = self._legacy_rows(model, [h for h in set(hashes) if h not in found], blobs)
                        return found, self._mapped[1] if data is None else data, legacy
            except sqlite3.DatabaseError:
                if not self._readonly:
                    raise
                break  # an immutable connection whose file a writer changed meanwhile: reads as empty
        return {}, self._mapped[1], {}

    def _rows(self, model: str, hashes: Sequence[str]) -> tuple[dict[str, tuple[int, int]], np.ndarray | None]:
        if self._absent or not hashes:
            return {}, self._mapped[1]
        state = self._db.execute(f"SELECT name, end FROM {FILE}").fetchone()
        data = self._data(*state) if state is not None else self._mapped[1]
        if data is None or state is None:
            return {}, data
        by_key = {_key(model, sha): sha for sha in set(hashes)}
        keys = sorted(by_key)
        found = {}
        for first in range(0, len(keys), _SQL_BATCH):
            batch = keys[first:first + _SQL_BATCH]
            for key, owner, sha, start, size in self._db.execute(
                    f"SELECT key, model, text_sha, start, size FROM {ROWS} "
                    f"WHERE key IN ({','.join('?' * len(batch))})", batch):
                # 64 bits can collide: the row says whose it is. A row past the end it read is another
                # state's (a search's immutable connection, opened while no writer had the file open,
                # sees no transactions): never sliced.
                if owner == model and sha == by_key[key] and start + size <= state[1]:
                    found[sha] = (start, size)
        return found, data

    def _legacy_rows(self, model: str, hashes: list[str], blobs: bool) -> dict[str, bytes]:
        """Returns {text hash: BLOB} of `hashes` the older BLOB table holds (until compile moved it)."""
        if not self._legacy or not hashes:
            return {}
        found: dict[str, bytes] = {}
        column = "vector" if blobs else "x''"
        try:
            for first in range(0, len(hashes), _SQL_BATCH):
                batch = sorted(hashes)[first:first + _SQL_BATCH]
                found.update(self._db.execute(
                    f"SELECT text_sha, {column} FROM {LEGACY} "
                    f"WHERE model = ? AND text_sha IN ({','.join('?' * len(batch))})", [model, *batch]))
        except sqlite3.OperationalError:  # moved and dropped by another process
            self._legacy = _exists(self._db, LEGACY)
            if self._legacy:
                raise
        return found

    def _data(self, name: str, end: int) -> np.ndarray | None:
        """Returns the first `end` bytes of file `name`, mapped (again only when it grew or was
        replaced); None when the file is missing or shorter (deleted: the cache reads as empty)."""
        if self._mapped[0] == name and len(self._mapped[1]) >= end:
            return self._mapped[1]
        path = self._folder / name
        try:
            if path.stat().st_size < end:
                return None
            # A plain view of the map: slicing a np.memmap runs its Python __getitem__ (~10 µs a text).
            data = np.zeros(0, dtype=np.int8)
            if end:
                data = np.memmap(path, dtype=np.int8, mode="r", shape=(end,)).view(np.ndarray)
        except FileNotFoundError:
            return None
        self._mapped = (name, data)
        return data

    # -- writing ---------------------------------------------------------------------------------

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        if items:
            self._append(model, [(sha, np.asarray(m).astype(np.int8).tobytes()) for sha, m in items.items()])

    def _append(self, model: str, items: list[tuple[str, bytes]], *, replace: bool = True) -> None:
        """Appends (text hash, matrix bytes) items after the committed end and names them, in one
        write transaction (the caller may hold it open: `_move_legacy`)."""
        needed = sum(len(blob) + 100 for _, blob in items)
        with full_disk_guard(self._path, "the embedding cache", needed=needed, after=DERIVED), self._writing():
            name, end = self._writable_file()
            rows, offset = [], end
            for sha, blob in items:
                rows.append((_key(model, sha), model, sha, offset, len(blob)))
                offset += len(blob)
            write_after(self._folder / name, end, b"".join(blob for _, blob in items))
            verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"  # a move never overwrites newer rows
            self._db.executemany(f"{verb} INTO {ROWS} VALUES (?, ?, ?, ?, ?)", rows)
            self._db.execute(f"UPDATE {FILE} SET end = ?", (offset,))

    def _writable_file(self) -> tuple[str, int]:
        """Returns (the file's name, its committed end) inside a write transaction, after removing
        the files no committed row names; a cache without a file, or whose file was deleted or cut
        short, starts a new (empty) one under a new name."""
        state = self._db.execute(f"SELECT name, end FROM {FILE}").fetchone()
        if state is not None and self._data(*state) is not None:
            self._unlink_stale(state[0])
            return state
        name = f"{self._path.stem}.tokens.{uuid.uuid4().hex[:12]}.i8"
        self._db.execute(f"DELETE FROM {ROWS}")
        self._db.execute(f"DELETE FROM {FILE}")
        self._db.execute(f"INSERT INTO {FILE} VALUES (?, 0)", (name,))
        self._unlink_stale(name)
        return name, 0

    def _unlink_stale(self, current: str) -> None:
        """Removes the files no longer named, inside a write transaction: a compaction names its
        new file inside its own, so no other writer ever sees that file unnamed and in use (a
        reader mapping an unlinked file keeps it)."""
        for stale in self._folder.glob(f"{self._path.stem}.tokens.*.i8"):
            if stale.name != current:
                stale.unlink(missing_ok=True)

    # -- compaction (compile calls it, holding the vault's writer lock) ---------------------------

    def compact(self, live: Mapping[str, Collection[str]], *, share: float | None = None,
                floor: int | None = None) -> Usage:
        """Rewrites the file with only the matrices of `live` ({model identity: text hashes in use})
        and what other processes append meanwhile, when the dead bytes exceed `share` of it and
        `floor` (COMPACT_SHARE, COMPACT_MIN_BYTES unless given); first moves an older cache's
        BLOBs into it. Returns the usage found (and what the rewrite made of it). The caller
        holds the vault's writer lock: one compaction at a time."""
        self._move_legacy()
        wanted = {model: set(hashes) for model, hashes in live.items()}
        with self._reading():
            state = self._db.execute(f"SELECT name, end FROM {FILE}").fetchone()
            rows = self._db.execute(f"SELECT key, model, text_sha, start, size FROM {ROWS} WHERE start < ?",
                                    (state[1] if state else 0,)).fetchall()
        if state is None:
            return Usage(0, 0)
        name, end = state
        kept = [row for row in rows if row[2] in wanted.get(row[1], ())]
        usage = Usage(end, sum(row[4] for row in kept), bytes_after=end)
        data = self._data(name, end)
        share, floor = COMPACT_SHARE if share is None else share, COMPACT_MIN_BYTES if floor is None else floor
        if data is None or end - usage.live_bytes <= max(share * end, floor):
            self._record(name, usage)
            return usage
        started = time.perf_counter()
        kept.sort(key=lambda row: row[3])  # copied in file order: sequential reads, contiguous runs
        part, copied = self._copy(data, kept)
        after = self._swap(name, end, part, kept, copied)
        self._mapped = ("", np.zeros(0, dtype=np.int8))  # let go of the old file's map
        if after is None:  # another process started a new file meanwhile: nothing to swap
            return usage
        with self._writing():
            self._writable_file()  # unlinks the old file: no committed row names it any more
        self._record(after[0], Usage(after[1], after[1]))  # what was appended meanwhile counts as live
        return Usage(end, usage.live_bytes, True, after[1], time.perf_counter() - started)

    def _copy(self, data: np.ndarray, kept: list[tuple[int, str, str, int, int]]) -> tuple[Path, int]:
        """Writes the matrices of `kept` (by offset) back to back to a new `.part` file, fsync'd;
        returns it and its length. Outside any transaction: nobody waits for it."""
        for leftover in self._folder.glob(f"{self._path.stem}.tokens.*.i8.part"):  # a killed compaction's
            leftover.unlink(missing_ok=True)
        part = self._folder / f"{self._path.stem}.tokens.{uuid.uuid4().hex[:12]}.i8.part"
        pieces = [(start, size) for *_, start, size in kept]
        with full_disk_guard(self._path, "the embedding cache", needed=sum(s for _, s in pieces), after=DERIVED):
            return part, copy_pieces(data, pieces, part)

    def _swap(self, name: str, end: int, part: Path, kept: list[tuple[int, str, str, int, int]],
              copied: int) -> tuple[str, int] | None:
        """In one write transaction (its commit synced): appends to `part` what other processes
        appended to file `name` after `end` meanwhile, renames it to its final name, points the
        rows at it and names it. Returns (the new file's name, its end); None, and `part` removed,
        when `name` is no longer the cache's file."""
        final = part.with_name(part.name.removesuffix(".part"))
        try:
            with self._writing(durable=True):
                state = self._db.execute(f"SELECT name, end FROM {FILE}").fetchone()
                tail = self._data(*state) if state is not None and state[0] == name else None
                if tail is None:
                    part.unlink()
                    return None
                write_after(part, copied, tail[end:state[1]])
                self._db.execute(f"DELETE FROM {ROWS} WHERE start < ?", (end,))
                self._db.execute(f"UPDATE {ROWS} SET start = start + ? WHERE start >= ?", (copied - end, end))
                starts = np.concatenate(([0], np.cumsum([row[4] for row in kept])[:-1])).tolist() if kept else []
                self._db.executemany(f"INSERT OR IGNORE INTO {ROWS} VALUES (?, ?, ?, ?, ?)",  # a newer row wins
                                     [(key, model, sha, at, size) for (key, model, sha, _, size), at in zip(kept, starts)])
                os.replace(part, final)
                fsync_folder(self._folder)
                self._db.execute(f"UPDATE {FILE} SET name = ?, end = ?", (final.name, copied + state[1] - end))
                return final.name, copied + state[1] - end
        except BaseException:
            part.unlink(missing_ok=True)  # a renamed one is unnamed after the rollback: the next write removes it
            raise

    def _record(self, name: str, usage: Usage) -> None:
        """Keeps what compile found, for `engram check`: `usage` of file `name`."""
        with self._writing():
            self._db.execute(f"DELETE FROM {USAGE}")
            self._db.execute(f"INSERT INTO {USAGE} VALUES (?, ?, ?)", (name, usage.file_bytes, usage.live_bytes))

    def _move_legacy(self) -> None:
        """Moves the matrices of the BLOB table an older engram wrote into the file, a batch per
        write transaction (rows of it are deleted as they move; the table is dropped when empty):
        readers find every text in one place or the other, a crash resumes where it stopped, and
        no writer waits more than one batch."""
        while self._legacy:
            with full_disk_guard(self._path, "the embedding cache", after=DERIVED), self._writing():
                batch = self._db.execute(f"SELECT rowid, model, text_sha, vector FROM {LEGACY} ORDER BY rowid "
                                         "LIMIT ?", (_MOVE_BATCH,)).fetchall() if _exists(self._db, LEGACY) else None
                if not batch:
                    self._db.execute(f"DROP TABLE IF EXISTS {LEGACY}")
                    self._legacy = False
                    continue
                for model in dict.fromkeys(m for _, m, _, _ in batch):
                    self._append(model, [(s, v) for _, m, s, v in batch if m == model], replace=False)
                for first in range(0, len(batch), _SQL_BATCH):
                    ids = [row[0] for row in batch[first:first + _SQL_BATCH]]
                    self._db.execute(f"DELETE FROM {LEGACY} WHERE rowid IN ({','.join('?' * len(ids))})", ids)

    # -- transactions ------------------------------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """One read transaction: what it reads is one committed state."""
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            if self._db.in_transaction:
                self._db.execute("COMMIT")

    @contextmanager
    def _writing(self, *, durable: bool = False) -> Iterator[None]:
        """One write transaction, or the caller's when it holds one open. `durable` syncs its
        commit to disk: the derived cache otherwise commits without an fsync (the log is synced at
        checkpoints), and a compaction's old file is unlinked right after."""
        if self._db.in_transaction:
            yield
            return
        if durable:
            self._db.execute("PRAGMA synchronous=FULL")
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # a failed COMMIT (a full disk) may have rolled back already
                    self._db.execute("ROLLBACK")
                raise
        finally:
            if durable:
                self._db.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        self._db.close()


def _key(model: str, sha: str) -> int:
    """Returns the row key of (model, text hash): the hash's first 64 bits (it is a sha256 already)
    mixed with the model's, as SQLite's signed integer."""
    return ((int(sha[:16], 16) ^ _salt(model)) ^ _SIGN) - _SIGN


_SIGN = 1 << 63


@functools.lru_cache(maxsize=16)
def _salt(model: str) -> int:
    return int.from_bytes(hashlib.sha256(model.encode()).digest()[:8], "big")


def _exists(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is not None
