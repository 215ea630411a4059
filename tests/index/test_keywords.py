"""The keyword index (SQLite FTS5): CJK text is found by its character pairs; other scripts rank as before."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from compiler.cli.main import main
from compiler.pipeline.spine import compile_vault
from compiler.core.settings import load_settings
from compiler.index.keywords import KeywordIndex, NoteRow, SectionRow, cjk_pairs, match_expression

NOTES = {
    "Chinese.md": ("语义图谱", "我们用语义图谱把笔记连接起来，构建知识网络。"),
    "Japanese.md": ("検索", "全文検索エンジンはデータベースを素早く調べます。"),
    "Korean.md": ("회의록", "데이터베이스를 백업하는 방법을 회의에서 정했습니다."),
    "English.md": ("Deploys", "We deploy the payments service with blue-green releases."),
    "Spanish.md": ("Despliegue", "Desplegamos el servicio de pagos con releases blue-green."),
}


def index_of(tmp_path) -> KeywordIndex:
    index = KeywordIndex(tmp_path / "fts.sqlite")
    index.replace_paths([], [NoteRow(p, "0" * 64, t, "") for p, (t, _) in NOTES.items()],
                        [SectionRow(p, 0, 1, t, "", b, "") for p, (t, b) in NOTES.items()])
    return index


def test_cjk_runs_become_overlapping_pairs():
    assert cjk_pairs("构建语义图谱的方法") == "构建 建语 语义 义图 图谱 谱的 的方 方法"
    assert cjk_pairs("a 中 b") == "中" and cjk_pairs("plain text") == ""
    assert match_expression("语义图谱") == '"语义图谱" OR "语义" OR "义图" OR "图谱"'
    assert match_expression("how do we deploy?") == '"deploy"'  # other scripts: as before


def test_chinese_japanese_and_korean_words_inside_longer_runs_are_found(tmp_path):
    index = index_of(tmp_path)
    for query, expected in (("语义图谱", "Chinese.md"), ("知识", "Chinese.md"), ("データベース", "Japanese.md"),
                            ("全文検索", "Japanese.md"), ("데이터베이스", "Korean.md"), ("백업", "Korean.md")):
        hits = index.search(query, 5)
        assert hits and hits[0].path == expected, (query, hits)
    assert [h.path for h in index.search("deploy payments", 5)] == ["English.md"]
    assert [h.path for h in index.search("desplegamos pagos", 5)] == ["Spanish.md"]
    index.close()


def test_an_index_written_without_the_pair_column_is_rebuilt_and_still_readable(tmp_path):
    path = tmp_path / "fts.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE VIRTUAL TABLE sections USING fts5(path UNINDEXED, ordinal UNINDEXED, line UNINDEXED, "
                "title, heading, body, tags, tokenize='porter unicode61 remove_diacritics 2')")
    old.execute("CREATE TABLE notes (path TEXT PRIMARY KEY, sha256 TEXT, title TEXT, tags TEXT)")
    old.execute("INSERT INTO sections VALUES ('a.md', 0, 1, 'A', '', 'deploy notes', '')")
    old.commit()
    old.close()
    reader = KeywordIndex(path, readonly=True)  # a search before the next compile still answers
    assert [h.path for h in reader.search("deploy", 5)] == ["a.md"]
    reader.close()
    writer = KeywordIndex(path)
    assert writer.count() == 0  # emptied: the compile sees the count disagree and refills it
    writer.close()


def test_engram_search_finds_a_chinese_note(make_vault, fake_embedder):
    vault = make_vault({f"{name}": f"# {title}\n\n{body}\n" for name, (title, body) in NOTES.items()})
    compile_vault(vault, load_settings(vault), embedder=fake_embedder)
    result = CliRunner().invoke(main, ["search", "语义图谱", "--vault", str(vault), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["file"] == "Chinese.md"


def test_coverage_is_the_share_of_the_query_keyword_weight_the_vault_holds(tmp_path):
    index = index_of(tmp_path)
    assert index.coverage("deploy payments") == 1.0
    assert index.coverage("reintentar peticiones fallidas") == 0.0  # words no note uses
    assert 0.0 < index.coverage("deploy zanzibar") < 1.0
    index.close()
