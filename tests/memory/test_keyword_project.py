"""The memory keyword index keeps each project's rows in one rowid range: the same hits and BM25 as
filtering every match, and a cache an older engram wrote is moved over and answers the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from compiler.index.keywords import TOKENIZER, match_expression
from compiler.memory.index import PROJECT_SHIFT, TABLE, WEIGHTS, MemoryKeywordIndex

OLD = "memories_v4"  # the table the previous engram wrote

WORDS = ["deploy", "staging", "cluster", "billing", "worker", "queue", "timeout", "retry"]


def rows(count: int) -> list[tuple[str, ...]]:
    """(id, project, text_sha, title, content, context, context2) rows over three projects."""
    return [(f"m{k:03d}", f"p{k % 3}", f"sha{k}", "", " ".join(WORDS[(k * j) % len(WORDS)] for j in range(1, 2 + k % 5)),
             WORDS[k % len(WORDS)] if k % 4 == 0 else "", "") for k in range(count)]


def filtered_by_hand(index: MemoryKeywordIndex, query: str, project: str, limit: int,
                     projects: dict[str, str]) -> list[tuple[str, float]]:
    """What a project's search means: every match, scored over the whole table, then kept when in the project."""
    every = index.search(query, 10_000)
    return [(h.id, round(h.bm25, 9)) for h in every if projects[h.id] == project][:limit]


def test_project_search_equals_filtering_every_match(tmp_path: Path) -> None:
    index = MemoryKeywordIndex(tmp_path / "memories.sqlite")
    data = rows(90)
    index.replace([], data)
    projects = {r[0]: r[1] for r in data}
    for query in ("deploy the staging cluster", "billing worker timeout", "retry"):
        for project in ("p0", "p1", "p2"):
            hits = [(h.id, round(h.bm25, 9)) for h in index.search(query, 7, project)]
            assert hits and hits == filtered_by_hand(index, query, project, 7, projects)
    assert index.search("deploy", 5, "no-such-project") == []
    index.close()


def test_replaced_and_deleted_rows_change_project(tmp_path: Path) -> None:
    index = MemoryKeywordIndex(tmp_path / "memories.sqlite")
    index.replace([], [("a", "p1", "s", "", "deploy staging", "", ""), ("b", "p1", "s", "", "deploy", "", "")])
    index.replace(["a"], [("a", "p2", "s2", "", "deploy staging", "", "")])  # moved to another project
    index.replace(["b"], [])
    assert [h.id for h in index.search("deploy", 5, "p1")] == []
    assert [h.id for h in index.search("deploy", 5, "p2")] == ["a"]
    index.close()


def test_a_projects_rows_are_one_rowid_range(tmp_path: Path) -> None:
    """What lets FTS5 walk one project's matches only: its rows, rewritten or not, share a range."""
    index = MemoryKeywordIndex(tmp_path / "memories.sqlite")
    index.replace([], rows(30))
    index.replace(["m004", "m007"], [r for r in rows(30) if r[0] in ("m004", "m007")])  # re-indexed rows
    placed = index._db.execute(f"SELECT f.rowid, f.project, p.rowid FROM {TABLE} AS f "
                               f"JOIN {TABLE}_projects AS p ON p.project = f.project").fetchall()
    assert len(placed) == 30 and {project for _, project, _ in placed} == {"p0", "p1", "p2"}
    assert all(rowid >> PROJECT_SHIFT == number for rowid, _, number in placed)
    assert dict(index._db.execute(f"SELECT rowid, id FROM {TABLE}_rows")) == \
        dict(index._db.execute(f"SELECT rowid, id FROM {TABLE}"))  # the rows table names the same rowids
    index.close()


def write_old_cache(path: Path, data: list[tuple[str, ...]], *, projects: bool = True) -> None:
    """The memory keyword index as the previous engram wrote it: rows numbered in write order, its
    rows table of (id, text_sha, project) — or of (id, text_sha) only, as the one before wrote it."""
    db = sqlite3.connect(path)
    db.execute(f"CREATE VIRTUAL TABLE {OLD} USING fts5(id UNINDEXED, project UNINDEXED, text_sha UNINDEXED, "
               f"title, content, context, context2, tokenize='{TOKENIZER}')")
    db.execute(f"CREATE TABLE {OLD}_rows (id TEXT PRIMARY KEY, text_sha TEXT{', project TEXT' if projects else ''})")
    for row in data:
        rowid = db.execute(f"INSERT INTO {OLD}_rows (id, text_sha) VALUES (?, ?)", (row[0], row[2])).lastrowid
        db.execute(f"INSERT INTO {OLD} (rowid, id, project, text_sha, title, content, context, context2) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (rowid, *row))
    db.commit()
    db.close()


@pytest.mark.parametrize("projects", [True, False])
def test_an_old_cache_is_moved_over_and_answers_the_same(tmp_path: Path, projects: bool) -> None:
    data = rows(60)
    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    write_old_cache(old, data, projects=projects)
    fresh = MemoryKeywordIndex(new)
    fresh.replace([], data)
    migrated = MemoryKeywordIndex(old)
    assert not migrated._db.execute("SELECT name FROM sqlite_master WHERE name LIKE ?", (f"{OLD}%",)).fetchall()
    for project in ("p0", "p2", ""):
        expected = [(h.id, h.bm25) for h in fresh.search("deploy staging worker", 10, project)]
        assert expected and [(h.id, h.bm25) for h in migrated.search("deploy staging worker", 10, project)] == expected
    assert migrated.hashes() == fresh.hashes()  # nothing to re-index: sync_index sees every row current
    migrated.replace([], [("new", "p1", "s", "", "deploy staging worker", "", "")])  # numbered after the moved rows
    assert "new" in [h.id for h in migrated.search("deploy staging worker", 100, "p1")]
    migrated.close()
    fresh.close()
    MemoryKeywordIndex(old).close()  # opening it again changes nothing


def test_an_old_table_written_after_the_move_is_dropped(tmp_path: Path) -> None:
    """An older engram writing to a moved cache recreates its own table: the next open drops it and
    keeps the current rows (what the old one added is in the journal, for sync_index to index)."""
    path = tmp_path / "memories.sqlite"
    index = MemoryKeywordIndex(path)
    index.replace([], [("a", "p1", "s", "", "deploy staging", "", "")])
    index.close()
    write_old_cache(path, [("b", "p1", "s", "", "deploy", "", "")])
    index = MemoryKeywordIndex(path)
    assert [h.id for h in index.search("deploy", 5, "p1")] == ["a"]
    assert not index._db.execute("SELECT name FROM sqlite_master WHERE name LIKE ?", (f"{OLD}%",)).fetchall()
    index.close()


def test_search_answers_what_ordering_every_match_by_score_and_id_answers(tmp_path: Path) -> None:
    """The search reads the id of the matches up to the limit-th score only (reading every match's
    id was ~40% of a search over many): the same hits, scores and order as `ORDER BY rank, id LIMIT`,
    ties at the cut included (repeated texts score the same: only the id orders them)."""
    index = MemoryKeywordIndex(tmp_path / "memories.sqlite")
    data = rows(90) + [(f"t{k:03d}", f"p{k % 3}", f"tsha{k}", "", "billing worker", "", "") for k in range(30, 0, -1)]
    index.replace([], data)
    for query in ("billing worker", "deploy the staging cluster", "retry", "nothing matches this"):
        for project in ("", "p0", "p2"):
            first = index._range(project)[0] if project else None
            where, args = ("AND rowid BETWEEN ? AND ?", [first, first + (1 << PROJECT_SHIFT) - 1]) if project else ("", [])
            for limit in (0, 1, 3, 12, 31, 500):
                expected = [(i, -float(r)) for i, r in index._db.execute(
                    f"SELECT id, bm25({TABLE}, {WEIGHTS}) AS rank FROM {TABLE} WHERE {TABLE} MATCH ? {where} "
                    "ORDER BY rank, id LIMIT ?", [match_expression(query), *args, limit])]
                assert [(h.id, h.bm25) for h in index.search(query, limit, project)] == expected
