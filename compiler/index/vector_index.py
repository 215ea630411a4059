"""Which vector store a vault uses, and how its Chroma copy is kept in step.

    embedded (no `chroma_url`)   reads and writes go to the flat store (`compiler.index.flat`);
                                 compile copies every change into `.engram/cache/chroma/`
    a Chroma server              reads and writes go to the server, as before; no flat store

In the embedded mode Chroma is a mirror: what other tools may open, rebuilt from the flat store.
Each flat write lists the ids it changed; `bring_chroma_in_step` (the end of every compile, under
the writer lock) upserts and deletes exactly those in Chroma and clears the list, or rebuilds the
collection whole after a reset, a new store, or a Chroma folder that went missing. So `memory add`
and the MCP server's writes never import chromadb (a cold write pays for the model, not for
Chroma), and Chroma lags them until the next compile; nothing of engram reads it meanwhile.

A cache from before the flat store (or a notes store that does not read) falls back to Chroma
for note searches until the next compile writes the flat store; the memory index rebuilds its
flat store from the embedding cache at the next memory operation (the count no longer matches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from compiler.index.flat import FlatStore, stores


def open_vectors(cache_dir: Path, chroma_url: str, name: str) -> Any:
    """Returns collection `name` to read and write: the Chroma server's, else the flat store
    (which may not exist yet: it reads as empty and the first write creates it)."""
    if chroma_url:
        from compiler.index.vectors import VectorStore, open_client

        return VectorStore(open_client(cache_dir, chroma_url), name)
    return FlatStore(cache_dir, name)


def open_for_search(cache_dir: Path, chroma_url: str, name: str) -> Any:
    """Returns collection `name` to read: like `open_vectors`, but an embedded cache without a
    readable flat store (written before it existed) is read from its Chroma folder."""
    store = open_vectors(cache_dir, chroma_url, name)
    if isinstance(store, FlatStore) and not store.usable() and (cache_dir / "chroma").is_dir():
        from compiler.index.vectors import VectorStore, open_client

        return VectorStore(open_client(cache_dir), name)
    return store


def bring_chroma_in_step(cache_dir: Path, chroma_url: str) -> int:
    """Copies what changed in the flat stores into the embedded Chroma store; returns how many ids
    it wrote or deleted. Imports chromadb only when something changed (or Chroma is missing)."""
    if chroma_url:
        return 0  # the server is written directly
    client: Any = None
    copied = 0
    for store in stores(cache_dir):
        everything, ids = store.unmirrored()
        everything = everything or not (cache_dir / "chroma" / "chroma.sqlite3").is_file()
        if not everything and not ids:
            continue
        from compiler.index.vectors import VectorStore, open_client

        client = client or open_client(cache_dir)
        chroma = VectorStore(client, store.name)
        if everything:
            chroma.reset()
            ids = store.ids()
        copied += _copy(store, chroma, ids)
        if chroma.count() != store.count():  # Chroma lost rows behind our back: copy it whole
            chroma.reset()
            ids, everything = store.ids(), True
            copied += _copy(store, chroma, ids)
        store.mirrored(everything, ids)
    return copied


def _copy(store: FlatStore, chroma: Any, ids: list[str]) -> int:
    """Makes Chroma hold `ids` as the flat store does: upserted when present, deleted when not."""
    for start in range(0, len(ids), 2000):  # bounded memory at any scale
        batch = ids[start:start + 2000]
        found = store.records(batch)
        gone = [i for i in batch if i not in found]
        if gone:
            chroma.delete_ids(gone)
        if found:
            kept = list(found)
            chroma.add(kept, np.vstack([found[i][0] for i in kept]), [found[i][1] for i in kept],
                       [found[i][2] for i in kept])
    return len(ids)
