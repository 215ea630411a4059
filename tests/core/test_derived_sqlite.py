"""The derived databases commit without an fsync (write-ahead log, synchronous=NORMAL)."""

from __future__ import annotations

import sqlite3

import numpy as np

from compiler.index.cache import EmbeddingCache
from compiler.memory.index import MemoryKeywordIndex


def test_the_embedding_cache_and_the_memory_keywords_use_a_write_ahead_log(tmp_path):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    keywords = MemoryKeywordIndex(tmp_path / "memories.sqlite")
    try:
        cache.put_many("m", {"sha": np.ones(4, dtype=np.float32)})
        keywords.replace([], [("id", "p", "sha", "", "content", "", "")])
        for name in ("embeddings.sqlite", "memories.sqlite"):
            other = sqlite3.connect(tmp_path / name)  # another process's connection sees the mode and the rows
            assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            other.close()
        assert cache._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert list(cache.get_many("m", ["sha"])) == ["sha"]
    finally:
        cache.close()
        keywords.close()
