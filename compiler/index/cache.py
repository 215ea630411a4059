"""The embedding cache: vectors keyed by (model identity, text hash), so no text is embedded twice."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compiler.core.derived_sqlite import connect_derived, connect_readonly
from compiler.core.errors import DERIVED, full_disk_guard
from compiler.embed.embedder import Embedder, batch_order

WRITE_BATCH = 128  # texts embedded per cache write: progress and a crash-safe cache every few seconds


class EmbeddingCache:
    """SQLite table of vectors keyed by (model identity, sha256 of the text).

    Also holds token-vector matrices (late interaction) in a second table, quantised by the
    caller (`dtype`)."""

    def __init__(self, path: Path, table: str = "vectors", dtype: type = np.float32, *, readonly: bool = False) -> None:
        self._path, self._table, self._dtype = path, table, dtype
        if readonly:  # a search: never writes, works on a read-only vault; a missing table reads as empty
            self._db = connect_readonly(path)
            self._absent = not self._db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
            return
        self._absent = False
        with full_disk_guard(path, "the embedding cache", after=DERIVED):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = connect_derived(path)
            self._db.execute(f"CREATE TABLE IF NOT EXISTS {table} (model TEXT, text_sha TEXT, vector BLOB, "
                             "PRIMARY KEY (model, text_sha))")

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        return {sha: np.frombuffer(blob, dtype=self._dtype) for sha, blob in self._select("text_sha, vector", model, hashes)}

    def known(self, model: str, hashes: Sequence[str]) -> set[str]:
        """Returns which of `hashes` are cached, without reading their blobs."""
        return {sha for (sha,) in self._select("text_sha", model, hashes)}

    def _select(self, columns: str, model: str, hashes: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        if self._absent:
            return
        unique = sorted(set(hashes))
        for start in range(0, len(unique), 500):  # SQLite caps the variables of one statement
            batch = unique[start:start + 500]
            marks = ",".join("?" * len(batch))
            yield from self._db.execute(f"SELECT {columns} FROM {self._table} "
                                        f"WHERE model = ? AND text_sha IN ({marks})", [model, *batch])

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        rows = [(model, sha, vec.astype(self._dtype).tobytes()) for sha, vec in items.items()]
        needed = sum(len(blob) + len(sha) for _, sha, blob in rows)
        with full_disk_guard(self._path, "the embedding cache", needed=needed, after=DERIVED), self._db:
            self._db.executemany(f"INSERT OR REPLACE INTO {self._table} VALUES (?, ?, ?)", rows)

    def close(self) -> None:
        self._db.close()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_with_cache(texts: Sequence[str], embedder_factory: Callable[[], Embedder], identity: str,
                     cache: EmbeddingCache, progress: Callable[[int], None] = lambda n: None) -> tuple[np.ndarray, int]:
    """Returns (vectors for `texts`, how many were newly embedded).

    The model is only loaded (through `embedder_factory`) when some text is not cached.
    """
    hashes = [text_hash(t) for t in texts]
    known = cache.get_many(identity, hashes)
    missing = {h: t for h, t in zip(hashes, texts) if h not in known}
    if missing:
        embedder = embedder_factory()
        todo = batch_order(embedder, missing)  # similar lengths together: less padding
        for start in range(0, len(todo), WRITE_BATCH):
            batch = todo[start:start + WRITE_BATCH]
            vectors = embedder.embed([missing[h] for h in batch])
            fresh = dict(zip(batch, vectors))
            cache.put_many(identity, fresh)
            known.update(fresh)
            progress(len(batch))
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), 0
    return np.vstack([known[h] for h in hashes]).astype(np.float32), len(missing)
