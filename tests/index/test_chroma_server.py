"""A team server: compile, search and memories against a real `chroma run` on 127.0.0.1.

The same vault compiled into the embedded store and then into the server must answer hybrid
and vector queries with the same files in the same order. The server starts on a free port
from the test itself and is stopped at the end.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from compiler.core.settings import load_settings
from compiler.embed.embedder import load_embedder
from compiler.memory.input import MemoryInput
from compiler.memory.recall import recall
from compiler.memory.vault import VaultMemory
from compiler.memory.write import store_memory
from compiler.notes.search import Filters, hybrid_search, vector_search
from compiler.pipeline.spine import compile_vault
from tests.chroma_run import CHROMA, ChromaDidNotStart, chroma_server
from tests.conftest import EXAMPLE_VAULT

pytestmark = pytest.mark.integration
QUERIES = ["how do we roll back a deploy?", "webhook retries after the outage", "postgres autovacuum tuning",
           "objetivos del trimestre", "feature flags"]
NOW = "2026-11-30 12:00:00"


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory) -> Iterator[str]:
    if not CHROMA.is_file():
        pytest.skip("the chroma CLI is not installed")
    try:
        with chroma_server(tmp_path_factory.mktemp("chroma-server")) as (url, _):
            yield url
    except ChromaDidNotStart as error:
        pytest.fail(f"chroma run did not start: {error}")


@pytest.fixture(scope="module")
def vault(tmp_path_factory) -> Path:
    vault = tmp_path_factory.mktemp("team") / "vault"
    shutil.copytree(EXAMPLE_VAULT, vault, ignore=shutil.ignore_patterns(".engram", "_engram"))
    return vault


def test_compile_and_query_on_a_chroma_server_match_the_embedded_store(vault, chroma_url):
    embedder = load_embedder(load_settings(vault).model)
    local = load_settings(vault)
    compile_vault(vault, local, embedder=embedder)
    embedded = {q: hybrid_search(vault, q, 8, Filters(), embedder=embedder) for q in QUERIES}
    by_vector = {q: vector_search(vault, q, 8, Filters(), embedder=embedder) for q in QUERIES}
    pages = {p: p.read_bytes() for p in sorted((vault / "_engram").rglob("*.md"))}

    team = load_settings(vault, chroma_url=f"{chroma_url}/team-notes")
    report = compile_vault(vault, team, embedder=embedder)  # nothing changed locally: the server still fills
    assert report.embedded == 0
    served = {q: hybrid_search(vault, q, 8, Filters(), embedder=embedder, chroma_url=team.chroma_url)
              for q in QUERIES}
    for query in QUERIES:
        assert [h["file"] for h in served[query]] == [h["file"] for h in embedded[query]], query
        assert [h["score"] for h in served[query]] == pytest.approx([h["score"] for h in embedded[query]], abs=1e-3)
        vectors = vector_search(vault, query, 8, Filters(), embedder=embedder, chroma_url=team.chroma_url)
        assert [h["file"] for h in vectors] == [h["file"] for h in by_vector[query]], query
    assert {p: p.read_bytes() for p in sorted((vault / "_engram").rglob("*.md"))} == pages


def test_memories_on_a_chroma_server(vault, chroma_url, make_vault):
    team = load_settings(vault, chroma_url=f"{chroma_url}/team-notes", now=NOW)
    embedder = load_embedder(team.model)
    with VaultMemory(vault, team, embedder=embedder) as memory:
        saved = store_memory(memory, MemoryInput(content="The payments API rate limit is 100 requests per second",
                                                 project="payments"))
        hits = recall(memory, "how many requests per second can payments take?", 3, project="payments")
        # Resolve asks the server for the nearest of the item's own project and kind (a `$and` where).
        again = store_memory(memory, MemoryInput(content="The payments API rate limit is 100 requests per second",
                                                 project="payments"))
        elsewhere = store_memory(memory, MemoryInput(content="The payments API rate limit is 100 requests per second",
                                                     project="billing"))
    assert hits[0]["id"] == saved["id"]
    assert (again["action"], again["id"], elsewhere["action"]) == ("reinforced", saved["id"], "new")

    # A second vault on the same server gets its own collections: neither clobbers the other.
    other = make_vault({".obsidian/app.json": "{}", "Only.md": "# Only\n\nA lone note about kayaks.\n"})
    compile_vault(other, load_settings(other, chroma_url=f"{chroma_url}/other-vault"), embedder=embedder)
    hits = hybrid_search(vault, "webhook retries", 3, Filters(), embedder=embedder, chroma_url=team.chroma_url)
    assert hits and all(h["file"] != "Only.md" for h in hits)

    import chromadb

    names = {c.name for c in chromadb.HttpClient(host="127.0.0.1", port=int(chroma_url.rsplit(":", 1)[1]))
             .list_collections()}
    assert {"team-notes-sections", "team-notes-memories", "other-vault-sections"} <= names
