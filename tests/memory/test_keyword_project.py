"""The memory keyword index filters a project through its rows table: the same hits and BM25 as
filtering every match, and a cache written before the table held projects still answers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from compiler.index.keywords import TOKENIZER
from compiler.memory.index import TABLE, MemoryKeywordIndex

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


def write_old_cache(path: Path, data: list[tuple[str, ...]]) -> None:
    """The memory keyword index as the previous engram wrote it: a rows table of (id, text_sha) only."""
    db = sqlite3.connect(path)
    db.execute(f"CREATE VIRTUAL TABLE {TABLE} USING fts5(id UNINDEXED, project UNINDEXED, text_sha UNINDEXED, "
               f"title, content, context, context2, tokenize='{TOKENIZER}')")
    db.execute(f"CREATE TABLE {TABLE}_rows (id TEXT PRIMARY KEY, text_sha TEXT)")
    for row in data:
        rowid = db.execute(f"INSERT INTO {TABLE}_rows (id, text_sha) VALUES (?, ?)", (row[0], row[2])).lastrowid
        db.execute(f"INSERT INTO {TABLE} (rowid, id, project, text_sha, title, content, context, context2) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (rowid, *row))
    db.commit()
    db.close()


def test_an_old_cache_gets_its_projects_and_answers_the_same(tmp_path: Path) -> None:
    data = rows(60)
    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    write_old_cache(old, data)
    fresh = MemoryKeywordIndex(new)
    fresh.replace([], data)
    migrated = MemoryKeywordIndex(old)
    assert dict(migrated._db.execute(f"SELECT id, project FROM {TABLE}_rows")) == {r[0]: r[1] for r in data}
    for project in ("p0", "p2"):
        expected = [(h.id, h.bm25) for h in fresh.search("deploy staging worker", 10, project)]
        assert expected and [(h.id, h.bm25) for h in migrated.search("deploy staging worker", 10, project)] == expected
    assert migrated.hashes() == fresh.hashes()  # nothing to re-index: sync_index sees every row current
    migrated.close()
    fresh.close()
    MemoryKeywordIndex(old).close()  # opening it again changes nothing


def test_a_row_an_old_engram_adds_later_is_still_filtered(tmp_path: Path) -> None:
    """An older engram writing to a migrated cache leaves the project empty: the row is checked on its own."""
    path = tmp_path / "memories.sqlite"
    index = MemoryKeywordIndex(path)
    index.replace([], [("a", "p1", "s", "", "deploy staging", "", "")])
    index.close()
    db = sqlite3.connect(path)
    for memory_id, project in (("b", "p1"), ("c", "p2")):
        rowid = db.execute(f"INSERT INTO {TABLE}_rows (id, text_sha) VALUES (?, ?)", (memory_id, "s")).lastrowid
        db.execute(f"INSERT INTO {TABLE} (rowid, id, project, text_sha, title, content, context, context2) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (rowid, memory_id, project, "s", "", "deploy", "", ""))
    db.commit()
    db.close()
    index = MemoryKeywordIndex(path)
    assert sorted(h.id for h in index.search("deploy", 5, "p1")) == ["a", "b"]
    assert [h.id for h in index.search("deploy", 5, "p2")] == ["c"]
    index.close()
