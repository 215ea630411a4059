"""Issue 11, item 7: bad local input (an import file, the journal) is reported by file and line and skipped.

Before the fix a deeply nested line raised RecursionError and a time that overflows once in
UTC raised OverflowError: neither is a ValueError, so each took the whole command down.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.core.settings import Settings
from compiler.events.journal import read_journal
from compiler.memory.input import MemoryInput, read_import_file
from compiler.memory.vault import VaultMemory, read_memories
from compiler.memory.write import store_memory

DEEP = "[" * 200_000 + "]" * 200_000
LATE = "9999-12-31T23:59:59-01:00"
EARLY = "0001-01-01T00:00:00+01:00"
RANGE = "is out of range once converted to UTC (years 1 to 9999)"


@pytest.fixture
def vault(make_vault) -> Path:
    return make_vault({"Home.md": "# Home\n"})


def test_an_import_line_with_an_overflowing_time_or_deep_nesting_is_skipped_naming_its_line(tmp_path):
    path = tmp_path / "memories.jsonl"
    path.write_text("\n".join([json.dumps({"content": "Redis runs in cluster mode", "project": "api"}),
                               json.dumps({"content": "Too early", "created_at": EARLY}),
                               DEEP,
                               json.dumps({"content": "Too late", "created_at": LATE}),
                               json.dumps({"content": "Postgres is version 16", "project": "api"})]) + "\n")
    items, warnings = read_import_file(path)
    assert [i.content for i in items] == ["Redis runs in cluster mode", "Postgres is version 16"]
    assert [(w.file, w.line, w.message) for w in warnings] == [
        ("memories.jsonl", 2, f"skipped: created_at '{EARLY}' {RANGE}"),
        ("memories.jsonl", 3, "skipped: nested deeper than 100 levels"),
        ("memories.jsonl", 4, f"skipped: created_at '{LATE}' {RANGE}")]


def test_a_journal_line_with_an_overflowing_time_or_deep_nesting_is_reported_and_skipped(vault, fake_embedder):
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        kept = store_memory(memories, MemoryInput("Before the bad lines", project="p"))
    bad = {"id": "ev-late", "op": "save", "memory": "mem-late", "at": LATE, "seq": 1, "data": {"content": "x"}}
    with open(vault / ".engram" / "journal.jsonl", "a", encoding="utf-8") as journal:
        journal.write(json.dumps(bad) + "\n" + DEEP + "\n")
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        after = store_memory(memories, MemoryInput("After the bad lines, on another topic", project="p"))
        assert set(read_memories(memories).state) == {kept["id"], after["id"]}
    events, warnings = read_journal(vault / ".engram")
    assert len(events) == 2
    assert [(w.file, w.line, w.message) for w in warnings] == [
        (".engram/journal.jsonl", 2, f"journal line skipped: `at` '{LATE}' {RANGE}"),
        (".engram/journal.jsonl", 3, "journal line skipped: nested deeper than 100 levels")]


def test_a_deeply_nested_transcript_line_is_a_bad_line_not_a_crash(tmp_path):
    from compiler.sync.bridges import read_transcripts

    call = {"type": "toolCall", "id": "call_1", "name": "engram_mem_save",
            "arguments": {"title": "Webhook retries", "content": "Stripe webhooks retry for 3 days"}}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"type": "message", "message": {"content": [call]}}) + "\n" + DEEP + "\n"
                    + json.dumps({"type": "message", "message": {"content": [{**call, "id": "call_2",
                                                                             "arguments": DEEP}]}}) + "\n")
    items, report = read_transcripts([path])
    assert [i.source_id for i in items] == ["s:call_1"] and report.bad_lines == 1


def nested(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"x": value}
    return value


def test_metadata_too_deep_for_every_reader_is_refused_at_write_time(vault, fake_embedder):
    from compiler.core.errors import InputError

    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        with pytest.raises(InputError, match="metadata fields nest deeper than 32 levels"):
            store_memory(memories, MemoryInput("Deep metadata", project="p", fields=nested(150)))
        kept = store_memory(memories, MemoryInput("Metadata 32 levels deep is fine", project="p", fields=nested(32)))
    with VaultMemory(vault, Settings(), embedder=fake_embedder) as memories:
        assert set(read_memories(memories).state) == {kept["id"]}  # its journal line reads back
    assert read_journal(vault / ".engram")[1] == []
