"""The index of live memories: a Chroma collection (vectors) and an FTS5 table (BM25).

Derived from the event fold and rebuildable from it: `sync_index` brings it in step with the
live memories, re-embedding only texts the embedding cache has not seen.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compiler.embed import Embedder, EmbeddingCache, embed_with_cache, text_hash
from compiler.fts import TOKENIZER, match_expression
from compiler.memory_model import Observation

COLLECTION = "memories"


def memory_text(obs: Observation) -> str:
    """Returns what is embedded and keyword-indexed for a memory: its title gives the content context."""
    title = obs.title.strip()
    return obs.content if not title or obs.content.startswith(title) else f"{title}\n{obs.content}"


@dataclass(frozen=True)
class MemoryKeywordHit:
    id: str
    bm25: float  # positive; larger is better


class MemoryKeywordIndex:
    """FTS5 over memory titles and contents, plus the text hash each row was built from."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS memories USING fts5(id UNINDEXED, project UNINDEXED, "
                         f"text_sha UNINDEXED, title, content, tokenize='{TOKENIZER}')")

    def hashes(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT id, text_sha FROM memories"))

    def replace(self, deleted: Iterable[str], rows: Iterable[tuple[str, str, str, str, str]]) -> None:
        """Deletes `deleted` ids, then inserts (id, project, text_sha, title, content) rows."""
        with self._db:
            self._db.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in deleted])
            self._db.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?)", list(rows))

    def search(self, query: str, limit: int, project: str = "") -> list[MemoryKeywordHit]:
        expression = match_expression(query)
        if not expression:
            return []
        where, args = ("AND project = ?", [project]) if project else ("", [])
        rows = self._db.execute(f"SELECT id, bm25(memories, 0, 0, 0, 2.0, 1.0) AS rank FROM memories "
                                f"WHERE memories MATCH ? {where} ORDER BY rank, id LIMIT ?", [expression, *args, limit])
        return [MemoryKeywordHit(i, -float(r)) for i, r in rows]

    def close(self) -> None:
        self._db.close()


class MemoryIndex:
    """Vectors and keywords of live memories, opened together."""

    def __init__(self, cache_dir: Path, chroma_url: str = "") -> None:
        from compiler.vector_store import VectorStore, open_client

        self.vectors = VectorStore(open_client(cache_dir, chroma_url), COLLECTION)
        self.keywords = MemoryKeywordIndex(cache_dir / "memories.sqlite")
        self.embeddings = EmbeddingCache(cache_dir / "embeddings.sqlite")

    def close(self) -> None:
        self.keywords.close()
        self.embeddings.close()

    def embed(self, texts: Sequence[str], embedder: Callable[[], Embedder], identity: str) -> tuple[np.ndarray, int]:
        """Returns (vectors, how many were newly embedded), through the shared embedding cache."""
        return embed_with_cache(texts, embedder, identity, self.embeddings)

    def put(self, memories: Sequence[Observation], vectors: np.ndarray) -> None:
        """Indexes (or re-indexes) `memories` with their vectors."""
        if not memories:
            return
        ids = [m.id for m in memories]
        self.keywords.replace(ids, [(m.id, m.project, text_hash(memory_text(m)), m.title, m.content) for m in memories])
        self.vectors.add(ids, vectors, [memory_text(m) for m in memories], [_metadata(m) for m in memories])

    def drop(self, ids: Sequence[str]) -> None:
        if ids:
            self.keywords.replace(ids, [])
            self.vectors.delete_ids(ids)

    def nearest(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None) -> list[tuple[str, float]]:
        """Returns up to `n` (id, cosine) of the closest live memories, best first."""
        return [(h.id, h.cosine) for h in self.vectors.query(vector, n, where)]


def _metadata(obs: Observation) -> dict[str, Any]:
    return {"project": obs.project, "category": obs.category, "kind": obs.kind}


def sync_index(index: MemoryIndex, live: Mapping[str, Observation], embedder: Callable[[], Embedder],
               identity: str) -> int:
    """Brings the index in step with the `live` memories; returns how many texts were embedded."""
    indexed = index.keywords.hashes()
    stale = sorted(i for i, m in live.items() if indexed.get(i) != text_hash(memory_text(m)))
    gone = sorted(set(indexed) - set(live))
    index.drop(gone)
    if index.vectors.count() != len(indexed) - len(gone):  # vectors lost (crash, deleted folder): redo all
        index.vectors.reset()
        stale = sorted(live)
    memories = [live[i] for i in stale]
    vectors, embedded = index.embed([memory_text(m) for m in memories], embedder, identity)
    index.put(memories, vectors)
    return embedded
