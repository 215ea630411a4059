"""The flat store's kept matrices (`flat_query.Group`): a `where`'s rows gathered once per process
and snapshot, extended by the process's own writes, compacted, bounded — with the answers of a
fresh read: the same ids in the same order, the same cosines to the last bit or two (a kept
matrix may hold dead rows, which moves a row's place in the product, and BLAS sums a row's
products in an order that depends on its place)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from compiler.index import flat_query, flat_rows
from compiler.index.flat import FlatStore

PROJECT_A = {"project": "a"}
A_MEMORY = {"$and": [{"project": "a"}, {"kind": "memory"}]}


def unit_rows(count: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def meta(k: int) -> dict:
    return {"project": "ab"[k % 2], "kind": "memory" if k % 3 else "failure"}


def fresh_read(cache: Path) -> FlatStore:
    flat_rows.SEEN.clear()
    return FlatStore(cache, "c")


def answers(store: FlatStore, queries: np.ndarray, where: dict) -> tuple:
    return store.query_many(queries, 7, where), [[(h.id, h.cosine) for h in store.query(q, 7, where)] for q in queries]


def same(one: list, other: list) -> bool:
    """True when two answers (lists of hit lists) name the same ids in the same order, with cosines equal to 1e-6."""
    ids = [[i for i, _ in hits] for hits in one] == [[i for i, _ in hits] for hits in other]
    return ids and all(np.allclose([c for _, c in a], [c for _, c in b], rtol=0, atol=1e-6) for a, b in zip(one, other))


def same_answers(one: tuple, other: tuple) -> bool:
    return same(one[0], other[0]) and same(one[1], other[1])


def kept(store: FlatStore) -> dict[str, flat_query.Group]:
    return flat_rows.SEEN[str(store.path)].groups


def test_the_kept_matrix_follows_own_writes_and_answers_as_a_fresh_read(tmp_path: Path) -> None:
    writer, vectors, queries = FlatStore(tmp_path, "c"), unit_rows(200), unit_rows(6, seed=1)
    writer.add([f"v{k}" for k in range(120)], vectors[:120], ["t"] * 120, [meta(k) for k in range(120)])
    writer.query_many(queries, 5, PROJECT_A)
    writer.query(queries[0], 5, A_MEMORY)
    matrices = {key: group.matrix for key, group in kept(writer).items()}
    for start in range(120, 200, 16):  # new rows, overwrites (a dead row each) and deletions, one write at a time
        ids = [f"v{k}" for k in range(start, start + 12)] + [f"v{k}" for k in range(start - 100, start - 96)]
        writer.add(ids, vectors[start:start + 16], ["t"] * 16, [meta(k) for k in range(start, start + 16)])
        writer.delete_ids([f"v{start - 50}"])
        own = [answers(writer, queries, where) for where in (PROJECT_A, A_MEMORY)]
        fresh = [answers(fresh_read(tmp_path), queries, where) for where in (PROJECT_A, A_MEMORY)]
        assert all(same_answers(o, f) for o, f in zip(own, fresh))
        writer = FlatStore(tmp_path, "c")  # the same process: the snapshot the writes advanced is kept
        flat_rows.SEEN.clear()
        writer.query_many(queries, 5, PROJECT_A), writer.query(queries[0], 5, A_MEMORY)
    groups = kept(writer)
    writer.add(["n1", "n2"], unit_rows(2, seed=3), ["t", "t"], [{"project": "a", "kind": "memory"}, {"project": "b"}])
    assert all(len(g.rows) == len(g.matrix) for g in groups.values())
    assert {k: len(g.rows) for k, g in kept(writer).items()} == {k: len(g.rows) for k, g in groups.items()}
    assert matrices  # both wheres were kept, with their matrices
    rows = kept(writer)[repr(flat_query.where_clauses(PROJECT_A))]
    snap = flat_rows.SEEN[str(writer.path)]
    assert np.array_equal(rows.matrix, np.vstack([snap.row(r) for r in rows.rows]))


def test_a_group_is_compacted_when_its_dead_rows_pass_a_quarter_of_its_live_ones(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(flat_query, "GROUP_COMPACT_MIN", 4)
    writer, vectors, queries = FlatStore(tmp_path, "c"), unit_rows(60), unit_rows(3, seed=2)
    writer.add([f"v{k}" for k in range(20)], vectors[:20], ["t"] * 20, [{"project": "a"}] * 20)
    writer.query_many(queries, 3, PROJECT_A)
    key = repr(flat_query.where_clauses(PROJECT_A))
    sizes = []
    for k in range(20, 27):  # each overwrites one of the first: its row dies, the new one is kept
        writer.add([f"v{k - 20}"], vectors[k:k + 1], ["t"], [{"project": "a"}])
        own = writer.query_many(queries, 5, PROJECT_A)
        group = kept(writer)[key]
        sizes.append((len(group.rows), len(group.matrix)))
    assert sizes == [(21, 21), (22, 22), (23, 23), (24, 24), (25, 25), (20, 20), (21, 21)]  # 6 dead > 20 // 4
    assert own == fresh_read(tmp_path).query_many(queries, 5, PROJECT_A)  # compacted: the fresh read's matrix


def test_kept_matrices_stay_within_the_bound_least_recently_used_dropped_first(tmp_path: Path, monkeypatch) -> None:
    writer, vectors, queries = FlatStore(tmp_path, "c"), unit_rows(90), unit_rows(4, seed=5)
    projects = [{"project": p} for p in "xyz"]
    writer.add([f"v{k}" for k in range(90)], vectors, ["t"] * 90, [projects[k % 3] for k in range(90)])
    monkeypatch.setattr(flat_query, "GROUP_CACHE_BYTES", 2 * 30 * 16 * 4)  # two projects' matrices
    expected = [fresh_read(tmp_path).query_many(queries, 4, where) for where in projects]
    writer = fresh_read(tmp_path)
    assert [writer.query_many(queries, 4, where) for where in projects] == expected
    groups = kept(writer)
    assert [g.matrix is not None for g in groups.values()] == [False, True, True]  # x, the oldest, dropped
    assert writer.query_many(queries, 4, projects[0]) == expected[0]
    assert [g.matrix is not None for g in groups.values()] == [True, False, True]
    monkeypatch.setattr(flat_query, "GROUP_CACHE_BYTES", 100)  # none fits: gathered for each query
    flat_rows.SEEN.clear()
    assert [writer.query_many(queries, 4, where) for where in projects] == expected
    assert all(g.matrix is None for g in kept(writer).values())


def test_a_where_on_other_than_text_values_is_answered_but_not_kept(tmp_path: Path) -> None:
    store, vectors = FlatStore(tmp_path, "c"), unit_rows(30)
    store.add([f"v{k}" for k in range(30)], vectors, ["t"] * 30, [{"line": k % 3} for k in range(30)])
    hits = store.query_many(vectors[:2], 30, {"line": 1})
    assert [sorted(i for i, _ in row) for row in hits] == [sorted(f"v{k}" for k in range(30) if k % 3 == 1)] * 2
    assert kept(store) == {}
