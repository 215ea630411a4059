"""The token-vector cache: int8 matrices in an append-only file, an older cache's BLOBs moved over,
a deleted or torn file read as empty and started again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from compiler.index import token_cache
from compiler.index.cache import EmbeddingCache, text_hash
from compiler.index.token_cache import TokenVectorCache


S1, S2, S3 = (text_hash(t) for t in ("one", "two", "three"))  # keys are text hashes


def _matrix(seed: int, rows: int = 3, width: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, (rows, width)).astype(np.int8)


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("embeddings.tokens.*.i8"))


def test_matrices_round_trip_per_model_and_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = TokenVectorCache(path)
    cache.put_many("model-a", {S1: _matrix(1), S2: _matrix(2, rows=1)})
    cache.put_many("model-b", {S1: _matrix(3)})
    got = cache.get_many("model-a", [S1, S2, S1, text_hash("unknown")])
    assert set(got) == {S1, S2}
    assert got[S1].tolist() == _matrix(1).ravel().tolist() and got[S2].tolist() == _matrix(2, rows=1).ravel().tolist()
    assert cache.get_many("model-b", [S1])[S1].tolist() == _matrix(3).ravel().tolist()  # the model is part of the key
    assert cache.known("model-b", [S1, S2]) == {S1}
    reader = TokenVectorCache(path, readonly=True)  # another process, mapping the file read-only
    assert reader.get_many("model-a", [S2])[S2].tolist() == _matrix(2, rows=1).ravel().tolist()
    cache.put_many("model-a", {S3: _matrix(4)})  # the file grew after the reader mapped it
    assert reader.get_many("model-a", [S3])[S3].tolist() == _matrix(4).ravel().tolist()
    reader.close()
    cache.close()
    assert len(_files(tmp_path)) == 1


def test_an_empty_or_missing_cache_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    EmbeddingCache(path).close()  # a cache with sentence vectors only
    reader = TokenVectorCache(path, readonly=True)
    assert reader.get_many("m", [S1]) == {} and reader.known("m", [S1]) == set()
    reader.close()
    cache = TokenVectorCache(path)
    assert cache.get_many("m", []) == {} and cache.get_many("m", [S1]) == {}
    cache.close()


def test_a_deleted_file_reads_as_empty_and_the_next_write_starts_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = TokenVectorCache(path)
    cache.put_many("m", {S1: _matrix(1)})
    old, = _files(tmp_path)
    old.unlink()
    fresh = TokenVectorCache(path)
    assert fresh.get_many("m", [S1]) == {} and fresh.known("m", [S1]) == set()  # embedded again by the caller
    fresh.put_many("m", {S2: _matrix(2)})
    new, = _files(tmp_path)
    assert new.name != old.name  # a reader still mapping the old file never reads new bytes at old offsets
    assert fresh.known("m", [S1, S2]) == {S2}
    assert cache.get_many("m", [S2])[S2].tolist() == _matrix(2).ravel().tolist()  # the older handle follows
    cache.close()
    fresh.close()


def test_a_file_cut_short_reads_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = TokenVectorCache(path)
    cache.put_many("m", {S1: _matrix(1)})
    cache.close()
    file, = _files(tmp_path)
    file.write_bytes(file.read_bytes()[:-1])
    reopened = TokenVectorCache(path)
    assert reopened.get_many("m", [S1]) == {}
    reopened.put_many("m", {S1: _matrix(1)})
    assert reopened.get_many("m", [S1])[S1].tolist() == _matrix(1).ravel().tolist()
    reopened.close()


def test_bytes_a_crash_left_past_the_end_are_cut_off_by_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = TokenVectorCache(path)
    cache.put_many("m", {S1: _matrix(1)})
    file, = _files(tmp_path)
    with open(file, "ab") as handle:  # appended, then killed before the rows were committed
        handle.write(b"\x7f" * 1000)
    assert cache.get_many("m", [S1])[S1].tolist() == _matrix(1).ravel().tolist()
    cache.put_many("m", {S2: _matrix(2)})
    assert file.stat().st_size == 2 * _matrix(1).nbytes
    assert cache.get_many("m", [S2])[S2].tolist() == _matrix(2).ravel().tolist()
    cache.close()


def test_a_row_of_another_text_under_the_same_key_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_cache, "_key", lambda model, sha: 1)  # every text collides
    cache = TokenVectorCache(tmp_path / "embeddings.sqlite")
    cache.put_many("m", {S1: _matrix(1)})
    cache.put_many("m", {S2: _matrix(2)})  # replaces s1's row: s1 is then unknown, never s2's matrix
    assert cache.get_many("m", [S1]) == {} and cache.known("m", [S1]) == set()
    assert cache.get_many("m", [S2])[S2].tolist() == _matrix(2).ravel().tolist()
    cache.close()


def _legacy_cache(path: Path) -> None:
    """Writes token vectors as an older engram did: BLOBs in the `token_vectors_i8` table."""
    old = EmbeddingCache(path, token_cache.LEGACY, np.int8)
    old.put_many("m", {S1: _matrix(1), S2: _matrix(2, rows=5)})
    old.put_many("other", {S1: _matrix(3)})
    old.close()


def test_an_older_cache_is_read_in_place_by_a_search(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    _legacy_cache(path)
    reader = TokenVectorCache(path, readonly=True)
    assert reader.get_many("m", [S1, S2, S3])[S2].tolist() == _matrix(2, rows=5).ravel().tolist()
    assert reader.known("m", [S1, S2, S3]) == {S1, S2}
    reader.close()
    assert _files(tmp_path) == []  # a read writes nothing


def test_an_older_cache_is_moved_into_the_file_on_the_first_writable_open(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    _legacy_cache(path)
    cache = TokenVectorCache(path)
    with sqlite3.connect(path) as db:
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (token_cache.LEGACY,)).fetchone()
    assert cache.get_many("m", [S1])[S1].tolist() == _matrix(1).ravel().tolist()
    assert cache.get_many("m", [S2])[S2].tolist() == _matrix(2, rows=5).ravel().tolist()
    assert cache.get_many("other", [S1])[S1].tolist() == _matrix(3).ravel().tolist()
    cache.close()
    again = TokenVectorCache(path)  # nothing left to move
    assert again.known("m", [S1, S2]) == {S1, S2}
    again.close()
    assert len(_files(tmp_path)) == 1
