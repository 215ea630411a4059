"""Integration: the bundled vault-example/ compiled with the real model and a real Chroma store.

The committed pages under vault-example/_engram/ are the golden files: a fresh compile of a
copy must reproduce them byte for byte, from what is committed alone — the notes and the
memories' chunk (vault-example/.engram/chunks/, made from agent-memories.jsonl by
`make example-chunk`), never a machine-local journal. After changing templates or parsing on
purpose, regenerate them with `make compile` and review the diff.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from compiler.core.settings import load_settings
from compiler.embed.embedder import load_embedder
from compiler.index import late_interaction
from compiler.index.keywords import KeywordIndex
from compiler.index.token_cache import TokenVectorCache
from compiler.memory.input import read_import_file
from compiler.memory.recall import recall
from compiler.memory.vault import VaultMemory
from compiler.memory.write import store_memory, write_memories
from compiler.notes.search import Filters, hybrid_search, keyword_search
from compiler.pipeline.spine import compile_vault
from compiler.wiki.layout import WikiLayout
from compiler.wiki.lint import lint_wiki
from tests.conftest import EXAMPLE_VAULT

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> tuple[Path, object]:
    vault = tmp_path_factory.mktemp("example") / "vault"
    # what a clone gets: the committed chunk and manifest, no cache, no journal
    shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns("cache", "journal.jsonl", "lock", "_engram"))
    settings = load_settings(vault)  # the example pins `now`, so memory strengths are reproducible
    assert not (vault / ".engram/journal.jsonl").exists() and list((vault / ".engram/chunks").glob("*.jsonl.gz"))
    report = compile_vault(vault, settings)
    with VaultMemory(vault, settings) as memories:  # the chunk's memories, and the file they were made from
        items, warnings = read_import_file(vault / "agent-memories.jsonl")
        assert not warnings and write_memories(memories, items)["actions"] == {"known": 20}
    return vault, report


def test_compile_reports_the_planted_problems(compiled):
    _, report = compiled
    # the person's 41 notes (Templates/ is ignored by the vault's engram.toml), the wiki's 12 files
    # (9 pages, index.md, log.md, AGENTS.md) and its 3 sources' text forms in raw/
    assert report.notes == 41 + 12 + 3
    broken = sorted((w.file, w.line) for w in report.warnings if w.kind == "broken-link")
    assert broken == [("Engineering/Incident Runbook.md", 10), ("Meetings/2026-10-21 Data Pipeline Planning.md", 12),
                      ("Notas/Objetivos del trimestre.md", 13), ("Projects/Payments/Payments Launch Checklist.md", 19)]
    frontmatter = [(w.file, w.line) for w in report.warnings if w.kind == "frontmatter"]
    assert frontmatter == [("Meetings/2026-10-09 Sprint 41 Retro.md", 3)]
    assert report.links["ambiguous"] == 0 and report.links["ok"] > 100


def test_the_wiki_lint_finds_the_planted_contradiction_and_the_wiki_navigation_is_as_committed(compiled):
    vault, _ = compiled
    findings = lint_wiki(WikiLayout.of(vault, load_settings(vault)))["findings"]
    planted = [f for f in findings if f["kind"] == "contradiction" and "wiki/entities/Amazon SQS.md" in f["related"]]
    assert [f["file"] for f in planted] == ["wiki/sources/Visibility Timeouts in Message Queues.md"], findings
    assert [f for f in findings if f["kind"] == "contradiction"] == planted  # and no false one beside it
    for name in ("index.md", "log.md"):  # compile regenerates them from the committed history: same bytes
        assert (vault / "wiki" / name).read_bytes() == (EXAMPLE_VAULT / "wiki" / name).read_bytes()


def test_pages_match_the_committed_golden_files(compiled):
    vault, _ = compiled
    produced = {p.relative_to(vault).as_posix(): p.read_bytes() for p in (vault / "_engram").rglob("*") if p.is_file()}
    golden = {p.relative_to(EXAMPLE_VAULT).as_posix(): p.read_bytes()
              for p in (EXAMPLE_VAULT / "_engram").rglob("*") if p.is_file()}
    assert sorted(produced) == sorted(golden)
    changed = [p for p in produced if produced[p] != golden[p]]
    assert not changed, f"regenerate with `make compile` if intended: {changed[:5]}"


def test_same_name_notes_resolve_by_folder(compiled):
    vault, _ = compiled
    pipeline = (vault / "_engram/backlinks/Projects/Data Pipeline/Overview.links.md").read_text()
    assert "[[_engram/backlinks/Projects/Data Pipeline/dbt Models.links|" in pipeline
    assert "Projects/Payments/Checkout Flow" not in pipeline


def test_qmd_links_become_visible_on_backlink_pages(compiled):
    vault, _ = compiled
    pages = [p.read_text() for p in (vault / "_engram/backlinks").rglob("*.links.md")]
    assert any("[[_engram/backlinks/Analyses/churn-model.qmd.links|" in page for page in pages)


@pytest.mark.parametrize("query, expected", [
    ("stripe webhook signature verification raw body", "Projects/Payments/Stripe Integration.md"),
    ("autovacuum scale factor dead tuples bloat", "Engineering/Postgres Tuning.md"),
    ("roll back a bad deploy previous task definition", "Engineering/Deployment.md"),
    ("deduplicar eventos de producto message_id", "Notas/Ideas para el pipeline de datos.md"),
    ("coste mensual de AWS por servicio", "Analyses/costes-infraestructura.qmd"),
])
def test_hybrid_query_finds_the_right_note_first(compiled, query, expected):
    vault, _ = compiled
    embedder = load_embedder(load_settings(vault).model)
    assert hybrid_search(vault, query, 3, embedder=embedder)[0]["file"] == expected


def test_every_section_has_the_token_vectors_the_rerank_reads(compiled):
    vault, report = compiled
    embedder = load_embedder(load_settings(vault).model)
    cache = vault / ".engram/cache"
    with sqlite3.connect(cache / "fts.sqlite") as db:
        titles = dict(db.execute("SELECT path, title FROM notes"))
        bodies = [(path, body) for path, body in db.execute("SELECT path, body FROM sections")]
    # The texts as hybrid search rebuilds them (the compile's section_text): none may be missing.
    texts = [body if body.startswith(titles[path]) else f"{titles[path]}\n{body}" for path, body in bodies]
    _, pieces = late_interaction.embed_query(embedder, "roll back a deploy")
    tokens = TokenVectorCache(cache / "embeddings.sqlite", readonly=True)
    matches = late_interaction.match_stored(tokens, embedder.identity, pieces, texts)
    assert len(matches) == report.sections and None not in matches and 0 < min(matches) <= max(matches) <= 1


def test_keyword_search_folds_accents_and_filters_by_tag(compiled):
    vault, _ = compiled
    assert keyword_search(vault, "reunion equipo datos")[0]["file"] == "Notas/Reunión con el equipo de datos.md"
    everything = keyword_search(vault, "webhook", 50)
    tagged = keyword_search(vault, "webhook", 50, Filters(tag="payments"))
    index = KeywordIndex(vault / ".engram/cache/fts.sqlite", readonly=True)
    tags = {path: row.tags.split() for path, row in index.notes(h["file"] for h in everything).items()}
    assert 0 < len(tagged) < len(everything)
    assert all(any(t == "payments" or t.startswith("payments/") for t in tags[h["file"]]) for h in tagged)


def test_memory_pages_and_recall_on_the_demo_project(compiled):
    vault, report = compiled
    assert report.memories["live"] + report.memories["archived"] == 20 and report.memories["archived"] > 0
    assert "water the office plant" in (vault / "_engram/memory/archive.md").read_text()  # faded since September
    project = (vault / "_engram/projects/acme-payments.md").read_text()
    assert "login-refactor" in project and "pie title Failures by component" in project
    with VaultMemory(vault, load_settings(vault)) as memories:
        hits = recall(memories, "how do we roll back a bad deploy?", 3, project="acme-payments", reinforce=False)
        replaced = store_memory(memories, memories_input(
            "The team decided to abandon TypeScript for Go in new backend services"))
    assert hits[0]["title"].startswith("Deploys are blue-green")
    assert replaced["action"] == "replaced" and "typescript" in replaced["reason"]


def memories_input(content: str):
    from compiler.memory.input import MemoryInput

    return MemoryInput(content=content, project="acme-payments", category="strategy")
