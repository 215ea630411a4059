"""The flat vector store: exact answers, append-only writes, compaction, crashes, read-only reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from compiler.core.errors import CorruptDataError, InputError
from compiler.index import flat, flat_rows
from compiler.index.flat import FlatStore


def unit_rows(count: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def fill(store: FlatStore, vectors: np.ndarray, prefix: str = "v") -> list[str]:
    ids = [f"{prefix}{k}" for k in range(len(vectors))]
    store.add(ids, vectors, [f"text of {i}" for i in ids],
              [{"path": f"note{k % 5}.md", "project": "a" if k % 2 else "b", "line": k} for k, i in enumerate(ids)])
    return ids


def fresh_read(cache: Path, name: str = "c") -> FlatStore:
    """A reader as a new process has it: nothing remembered of earlier reads or writes."""
    flat_rows.SEEN.clear()
    return FlatStore(cache, name)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())}


def test_query_is_exact_brute_force_cosine(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(300)
    ids = fill(store, vectors)
    query = unit_rows(1, seed=9)[0]
    expected = np.argsort(-(vectors @ query))[:10]
    hits = fresh_read(tmp_path).query(query * 3.0, 10)  # any length: cosine, not dot product
    assert [h.id for h in hits] == [ids[k] for k in expected]
    assert [round(h.cosine, 5) for h in hits] == [round(float(vectors[k] @ query), 5) for k in expected]
    assert hits[0].document == f"text of {hits[0].id}"
    assert hits[0].metadata["line"] == int(hits[0].id[1:])


def test_where_filters_on_metadata(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(50)
    fill(store, vectors)
    query = unit_rows(1, seed=3)[0]
    hits = store.query(query, 100, {"project": "a"})
    assert len(hits) == 25 and {h.metadata["project"] for h in hits} == {"a"}
    assert [h.cosine for h in hits] == sorted((h.cosine for h in hits), reverse=True)
    assert {h.id for h in store.query(query, 100, {"path": {"$in": ["note1.md", "note2.md"]}})} == \
        {f"v{k}" for k in range(50) if k % 5 in (1, 2)}


def test_query_many_with_where_scores_only_the_matching_rows(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(120)
    fill(store, vectors)
    store.add(["v7"], unit_rows(1, seed=8), ["moved"], [{"project": "a", "kind": "failure"}])  # a dead row behind it
    queries = unit_rows(5, seed=4)
    for where in ({"project": "a"}, {"$and": [{"project": "a"}, {"kind": "failure"}]}, {"project": "none"}):
        many = fresh_read(tmp_path).query_many(queries, 6, where)
        single = [store.query(q, 6, where) for q in queries]
        assert [[i for i, _ in row] for row in many] == [[h.id for h in hits] for hits in single]
        assert np.allclose([[c for _, c in row] for row in many], [[h.cosine for h in hits] for hits in single])
    assert [i for i, _ in store.query_many(queries[:1], 6, {"$and": [{"project": "a"}, {"kind": "failure"}]})[0]] == ["v7"]
    assert all(int(i[1:]) % 2 for row in store.query_many(queries, 6, {"project": "a"}) for i, _ in row)


def test_a_store_made_before_the_project_kind_index_reads_the_same_and_gains_it_on_a_write(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(40))
    store.close()
    with sqlite3.connect(flat.store_path(tmp_path, "c")) as db:
        db.execute("DROP INDEX items_project_kind")  # as an older version left the store
    queries, where = unit_rows(3, seed=2), {"$and": [{"project": "a"}, {"kind": "memory"}]}
    store.add(["v1", "v3"], unit_rows(2, seed=6), ["one", "three"], [{"project": "a", "kind": "memory"}] * 2)
    before = fresh_read(tmp_path).query_many(queries, 5, {"project": "a"})
    assert [i for i, _ in fresh_read(tmp_path).query_many(queries, 5, where)[0]] and before
    with sqlite3.connect(flat.store_path(tmp_path, "c")) as db:
        plan = " ".join(str(r) for r in db.execute(
            "EXPLAIN QUERY PLAN SELECT row FROM items WHERE json_extract(metadata, '$.project') IN (?) "
            "AND json_extract(metadata, '$.kind') IN (?)", ["a", "memory"]))
    assert "INDEX items_project_kind" in plan  # the write recreated it


def test_query_many_matches_query_and_vectors_round_trip(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(120)
    ids = fill(store, vectors)
    queries = unit_rows(7, seed=5)
    many = fresh_read(tmp_path).query_many(queries, 4)
    single = [store.query(q, 4) for q in queries]
    assert [[i for i, _ in row] for row in many] == [[h.id for h in hits] for hits in single]
    assert np.allclose([[c for _, c in row] for row in many], [[h.cosine for h in hits] for hits in single])
    stored = store.vectors([ids[7], "unknown", ids[3], ids[7]])  # read in one step: any order, repeats
    assert sorted(stored) == [ids[3], ids[7]]
    assert np.allclose(stored[ids[3]], vectors[3]) and np.allclose(stored[ids[7]], vectors[7])


def test_overwrite_appends_and_the_new_vector_wins(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(10)
    fill(store, vectors)
    rows_file = next(tmp_path.glob("flat/c.*.f32"))
    size = rows_file.stat().st_size
    store.add(["v2"], vectors[7:8], ["new text"], [{"project": "z"}])
    assert rows_file.stat().st_size == size + 16 * 4  # one row appended, nothing rewritten
    reader = fresh_read(tmp_path)
    assert reader.count() == 10
    assert np.allclose(reader.vectors(["v2"])["v2"], vectors[7])
    top = reader.query(vectors[7], 2)
    assert {h.id for h in top} == {"v2", "v7"} and reader.query(vectors[7], 1, {"project": "z"})[0].document == "new text"


def test_delete_ids_and_paths(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(20))
    store.delete_ids(["v0", "v1", "nope"])
    store.delete_paths(["note4.md"])  # v4, v9, v14, v19
    reader = fresh_read(tmp_path)
    assert reader.count() == 14
    assert set(reader.ids()) == {f"v{k}" for k in range(2, 20) if k % 5 != 4}
    assert all(h.id in reader.ids() for h in reader.query(unit_rows(1)[0], 20))


def test_compaction_rewrites_live_rows_once_dead_ones_outnumber_them(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(flat, "COMPACT_MIN", 8)
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(10)
    fill(store, vectors)
    for round_ in range(3):  # 30 overwrites: dead rows pass live ones, the file is rewritten
        for k in range(10):
            store.add([f"v{k}"], vectors[k:k + 1], [f"round {round_}"], [{"k": k}])
    files = list(tmp_path.glob("flat/c.*.f32"))
    assert len(files) == 1 and files[0].name != "c.0.f32"  # the old file is gone
    assert files[0].stat().st_size < 40 * 16 * 4
    reader = fresh_read(tmp_path)
    assert reader.count() == 10
    assert [h.id for h in reader.query(vectors[4], 1)] == ["v4"]
    assert reader.query(vectors[4], 1)[0].document == "round 2"
    assert all(np.allclose(reader.vectors([f"v{k}"])[f"v{k}"], vectors[k]) for k in range(10))


def test_a_torn_append_is_never_read_and_the_next_write_cuts_it(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    vectors = unit_rows(5)
    fill(store, vectors)
    rows_file = next(tmp_path.glob("flat/c.*.f32"))
    with open(rows_file, "ab") as handle:  # a crash after appending, before the commit: a row and a half
        handle.write(np.ones(24, dtype=np.float32).tobytes())
    reader = fresh_read(tmp_path)
    assert reader.count() == 5 and len(reader.query(np.ones(16, dtype=np.float32), 10)) == 5
    store.add(["w"], unit_rows(1, seed=4), ["w"], [{}])
    assert rows_file.stat().st_size == 6 * 16 * 4
    reader = fresh_read(tmp_path)
    assert np.allclose(reader.vectors(["w"])["w"], unit_rows(1, seed=4)[0])
    assert np.allclose(reader.vectors(["v4"])["v4"], vectors[4])


def test_a_write_that_fails_before_its_commit_leaves_the_store_as_it_was(tmp_path: Path, monkeypatch) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(5))
    before = fresh_read(tmp_path).ids()

    def crash(db: sqlite3.Connection, **values: object) -> None:
        raise OSError("killed")

    monkeypatch.setattr(flat, "set_state", crash)  # rows appended, ids inserted, then the process "dies"
    with pytest.raises(OSError):
        store.add(["new"], unit_rows(1, seed=8), ["new"], [{}])
    monkeypatch.undo()
    reader = fresh_read(tmp_path)
    assert reader.ids() == before and reader.vectors(["new"]) == {}
    assert len(reader.query(unit_rows(1, seed=8)[0], 10)) == 5


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    assert not store.usable() and store.count() == 0
    assert store.query(unit_rows(1)[0], 5) == [] and store.query_many(unit_rows(2), 5) == [[], []]
    assert store.vectors(["a"]) == {} and store.unmirrored() == (False, [])
    store.delete_ids(["a"])
    store.delete_paths(["a.md"])
    assert list(tmp_path.iterdir()) == []


def test_reads_write_not_a_byte_nor_an_mtime(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(30))
    store.close()
    before = snapshot(tmp_path / "flat")
    reader = fresh_read(tmp_path)
    reader.query(unit_rows(1)[0], 5, {"project": "a"})
    reader.query_many(unit_rows(3), 5)
    reader.vectors(["v1"])
    reader.records(["v2"])
    reader.unmirrored()
    reader.close()
    assert snapshot(tmp_path / "flat") == before


def test_a_reader_sees_each_commit_and_own_writes_keep_its_snapshot_right(tmp_path: Path) -> None:
    reader = fresh_read(tmp_path)
    writer = FlatStore(tmp_path, "c")
    vectors = unit_rows(40)
    fill(writer, vectors[:20])
    assert reader.count() == 20
    fill(writer, vectors[20:], prefix="w")  # updated in place from the writer's own changes
    writer.delete_ids(["v3"])
    writer.add(["v5"], vectors[30:31], ["moved"], [{}])
    incremental = (reader.ids(), reader.query_many(vectors[:6], 5))
    assert incremental == (fresh_read(tmp_path).ids(), fresh_read(tmp_path).query_many(vectors[:6], 5))
    assert "v3" not in incremental[0] and reader.count() == 39


def test_own_appends_are_read_from_memory_until_the_tail_is_long(tmp_path: Path, monkeypatch) -> None:
    """Mapping the row file again after every write made the next read fault in each page it
    touched; the writer keeps its appended rows in memory instead, with the same answers."""
    monkeypatch.setattr(flat_rows, "TAIL_MAX", 6)
    writer, vectors, where = FlatStore(tmp_path, "c"), unit_rows(60), {"project": "a"}
    fill(writer, vectors[:40])
    writer.query_many(vectors[:1], 3, where)
    mapped = flat_rows.SEEN[str(writer.path)].mapped
    writer.add(["n1", "n2"], vectors[40:42], ["one", "two"], [{"project": "a"}] * 2)
    writer.add(["v1", "n3"], vectors[42:44], ["moved", "three"], [{"project": "a"}] * 2)  # v1 overwritten
    snap = flat_rows.SEEN[str(writer.path)]
    assert snap.mapped is mapped and len(snap.tail) == 4
    assert [len(g.rows) for g in snap.groups.values()] == [24]  # the project's 20 rows (v1's old one now dead) and the 4 appended
    own = (writer.query_many(vectors[38:44], 4, where), writer.vectors(["n2", "v1", "v3"]))
    fresh = fresh_read(tmp_path)
    assert own[0] == fresh.query_many(vectors[38:44], 4, where)
    assert all(np.array_equal(own[1][i], v) for i, v in fresh.vectors(["n2", "v1", "v3"]).items())
    assert all(np.array_equal(own[1][i], snap.row(snap.row_of[i])) for i in ("n2", "v1", "v3"))  # tail and map
    writer = FlatStore(tmp_path, "c")
    writer.query_many(vectors[:1], 3, where)
    writer.add([f"m{k}" for k in range(7)], vectors[44:51], ["m"] * 7, [{"project": "b"}] * 7)  # past TAIL_MAX
    assert len(flat_rows.SEEN[str(writer.path)].tail) == 0
    writer.add(["m9"], vectors[51:52], ["m"], [{"project": "b"}])
    assert writer.query_many(vectors[40:52], 5) == fresh_read(tmp_path).query_many(vectors[40:52], 5)  # a full scan


def test_a_damaged_store_reads_as_empty_and_reset_rebuilds_it(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(5))
    store.close()
    store.path.write_bytes(b"not a database at all" * 100)
    damaged = fresh_read(tmp_path)
    assert not damaged.usable() and damaged.count() == 0
    damaged.reset()
    fill(damaged, unit_rows(3))
    assert fresh_read(tmp_path).count() == 3


def test_a_write_fsyncs_its_rows_and_commits_at_synchronous_normal(tmp_path: Path, monkeypatch) -> None:
    """The rows are synced before the commit that names them (a power loss never leaves a named row
    unwritten); the derived store's commit syncs at NORMAL, not FULL (three syncs a write)."""
    store = FlatStore(tmp_path, "c")
    synced: list[str] = []
    real = flat.os.fsync
    monkeypatch.setattr(flat.os, "fsync", lambda fd: (synced.append(flat.os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    fill(store, unit_rows(5))
    assert any(p.endswith(".f32") for p in synced)
    assert store._writer().execute("PRAGMA synchronous").fetchone() == (1,)


def test_a_short_row_file_reads_as_empty(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(5))
    rows_file = next(tmp_path.glob("flat/c.*.f32"))
    rows_file.write_bytes(rows_file.read_bytes()[:100])
    assert not fresh_read(tmp_path).usable()


def test_reset_and_a_new_width(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(5))
    with pytest.raises(InputError, match="16-dimensional"):
        store.add(["x"], unit_rows(1, dim=8), ["x"], [{}])
    with pytest.raises(InputError, match="16-dimensional"):
        store.query(unit_rows(1, dim=8)[0], 3)
    store.reset()
    fill(store, unit_rows(4, dim=8))
    reader = fresh_read(tmp_path)
    assert reader.count() == 4 and len(reader.query(unit_rows(1, dim=8)[0], 9)) == 4
    assert len(list(tmp_path.glob("flat/c.*.f32"))) == 1


def test_changes_are_listed_until_mirrored(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(3))
    assert store.unmirrored() == (True, ["v0", "v1", "v2"])  # a new store: Chroma is rebuilt whole
    store.mirrored(True, ["v0", "v1", "v2"])
    assert store.unmirrored() == (False, [])
    store.delete_ids(["v1"])
    store.add(["v9"], unit_rows(1), ["x"], [{}])
    assert store.unmirrored() == (False, ["v1", "v9"])
    store.reset()
    assert store.unmirrored() == (True, [])


def test_a_state_missing_a_key_reads_as_empty_and_a_write_says_so_in_one_line(tmp_path: Path) -> None:
    store = FlatStore(tmp_path, "c")
    fill(store, unit_rows(3))
    store._writer().execute("DELETE FROM state WHERE key = 'dead'")
    assert not fresh_read(tmp_path).usable()
    with pytest.raises(CorruptDataError, match="lacks dead"):
        store.add(["x"], unit_rows(1), ["x"], [{}])
    store.reset()
    fill(store, unit_rows(2))
    assert fresh_read(tmp_path).count() == 2
