"""Keyword search ranks inside FTS5: a row's body and snippet are read only when it is returned."""

from __future__ import annotations

from compiler.index.keywords import RANKED_SECTIONS, WEIGHTS, KeywordIndex, NoteRow, SectionRow


def index_with(tmp_path, bodies: dict[str, str]) -> KeywordIndex:
    index = KeywordIndex(tmp_path / "fts.sqlite")
    index.replace_paths([], [NoteRow(p, "0" * 64, p, "") for p in bodies],
                        [SectionRow(p, 0, 1, p, "", b, "") for p, b in bodies.items()])
    return index


def test_the_ranking_needs_no_sort_of_every_match(tmp_path):
    """SQLite's own sorter (a temp B-tree) would read the body and make the snippet of every match
    before keeping `limit` of them: at 10,000 notes a six-word query matched 11,000 sections."""
    index = index_with(tmp_path, {"a.md": "deploy"})
    weights = ", ".join(str(w) for w in WEIGHTS)
    plan = index._db.execute(f"EXPLAIN QUERY PLAN {RANKED_SECTIONS}", ('"deploy"', f"bm25({weights})")).fetchall()
    assert not [row for row in plan if "TEMP B-TREE" in row[-1]], plan
    index.close()


def test_ties_at_the_limit_are_kept_by_path_and_better_hits_come_first(tmp_path):
    # Same text, same length: the same BM25. Inserted out of path order, so rowid order is not path order.
    bodies = {f"n{k}.md": "deploy the service" for k in (5, 3, 9, 1, 7)}
    bodies["best.md"] = "deploy deploy deploy"
    index = index_with(tmp_path, bodies)
    hits = index.search("deploy", 3)
    assert [h.path for h in hits] == ["best.md", "n1.md", "n3.md"]
    assert hits[0].bm25 > hits[1].bm25 == hits[2].bm25
    assert "**deploy**" in hits[1].snippet and hits[1].body == "deploy the service"
    assert [h.path for h in index.search("deploy", 10)] == ["best.md", "n1.md", "n3.md", "n5.md", "n7.md", "n9.md"]
    assert index.search("deploy", 0) == [] and index.search("absent", 5) == []
    index.close()
