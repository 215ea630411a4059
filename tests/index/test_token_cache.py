"""The token-vector cache: int8 matrices in an append-only file, an older cache's BLOBs moved over,
a deleted or torn file read as empty and started again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from compiler.index import token_bytes, token_cache
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


def test_an_older_cache_is_read_in_place_until_compile_moves_it_batch_by_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "embeddings.sqlite"
    _legacy_cache(path)
    cache = TokenVectorCache(path)  # opening it writes nothing: a memory server starts at once
    assert _files(tmp_path) == [] and cache.known("m", [S1, S2, S3]) == {S1, S2}
    cache.put_many("m", {S3: _matrix(4)})  # a new text goes to the file
    monkeypatch.setattr(token_cache, "_MOVE_BATCH", 1)  # a transaction per row
    calls = {"n": 0}
    real = TokenVectorCache._append

    def killed_after_two(self: TokenVectorCache, *args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        real(self, *args, **kwargs)

    monkeypatch.setattr(TokenVectorCache, "_append", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        cache.compact({"m": {S1, S2, S3}, "other": {S1}})
    reader = TokenVectorCache(path, readonly=True)  # half moved: every text is in one place or the other
    for model, sha, matrix in (("m", S1, _matrix(1)), ("m", S2, _matrix(2, rows=5)), ("other", S1, _matrix(3)),
                               ("m", S3, _matrix(4))):
        assert reader.get_many(model, [sha])[sha].tolist() == matrix.ravel().tolist()
    reader.close()
    monkeypatch.setattr(TokenVectorCache, "_append", real)
    cache.compact({"m": {S1, S2, S3}, "other": {S1}})  # the next compile goes on where it stopped
    with sqlite3.connect(path) as db:
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (token_cache.LEGACY,)).fetchone()
    assert cache.get_many("m", [S2])[S2].tolist() == _matrix(2, rows=5).ravel().tolist()
    assert cache.get_many("other", [S1])[S1].tolist() == _matrix(3).ravel().tolist()
    cache.close()
    assert len(_files(tmp_path)) == 1


# -- compaction ---------------------------------------------------------------------------------

TEXTS = [text_hash(f"text {k}") for k in range(40)]


def _filled(path: Path) -> TokenVectorCache:
    """Returns a cache holding TEXTS (model m), each written twice (the first copy dead)."""
    cache = TokenVectorCache(path)
    for seed in (0, 1):
        cache.put_many("m", {sha: _matrix(k + 100 * seed, rows=1 + k % 5) for k, sha in enumerate(TEXTS)})
    return cache


def _expected(k: int) -> list[int]:
    return _matrix(k + 100, rows=1 + k % 5).ravel().tolist()


def _never_wrong(path: Path, live: list[int]) -> int:
    """Asserts every text reads back its own matrix or not at all; returns how many read back."""
    cache = TokenVectorCache(path, readonly=True)
    got = cache.get_many("m", TEXTS)
    cache.close()
    for k, sha in enumerate(TEXTS):
        assert sha not in got or got[sha].tolist() == _expected(k)
    return sum(1 for k in live if TEXTS[k] in got)


def test_compaction_keeps_the_texts_in_use_and_a_reader_of_the_old_file_follows(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = _filled(path)
    reader = TokenVectorCache(path, readonly=True)  # another process: maps the old file
    assert reader.get_many("m", TEXTS[:1])[TEXTS[0]].tolist() == _expected(0)
    old, = _files(tmp_path)
    size = old.stat().st_size
    live = list(range(0, 40, 3))
    usage = cache.compact({"m": {TEXTS[k] for k in live}, "gone-model": {TEXTS[1]}}, share=0.5, floor=0)
    new, = _files(tmp_path)
    assert usage.compacted and new.name != old.name and usage.file_bytes == size
    assert new.stat().st_size == usage.bytes_after == usage.live_bytes < size / 4
    assert cache.known("m", TEXTS) == {TEXTS[k] for k in live}
    got = reader.get_many("m", TEXTS)  # the old file is unlinked: the reader maps the new one
    assert set(got) == {TEXTS[k] for k in live} and all(got[TEXTS[k]].tolist() == _expected(k) for k in live)
    cache.put_many("m", {TEXTS[1]: _matrix(101, rows=2)})  # writes go on after the new end
    assert reader.get_many("m", [TEXTS[1]])[TEXTS[1]].tolist() == _expected(1)
    assert token_bytes.usage_found(path) == token_bytes.Usage(usage.bytes_after + _matrix(1, rows=2).nbytes,
                                                              usage.bytes_after + _matrix(1, rows=2).nbytes,
                                                              bytes_after=usage.bytes_after + _matrix(1, rows=2).nbytes)
    reader.close()
    cache.close()


def test_a_file_mostly_in_use_is_not_rewritten_but_its_usage_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = _filled(path)  # half its bytes dead: not more than half
    old, = _files(tmp_path)
    usage = cache.compact({"m": set(TEXTS)}, share=0.5, floor=0)
    assert not usage.compacted and usage.dead_share == pytest.approx(0.5) and _files(tmp_path) == [old]
    assert cache.compact({"m": set()}, floor=old.stat().st_size).compacted is False  # under the floor
    found = token_bytes.usage_found(path)
    assert found is not None and found.dead_share == 1.0
    cache.close()


def test_rows_written_by_another_process_during_the_copy_are_kept(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = _filled(path)
    other = TokenVectorCache(path)  # a memory server filling a recall's missing texts meanwhile
    real = TokenVectorCache._copy

    def copy_while_another_writes(self: TokenVectorCache, *args: object) -> object:
        copied = real(self, *args)
        other.put_many("m", {S1: _matrix(7), TEXTS[2]: _matrix(555, rows=2)})  # TEXTS[2] re-embedded
        return copied

    monkeypatch.setattr(TokenVectorCache, "_copy", copy_while_another_writes)
    cache.compact({"m": {TEXTS[0], TEXTS[2]}}, floor=0)
    assert cache.get_many("m", [S1])[S1].tolist() == _matrix(7).ravel().tolist()
    assert cache.get_many("m", [TEXTS[0]])[TEXTS[0]].tolist() == _expected(0)
    assert cache.get_many("m", [TEXTS[2]])[TEXTS[2]].tolist() == _matrix(555, rows=2).ravel().tolist()  # the newer row
    assert other.known("m", [S1, *TEXTS]) == {S1, TEXTS[0], TEXTS[2]}
    other.close()
    cache.close()
    assert len(_files(tmp_path)) == 1


def test_a_compaction_that_lost_the_race_to_a_new_file_swaps_nothing(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = _filled(path)
    real = TokenVectorCache._copy

    def copy_while_the_file_is_deleted(self: TokenVectorCache, *args: object) -> object:
        copied = real(self, *args)
        for file in _files(tmp_path):
            file.unlink()
        other = TokenVectorCache(path)
        other.put_many("m", {S1: _matrix(7)})  # starts a new file
        other.close()
        return copied

    monkeypatch.setattr(TokenVectorCache, "_copy", copy_while_the_file_is_deleted)
    assert not cache.compact({"m": {TEXTS[0]}}, floor=0).compacted
    assert cache.known("m", [S1, *TEXTS]) == {S1}
    assert list(tmp_path.glob("*.part")) == [] and len(_files(tmp_path)) == 1
    cache.close()


FAILURES = ["copy", "tail", "rename", "fsync", "commit", "cleanup"]


@pytest.mark.parametrize("step", FAILURES)
def test_a_compaction_failing_at_any_step_leaves_right_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                step: str) -> None:
    path = tmp_path / "embeddings.sqlite"
    cache = _filled(path)
    live = list(range(0, 40, 2))

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError(f"injected at {step}")

    if step == "copy":
        monkeypatch.setattr(token_cache.os, "fsync", fail)
    elif step == "tail":
        monkeypatch.setattr(token_cache, "write_after", fail)
    elif step == "rename":
        monkeypatch.setattr(token_cache.os, "replace", fail)
    elif step == "fsync":
        monkeypatch.setattr(token_cache, "fsync_folder", fail)
    elif step == "commit":
        monkeypatch.setattr(TokenVectorCache, "_record", fail)  # fails after the swap committed: see cleanup
        real = token_cache.fsync_folder

        def then_commit_fails(folder: Path) -> None:
            real(folder)
            cache._db.execute("CREATE TEMP TRIGGER no_commit BEFORE UPDATE ON token_file_i8 "
                              "BEGIN SELECT RAISE(ABORT, 'injected at commit'); END")

        monkeypatch.setattr(token_cache, "fsync_folder", then_commit_fails)
    else:
        monkeypatch.setattr(TokenVectorCache, "_record", fail)
    with pytest.raises((OSError, sqlite3.DatabaseError)):
        cache.compact({"m": {TEXTS[k] for k in live}}, floor=0)
    cache.close()
    monkeypatch.undo()
    expected = len(live) if step != "cleanup" else len(live)
    assert _never_wrong(path, live) == expected  # a failed compaction loses nothing in use
    again = TokenVectorCache(path)
    again.put_many("m", {S1: _matrix(7)})  # the next write removes what the failure left
    again.compact({"m": {TEXTS[k] for k in live} | {S1}}, floor=0)
    assert _never_wrong(path, live) == len(live)
    assert list(tmp_path.glob("*.part")) == [] and len(_files(tmp_path)) == 1
    again.close()


KILLER = """
import sys, numpy as np
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from compiler.index.token_cache import TokenVectorCache
from compiler.index.cache import text_hash
TEXTS = [text_hash(f"text {k}") for k in range(40)]
cache = TokenVectorCache(Path(sys.argv[1]))
print("ready", flush=True)
for round in range(10**6):  # killed from outside; each round moves every matrix somewhere else
    cache.put_many("m", {sha: np.full((1 + k % 5 + round % 3, 4), k, np.int8)
                         for k, sha in enumerate(TEXTS) if (k + round) % 3})
    cache.compact({"m": set(TEXTS[round % 2::2])}, floor=0, share=0.0)
"""


def _own_or_none(path: Path) -> int:
    """Asserts every text reads back a matrix the killed writer wrote for it (each byte its
    number, a length it wrote) or nothing; returns how many read back."""
    cache = TokenVectorCache(path, readonly=True)
    got = cache.get_many("m", TEXTS)
    cache.close()
    for k, sha in enumerate(TEXTS):
        if sha in got:
            assert set(got[sha].tolist()) == {k} and len(got[sha]) in {4 * (1 + k % 5 + r) for r in range(3)}
    return len(got)


def test_a_process_killed_anywhere_in_a_compaction_leaves_right_vectors(tmp_path: Path) -> None:
    import random
    import subprocess
    import sys
    import time

    path = tmp_path / "embeddings.sqlite"
    TokenVectorCache(path).close()
    rng = random.Random(5)
    for _ in range(12):
        child = subprocess.Popen([sys.executable, "-c", KILLER, str(path), str(Path(__file__).parents[2])],
                                 stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.2))
        child.kill()
        child.wait()
        _own_or_none(path)
    cache = TokenVectorCache(path)
    cache.put_many("m", {TEXTS[0]: np.full((1, 4), 0, np.int8)})
    cache.compact({"m": set(TEXTS)}, floor=0, share=0.0)
    assert _own_or_none(path) >= 1 and list(tmp_path.glob("*.part")) == [] and len(_files(tmp_path)) == 1
    cache.close()


def test_a_file_unlinked_between_reading_its_name_and_mapping_it_is_looked_for_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "embeddings.sqlite"
    _filled(path).close()
    reader = TokenVectorCache(path, readonly=True)
    real, missed = TokenVectorCache._data, []

    def gone_once(self: TokenVectorCache, name: str, end: int) -> object:
        if not missed:  # a compaction's swap committed and its old file went just now
            missed.append(name)
            return None
        return real(self, name, end)

    monkeypatch.setattr(TokenVectorCache, "_data", gone_once)
    assert reader.get_many("m", [TEXTS[3]])[TEXTS[3]].tolist() == _expected(3)  # not read as missing
    assert missed
    reader.close()


def test_a_search_opened_while_no_writer_was_open_never_reads_wrong_vectors_after_a_compaction(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    many = [text_hash(f"many {k}") for k in range(3000)]  # rows over many pages: the reader caches few
    cache = TokenVectorCache(path)
    for seed in (0, 1):
        cache.put_many("m", {sha: np.full((1 + k % 3, 4), k % 100 + seed, np.int8) for k, sha in enumerate(many)})
    cache.close()  # the last connection checkpoints and removes the -wal file
    assert not Path(f"{path}-wal").exists()
    reader = TokenVectorCache(path, readonly=True)  # immutable: it sees no later transaction
    assert reader.get_many("m", many[:1])[many[0]].tolist() == [1] * 4
    writer = TokenVectorCache(path)
    writer.compact({"m": set(many[::7])}, floor=0)
    writer.close()  # checkpointed into the file the reader reads
    got = reader.get_many("m", many)  # reads as empty, or (pages it had cached) right: never wrong
    assert all(got[sha].tolist() == [k % 100 + 1] * (4 * (1 + k % 3)) for k, sha in enumerate(many) if sha in got)
    reader.close()
