"""What a write rewrites in the index: the rows that changed, and they end as a full rebuild makes them."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from compiler.core.settings import Settings
from compiler.index.flat import store_path
from compiler.memory.index import COLLECTION, conversation_context, row_hash
from compiler.memory.input import MemoryInput
from compiler.memory.snapshot import event_mark
from compiler.memory.vault import VaultMemory, read_memories, sync_index
from compiler.memory.write import store_memory, write_memories

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def vector_rows(vault: Path) -> int:
    """Every row the flat store has appended (live and dead): a rewrite of a memory adds one."""
    db = sqlite3.connect(store_path(vault / ".engram" / "cache", COLLECTION))
    try:
        return int(db.execute("SELECT value FROM state WHERE key = 'rows'").fetchone()[0])
    finally:
        db.close()


def assert_rows_as_rebuilt(memories: VaultMemory) -> None:
    """The keyword rows' hashes are those a full `sync_index` computes from every memory's context."""
    indexed = read_memories(memories).indexed
    context = conversation_context(indexed)
    assert memories.index().keywords.hashes() == {i: row_hash(o, context.get(i, "")) for i, o in indexed.items()}


def test_a_reinforcement_rewrites_no_index_row(vault, fake_embedder):
    with VaultMemory(vault, replace(Settings()), embedder=fake_embedder, now=NOW) as memories:
        first = store_memory(memories, MemoryInput("Releases happen on Tuesdays after the freeze", project="web"))
        rows, hashes = vector_rows(vault), memories.index().keywords.hashes()
        again = store_memory(memories, MemoryInput("Releases happen on Tuesdays after the freeze", project="web"))
        assert (again["action"], again["id"]) == ("reinforced", first["id"])
        assert vector_rows(vault) == rows and memories.index().keywords.hashes() == hashes
        assert read_memories(memories).state[first["id"]].recall_count == 1
        assert_rows_as_rebuilt(memories)


def test_a_reinforced_memory_followed_by_a_new_one_gets_its_new_context(vault, fake_embedder):
    """In one batch the item after a reinforcement follows the reinforced memory (a conversation
    imported in order), so that memory's keyword row gains the new neighbour; its vector stays."""
    with VaultMemory(vault, replace(Settings()), embedder=fake_embedder, now=NOW) as memories:
        first = store_memory(memories, MemoryInput("Releases happen on Tuesdays after the freeze", project="web"))
        rows = vector_rows(vault)
        written = write_memories(memories, [MemoryInput("Releases happen on Tuesdays after the freeze", project="web"),
                                            MemoryInput("Grafana dashboards live in the ops repository", project="web")])
        assert [r["action"] for r in written["results"]] == ["reinforced", "new"]
        assert vector_rows(vault) == rows + 1  # the new memory's row only
        assert read_memories(memories).state[written["results"][1]["id"]].follows == first["id"]
        assert_rows_as_rebuilt(memories)


def test_a_closed_writer_leaves_the_next_reader_nothing_to_index_again(vault, fake_embedder):
    """The write path indexes as it appends; closing records it, so the next process's first read
    puts no memory again (it used to re-put the writer's last batch)."""
    items = [MemoryInput(f"The service number {i} runs on host {i}", project="p") for i in range(30)]
    with VaultMemory(vault, Settings(), embedder=fake_embedder, now=NOW) as memories:
        write_memories(memories, items)
    rows = vector_rows(vault)
    with VaultMemory(vault, Settings(), embedder=fake_embedder, now=NOW) as memories:
        events = read_memories(memories).events
        # the index says it is in step with every event: the first read checks nothing again
        assert memories.index().keywords.mark() == {**event_mark(events), "identity": memories.identity}
        assert sync_index(memories, read_memories(memories)) == 0
    assert vector_rows(vault) == rows  # nothing put again
