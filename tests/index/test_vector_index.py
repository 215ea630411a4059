"""The embedded Chroma store mirrors the flat stores: compile copies exactly what changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from compiler.index.flat import FlatStore
from compiler.index.vector_index import (
    bring_chroma_in_step,
    open_for_search,
    open_vectors,
)
from compiler.index.vectors import VectorStore, open_client
from tests.conftest import ROOT


def rows(count: int, seed: int = 0) -> np.ndarray:
    found = np.random.default_rng(seed).normal(size=(count, 8)).astype(np.float32)
    return found / np.linalg.norm(found, axis=1, keepdims=True)


def write(store: FlatStore, ids: list[str], vectors: np.ndarray) -> None:
    store.add(ids, vectors, [f"text {i}" for i in ids], [{"project": "p", "n": k} for k, i in enumerate(ids)])


def rounded(vector: np.ndarray) -> list[float]:
    return [round(float(x), 4) for x in vector]


def chroma_state(cache: Path, name: str) -> dict[str, tuple[list[float], str, dict]]:
    collection = VectorStore(open_client(cache), name)._collection
    got = collection.get(include=["embeddings", "documents", "metadatas"])
    return {i: (rounded(e), d, m) for i, e, d, m in
            zip(got["ids"], got["embeddings"], got["documents"], got["metadatas"])}


def flat_state(store: FlatStore) -> dict[str, tuple[list[float], str, dict]]:
    return {i: (rounded(v), d, m) for i, (v, d, m) in store.records(store.ids()).items()}


def test_compile_copies_exactly_the_changes_into_chroma(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "memories")
    write(store, [f"m{k}" for k in range(6)], rows(6))
    assert bring_chroma_in_step(tmp_path, "") == 6  # a new store: Chroma rebuilt whole
    assert chroma_state(tmp_path, "memories") == flat_state(store)
    write(store, ["m2", "m9"], rows(2, seed=1))  # one overwrite, one new
    store.delete_ids(["m0"])
    assert bring_chroma_in_step(tmp_path, "") == 3
    assert chroma_state(tmp_path, "memories") == flat_state(store)
    assert store.unmirrored() == (False, [])
    generation = (tmp_path / "chroma" / "chroma.sqlite3").stat().st_mtime_ns
    assert bring_chroma_in_step(tmp_path, "") == 0  # nothing changed: Chroma is not opened
    assert (tmp_path / "chroma" / "chroma.sqlite3").stat().st_mtime_ns == generation


def test_a_deleted_or_emptied_chroma_is_rebuilt_from_the_flat_store(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "sections")
    write(store, [f"s{k}" for k in range(5)], rows(5))
    bring_chroma_in_step(tmp_path, "")
    VectorStore(open_client(tmp_path), "sections").delete_ids(["s1", "s2"])  # behind our back
    write(store, ["s4"], rows(1, seed=2))
    bring_chroma_in_step(tmp_path, "")
    assert chroma_state(tmp_path, "sections") == flat_state(store)
    shutil.rmtree(tmp_path / "chroma")
    assert bring_chroma_in_step(tmp_path, "") == 5
    assert chroma_state(tmp_path, "sections") == flat_state(store)


def test_a_server_is_never_mirrored_and_searches_read_the_flat_store(tmp_path: Path) -> None:
    assert bring_chroma_in_step(tmp_path, "http://127.0.0.1:1") == 0
    assert isinstance(open_vectors(tmp_path, "", "sections"), FlatStore)
    write(FlatStore(tmp_path, "sections"), ["a"], rows(1))
    assert isinstance(open_for_search(tmp_path, "", "sections"), FlatStore)


def test_a_cache_from_before_the_flat_store_is_searched_in_chroma(tmp_path: Path) -> None:
    chroma = VectorStore(open_client(tmp_path), "sections")  # what an older engram wrote
    chroma.add(["a#0", "b#0"], rows(2), ["alpha", "beta"], [{"path": "a.md"}, {"path": "b.md"}])
    store = open_for_search(tmp_path, "", "sections")
    assert isinstance(store, VectorStore)
    assert [h.id for h in store.query(rows(2)[1], 1)] == ["b#0"]
    assert not (tmp_path / "flat").exists()


def test_nothing_to_mirror_does_not_import_chromadb(tmp_path: Path) -> None:
    write(FlatStore(tmp_path, "memories"), ["m"], rows(1))
    bring_chroma_in_step(tmp_path, "")
    probe = ("import sys; from pathlib import Path\n"
             "from compiler.index.vector_index import bring_chroma_in_step\n"
             "print(bring_chroma_in_step(Path(sys.argv[1]), ''), 'chromadb' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == ["0", "False"]
