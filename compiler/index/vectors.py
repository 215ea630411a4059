"""Stage 6a, index vectors: a Chroma collection of note sections (cosine space).

A Chroma server is read and written here; the embedded store on disk is a mirror of the flat
store (`compiler.index.vector_index`), written here at compile and read only by a cache older than it.

We always compute vectors ourselves and hand them to Chroma; the collection is still opened
with our own embedding function because Chroma's default one downloads a model.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from compiler.core.errors import DERIVED, full_disk_guard
from compiler.core.generation import client_is_stale, mark_current

COLLECTION = "sections"
HNSW = {"space": "cosine", "ef_search": 200, "ef_construction": 200}  # default ef finds ~half the true top 10 at 50k
_ADD_BATCH = 2000
_GET_BATCH = 500
_QUERY_BATCH = 1000


@dataclass(frozen=True)
class VectorHit:
    id: str
    cosine: float
    metadata: dict[str, Any]
    document: str


def _embedding_function() -> Any:
    from chromadb.api.types import Documents, EmbeddingFunction

    class PrecomputedOnly(EmbeddingFunction[Documents]):
        """Refuses to embed: vectors always arrive precomputed. Stops Chroma's default download."""

        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Any:
            raise RuntimeError("engram passes embeddings explicitly; Chroma must not embed")

        @staticmethod
        def name() -> str:
            return "engram-precomputed"

        def get_config(self) -> dict[str, Any]:
            return {}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> "PrecomputedOnly":
            return PrecomputedOnly()

    return PrecomputedOnly()


def open_client(cache_dir: Path, chroma_url: str = "") -> Any:
    """Returns a Chroma client: an HTTP client for `chroma_url`, else the embedded store on disk."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    logging.getLogger("chromadb").setLevel(logging.ERROR)
    settings = ChromaSettings(anonymized_telemetry=False)
    if chroma_url:
        url = urlparse(chroma_url if "://" in chroma_url else f"http://{chroma_url}")
        server = (url.hostname or "127.0.0.1", url.port or 8000, url.scheme == "https")
        if server not in _SERVERS:  # one client per server: each HttpClient registers a new Chroma system
            _SERVERS[server] = chromadb.HttpClient(host=server[0], port=server[1], ssl=server[2], settings=settings)
        return NamespacedClient(_SERVERS[server], server_namespace(url.path, cache_dir))
    from chromadb.api.client import SharedSystemClient

    if not (cache_dir / "chroma").exists():
        # Chroma caches one client per path in the process; after the folder was deleted that
        # cached client would write to a vanished (read-only) database.
        SharedSystemClient.clear_system_cache()
    elif client_is_stale(cache_dir):
        # Another process wrote since we opened the store: our in-memory vector index misses its
        # vectors. Drop the cached client (handles still held keep working, stale) and reopen.
        SharedSystemClient._identifier_to_system.pop(str(cache_dir / "chroma"), None)
    with full_disk_guard(cache_dir / "chroma", "the vector index", after=DERIVED):
        client = chromadb.PersistentClient(path=str(cache_dir / "chroma"), settings=settings)
    mark_current(cache_dir)
    return client


_SERVERS: dict[tuple[str, int, bool], Any] = {}


def server_namespace(url_path: str, cache_dir: Path) -> str:
    """Returns the prefix of this vault's collections on a Chroma server.

    The URL's path names it (`http://host:8000/team-notes`); without one, the vault folder's name.
    Machines sharing one vault's index must agree on it; different vaults must not.
    """
    raw = url_path.strip("/") or cache_dir.resolve().parent.parent.name
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip("-._")[:200] or "vault"


class NamespacedClient:
    """A Chroma server client whose collection names carry the vault's prefix: vaults sharing a server never collide."""

    def __init__(self, client: Any, prefix: str) -> None:
        self._client = client
        self.prefix = prefix

    def get_or_create_collection(self, name: str, **options: Any) -> Any:
        return self._client.get_or_create_collection(f"{self.prefix}-{name}", **options)

    def delete_collection(self, name: str) -> None:
        self._client.delete_collection(f"{self.prefix}-{name}")


def _local_folder(client: Any) -> Path | None:
    """Returns the folder of an embedded Chroma store, or None for a server's."""
    if isinstance(client, NamespacedClient):
        return None
    folder = getattr(client.get_settings(), "persist_directory", "") if hasattr(client, "get_settings") else ""
    return Path(folder) if folder else None


class VectorStore:
    """The sections collection: add, delete by note path, query by vector."""

    def __init__(self, client: Any, name: str = COLLECTION) -> None:
        self._client = client
        self._name = name
        self._folder = _local_folder(client)
        with self._guard():
            self._collection = client.get_or_create_collection(
                name, embedding_function=_embedding_function(), configuration={"hnsw": HNSW})

    def _guard(self, needed: int = 0) -> AbstractContextManager[None]:
        """Returns the context that turns a full local disk under the store into one StorageFullError
        (a Chroma server's disk is the server's: its errors pass through)."""
        if self._folder is None:
            return nullcontext()
        return full_disk_guard(self._folder, "the vector index", needed=needed, after=DERIVED)

    def reset(self) -> None:
        """Drops every vector (a model change makes them all meaningless)."""
        with self._guard():
            self._client.delete_collection(self._name)
            self._collection = self._client.get_or_create_collection(
                self._name, embedding_function=_embedding_function(), configuration={"hnsw": HNSW})

    def count(self) -> int:
        return self._collection.count()

    def close(self) -> None:
        """Nothing to close: Chroma keeps one client per path (or server) for the process."""

    def delete_paths(self, paths: Sequence[str]) -> None:
        with self._guard():
            for start in range(0, len(paths), 500):
                self._collection.delete(where={"path": {"$in": list(paths[start:start + 500])}})

    def delete_ids(self, ids: Sequence[str]) -> None:
        with self._guard():
            for start in range(0, len(ids), 500):
                self._collection.delete(ids=list(ids[start:start + 500]))

    def add(self, ids: Sequence[str], vectors: np.ndarray, documents: Sequence[str],
            metadatas: Sequence[dict[str, Any]]) -> None:
        # Chroma keeps each vector as float32 twice (its SQLite log and the HNSW index), plus the text.
        needed = 2 * 4 * int(vectors.size) + sum(len(d.encode("utf-8")) for d in documents)
        with self._guard(needed):
            for start in range(0, len(ids), _ADD_BATCH):
                end = start + _ADD_BATCH
                self._collection.upsert(ids=list(ids[start:end]), embeddings=vectors[start:end].tolist(),
                                        documents=list(documents[start:end]), metadatas=list(metadatas[start:end]))

    def query(self, vector: np.ndarray, n: int, where: dict[str, Any] | None = None) -> list[VectorHit]:
        """Returns up to `n` nearest sections, best first, with cosine similarity."""
        total = self.count()
        if total == 0 or n <= 0:
            return []
        result = self._collection.query(query_embeddings=[vector.tolist()], n_results=min(n, total), where=where,
                                        include=["distances", "metadatas", "documents"])
        return [VectorHit(i, 1.0 - float(d), dict(m or {}), doc or "")
                for i, d, m, doc in zip(result["ids"][0], result["distances"][0],
                                        result["metadatas"][0], result["documents"][0])]

    def query_many(self, vectors: np.ndarray, n: int, where: dict[str, Any] | None = None
                   ) -> list[list[tuple[str, float]]]:
        """Returns, for each row of `vectors`, up to `n` nearest (id, cosine) of those matching `where`, best first."""
        total = self.count()
        if total == 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        found: list[list[tuple[str, float]]] = []
        for start in range(0, len(vectors), _QUERY_BATCH):  # bounded requests at any scale
            result = self._collection.query(query_embeddings=vectors[start:start + _QUERY_BATCH].tolist(),
                                            n_results=min(n, total), where=where, include=["distances"])
            found += [[(i, 1.0 - float(d)) for i, d in zip(ids, dists)]
                      for ids, dists in zip(result["ids"], result["distances"])]
        return found

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Returns the stored vector of each known id."""
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), _GET_BATCH):  # SQLite caps the variables of one statement
            result = self._collection.get(ids=list(ids[start:start + _GET_BATCH]), include=["embeddings"])
            found.update((i, np.asarray(v, dtype=np.float32)) for i, v in zip(result["ids"], result["embeddings"]))
        return found
